package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// outputOptions are `output ID [--full [--from N]]`.
type outputOptions struct {
	full bool
	from int
}

func (o *outputOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.full, "full", false, "the whole output, not cut to the output cap (read on the worker)")
	fs.IntVar(&o.from, "from", -1, "with --full: one page from this character on (next_from says where the next begins)")
}

func (o *outputOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	ids, err := cmd.needIDs()
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return errcode.New(errcode.InvalidInput, "output takes one session ID")
	}
	if o.from >= 0 && !o.full {
		return errcode.New(errcode.InvalidInput, "--from pages the full output: give --full too")
	}
	env, err := c.OutputFrom(ctx, ids[0], o.full, o.from)
	if err != nil {
		return err
	}
	return cmd.finishQuiet(env, func(env client.Envelope) { _, _ = fmt.Fprintln(cmd.io.Out, env.Text) })
}
