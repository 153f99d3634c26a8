package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
)

// soloCeiling measures what the throughput lever left in the levers table
// could give at most: one workflow for a one-task delegation. It runs the
// same stub task as a one-task delegation (delegation and session
// workflows, as the product does) and, in turn, as a session workflow
// started directly with the input the delegation gave its session (what a
// single workflow would cost at least: no delegation workflow, no child
// start, no signal back, the result by the workflow's own completion).
// Not a path the product offers: it is the ceiling of a change not made,
// run only with -only solo.
func (b *bench) soloCeiling(rounds int) (string, error) {
	c := b.stub
	in, err := b.stubSessionInput(c)
	if err != nil {
		return "", err
	}
	session := func(int) error {
		x := in
		x.SessionID = uuid.NewString()
		run, err := c.Temporal.ExecuteWorkflow(b.ctx, sdkclient.StartWorkflowOptions{ID: x.SessionID, TaskQueue: c.TaskQueue}, api.SessionWorkflowName, x)
		if err != nil {
			return err
		}
		var res api.SessionResult
		if err := run.Get(b.ctx, &res); err != nil {
			return err
		}
		if res.LastTurn == nil || res.LastTurn.Error != nil {
			return fmt.Errorf("stub session %s: %+v", x.SessionID, res)
		}
		return nil
	}
	delegation := func(int) error { _, err := b.stubTasks(1); return err }

	var r strings.Builder
	r.WriteString("\n## One workflow per task: the ceiling (stub child)\n\n")
	r.WriteString("The same stub task kept in flight, as a one-task delegation and, in turn, as a session workflow started directly (no delegation workflow: the least one workflow per one-task delegation would cost). Not a path the product offers.\n\n")
	r.WriteString("| round | concurrency | tasks | delegation + session: tasks/s | session alone: tasks/s | ratio |\n| --- | --- | --- | --- | --- | --- |\n")
	for round := range rounds {
		for _, conc := range []struct{ limit, total int }{{1, 40}, {16, 128}} {
			dw, err := inFlight(conc.total, conc.limit, delegation)
			if err != nil {
				return "", err
			}
			// The visibility queue is still writing the last records.
			time.Sleep(time.Second)
			sw, err := inFlight(conc.total, conc.limit, session)
			if err != nil {
				return "", err
			}
			time.Sleep(time.Second)
			d, s := float64(conc.total)/dw.Seconds(), float64(conc.total)/sw.Seconds()
			fmt.Fprintf(&r, "| %d | %d | %d | %.1f | %.1f | %.2f× |\n", round+1, conc.limit, conc.total, d, s, s/d)
		}
	}
	return r.String(), nil
}

// stubSessionInput runs one stub delegation and reads the input its
// delegation gave the session (the resolved child included) from the
// session's history, made to complete after its turn and notify nobody.
func (b *bench) stubSessionInput(c *client.Client) (api.SessionInput, error) {
	var in api.SessionInput
	env, err := c.Start(b.ctx, b.stubRequest(1))
	if err != nil {
		return in, err
	}
	if _, err := c.Wait(b.ctx, env.DelegationID, time.Minute); err != nil {
		return in, err
	}
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	ev, err := c.Temporal.GetWorkflowHistory(ctx, env.TaskID, "", false, 0).Next()
	if err != nil {
		return in, err
	}
	if err := sdkclient.NewValue(ev.GetWorkflowExecutionStartedEventAttributes().GetInput()).Get(&in); err != nil {
		return in, err
	}
	in.NotifyWorkflowID, in.NotifyIndex, in.IdleTTLSeconds = "", 0, -1
	return in, nil
}
