package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// `apply [--discard] ID...` applies the changes of tasks that ran in a
// worktree to the checkout, or discards them (docs/worktrees.md).
// applyOptions are `apply [--discard] ID...`.
type applyOptions struct {
	discard bool
}

func (o *applyOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.discard, "discard", false, "delete each change's branch and patch instead of applying it")
}

func (o *applyOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	ids, err := cmd.needIDs()
	if err != nil {
		return err
	}
	var envs []client.Envelope
	for _, id := range ids {
		env, err := c.Apply(ctx, id, o.discard)
		if err != nil {
			return err
		}
		envs = append(envs, env)
	}
	env := combineApply(envs, o.discard)
	if cmd.asJSON {
		if err := cmd.printJSON(env); err != nil {
			return err
		}
	} else {
		_, _ = fmt.Fprintln(cmd.io.Out, env.Text)
	}
	return applyExit(env)
}

// combineApply merges the answers for several IDs into one envelope.
func combineApply(envs []client.Envelope, discard bool) client.Envelope {
	if len(envs) == 1 {
		return envs[0]
	}
	out := client.Envelope{ContractVersion: client.ContractVersion, Op: "apply", Backend: client.Backend, Done: true}
	for _, e := range envs {
		out.Items = append(out.Items, e.Items...)
		if out.Text != "" {
			out.Text += "\n"
		}
		out.Text += e.Text
	}
	out.Status = client.ApplyApplied
	if discard {
		out.Status = client.ApplyDiscarded
	}
	for _, e := range envs {
		switch e.Status {
		case client.ApplyConflict:
			out.Status = client.ApplyConflict
		case client.ApplyFailed:
			if out.Status != client.ApplyConflict {
				out.Status = client.ApplyFailed
			}
		}
	}
	return out
}

// applyExit is the exit of an apply whose envelope is printed: a conflict
// exits with APPLY_CONFLICT's code (2), a task without a change to apply
// with its own code, else 0.
func applyExit(env client.Envelope) error {
	conflicts, failed := 0, 0
	var first *errcode.Info
	for _, it := range env.Items {
		switch it.Status {
		case client.ApplyConflict:
			conflicts++
		case client.ApplyFailed:
			failed++
			if first == nil {
				first = it.Error
			}
		}
	}
	switch {
	case conflicts > 0:
		return errcode.Wrap(errcode.ApplyConflict, errTaskFailed,
			fmt.Sprintf("%d of %s %s with the checkout; nothing of %s applied", conflicts, plural(len(env.Items), "change"),
				agree(conflicts, "conflicts", "conflict"), agree(conflicts, "it was", "them was")))
	case failed > 0 && first != nil:
		return errcode.Wrap(first.Code, errTaskFailed, fmt.Sprintf("%d of %s %s no change to apply here: %s",
			failed, plural(len(env.Items), "task"), agree(failed, "has", "have"), first.Message))
	}
	return nil
}
