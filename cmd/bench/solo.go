package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
)

// oneWorkflow measures workflow code version 3 against version 2 side by
// side: the same stub task kept in flight as a one-task delegation (one
// workflow, its session, as every client now starts it) and, in turn, as
// version 2 ran it (a Delegation workflow that starts the session as its
// child and hears from it when its turn ends), started with the input a
// version 2 client gave it. Run only with -only solo: the levers table
// keeps its figures.
func (b *bench) oneWorkflow(rounds int) (string, error) {
	c := b.stub
	current := func(int) error { _, err := b.stubTasks(1); return err }
	version2 := func(int) error {
		req := b.stubRequest(1)
		id := api.DelegationIDPrefix + uuid.NewString()
		in := api.DelegationInput{Tasks: req.Tasks, SessionIDs: []string{uuid.NewString()}, IdleTTLSeconds: req.IdleTTLSeconds,
			MaxConcurrency: req.MaxConcurrency, Version: 2}
		in.Tasks[0].Name = "t0"
		_, err := c.Temporal.ExecuteWorkflow(b.ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: c.TaskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(api.AgentKey.ValueSet("delegation"),
				api.StatusKey.ValueSet(string(api.StateRunning)), api.CwdKey.ValueSet(b.workDir))}, api.DelegationWorkflowName, in)
		if err != nil {
			return err
		}
		done, err := c.Wait(b.ctx, id, time.Minute)
		if err != nil {
			return err
		}
		if !done.Done || done.Status != "completed" {
			return fmt.Errorf("version 2 delegation: %+v", done)
		}
		return nil
	}

	var r strings.Builder
	r.WriteString("\n## One workflow per one-task delegation (stub child)\n\n")
	r.WriteString("The same stub task kept in flight as a one-task delegation (version 3: one workflow, its session) and, in turn, as version 2 ran it (a delegation workflow and its session).\n\n")
	r.WriteString("| round | concurrency | tasks | version 2: tasks/s | version 3: tasks/s | ratio |\n| --- | --- | --- | --- | --- | --- |\n")
	for round := range rounds {
		for _, conc := range []struct{ limit, total int }{{1, 40}, {16, 128}} {
			ow, err := inFlight(conc.total, conc.limit, version2)
			if err != nil {
				return "", err
			}
			// The visibility queue is still writing the last records.
			time.Sleep(time.Second)
			nw, err := inFlight(conc.total, conc.limit, current)
			if err != nil {
				return "", err
			}
			time.Sleep(time.Second)
			o, n := float64(conc.total)/ow.Seconds(), float64(conc.total)/nw.Seconds()
			fmt.Fprintf(&r, "| %d | %d | %d | %.1f | %.1f | %.2f× |\n", round+1, conc.limit, conc.total, o, n, n/o)
		}
	}
	return r.String(), nil
}
