package cli

import (
	"context"
	"flag"

	"github.com/durable-pi/subagents/client"
)

// listOptions are `list [--status S] [--agent A] [--parent-session P]
// [--cwd D] [--kind K] [--open] [--limit N]`.
type listOptions struct {
	filter client.ListFilter
}

func (o *listOptions) register(fs *flag.FlagSet) {
	f := &o.filter
	fs.StringVar(&f.Status, "status", "", "only runs in this `state`: queued, running, completed, failed, cancelled, timed_out, terminated (README's glossary; waiting_for_input: open sessions between turns)")
	fs.StringVar(&f.Agent, "agent", "", "only sessions of this profile")
	fs.StringVar(&f.ParentSessionID, "parent-session", "", "only what this pi session started")
	fs.StringVar(&f.Cwd, "cwd", "", "only tasks that ran in this folder")
	fs.StringVar(&f.Kind, "kind", "", "session or delegation (default: both)")
	fs.BoolVar(&f.Open, "open", false, "only workflows that are still open")
	fs.IntVar(&f.Limit, "limit", 0, "at most this many (default 100): open runs first, newest first, then closed ones, last closed first")
}

func (o *listOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	f := o.filter
	f.Cwd = absPath(f.Cwd)
	env, err := c.List(ctx, f)
	if err != nil {
		return err
	}
	return cmd.finishQuiet(env, cmd.printList)
}
