package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// idsOptions are `status ID...`, `cancel ID...` and `transcript ID`: the
// IDs are their only arguments.
type idsOptions struct{}

func (o *idsOptions) register(*flag.FlagSet) {}

func (o *idsOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	ids, err := cmd.needIDs()
	if err != nil {
		return err
	}
	if cmd.verb == "transcript" {
		if len(ids) != 1 {
			return errcode.New(errcode.InvalidInput, "transcript takes one session ID")
		}
		env, err := c.Transcript(ctx, ids[0])
		if err != nil {
			return err
		}
		return cmd.finish(env, func(env client.Envelope) { _, _ = fmt.Fprintln(cmd.io.Out, env.Text) })
	}
	var envs []client.Envelope
	for _, id := range ids {
		var env client.Envelope
		if cmd.verb == "cancel" {
			env, err = c.Cancel(ctx, id)
		} else {
			env, err = c.Status(ctx, id)
		}
		if err != nil {
			return err
		}
		envs = append(envs, env)
	}
	env := combine(cmd.verb, envs)
	if cmd.verb == "cancel" {
		return cmd.finishQuiet(env, cmd.printCancel)
	}
	return cmd.finishQuiet(env, func(env client.Envelope) { printTree(cmd.io.Out, env, false) })
}
