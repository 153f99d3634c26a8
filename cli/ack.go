package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/durable-pi/subagents/client"
)

// ackOptions are `ack DELEGATION_ID... [--by WHO]`.
type ackOptions struct {
	by string
}

func (o *ackOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.by, "by", "", "who received the results (recorded in the history)")
}

func (o *ackOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	ids, err := cmd.needIDs()
	if err != nil {
		return err
	}
	var envs []client.Envelope
	for _, id := range ids {
		env, err := c.Ack(ctx, id, o.by)
		if err != nil {
			return err
		}
		envs = append(envs, env)
	}
	return cmd.finishQuiet(combine("ack", envs), func(env client.Envelope) {
		for _, e := range envs {
			_, _ = fmt.Fprintf(cmd.io.Out, "%s: delivered=%v\n", e.DelegationID, e.Delivered)
		}
	})
}
