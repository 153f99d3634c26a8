package cli

import (
	"context"
	"io"

	"github.com/durable-pi/subagents/internal/errcode"
)

// serviceMain is `subagents service install|uninstall|status`: the local
// service started at login (docs/schedules.md).
func serviceMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errcode.New(errcode.InvalidInput, "subagents service is being built (issue [schedules and fleet])")
}
