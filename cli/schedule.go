package cli

import (
	"context"
	"flag"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// scheduleOptions are `schedule ACTION ...` (docs/schedules.md).
type scheduleOptions struct{}

func (o *scheduleOptions) register(fs *flag.FlagSet) {}

func (o *scheduleOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	return errcode.New(errcode.InvalidInput, "subagents schedule is being built (issue [schedules and fleet])")
}
