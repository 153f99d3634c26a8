package cli

import (
	"context"
	"flag"
	"fmt"
	"slices"

	"github.com/durable-pi/subagents/api"
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
		if cmd.verb == "cancel" {
			env.PriorStatus = taskPrior(env)
		}
		envs = append(envs, env)
	}
	env := combine(cmd.verb, envs)
	if cmd.verb == "cancel" {
		if len(envs) > 1 {
			env.PriorStatus = collectionPrior(envs)
		}
		return cmd.finishQuiet(env, cmd.printCancel)
	}
	return cmd.finishQuiet(env, func(env client.Envelope) { printTree(cmd.io.Out, env, false, c.CurrentTime()) })
}

// taskPrior is the prior_status of one ID's cancel as a task status (the
// task contract's field; README, "Statuses"). A session of a code version
// before 4 records waiting_for_input between turns, which is no task
// status: its task was then in the state its last turn ended in, which the
// answer's status still says (a cancel between turns changes nothing).
func taskPrior(env client.Envelope) string {
	if env.PriorStatus == "" || slices.Contains(api.States, api.State(env.PriorStatus)) {
		return env.PriorStatus
	}
	return env.Status
}

// collectionPrior is the top-level prior_status of a cancel of several IDs:
// the status `status` gave the same IDs just before, by the rule that
// gives a collection's status (combine, collectionState). Each ID's own
// prior_status is on its items.
func collectionPrior(envs []client.Envelope) string {
	states := make([]api.State, len(envs))
	for i, e := range envs {
		states[i] = api.State(e.PriorStatus)
	}
	return string(collectionState(states))
}
