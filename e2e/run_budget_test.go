package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestRunBudgetStopsTheChild: a session whose child has a budget (a plan
// step's), started through Temporal as the plan workflow starts its steps.
// A child that keeps calling tools is stopped once it has spent its tool
// calls or its tokens: the turn fails with BUDGET_EXCEEDED saying what
// was spent of what, with no corrective run after it, and keeps the
// calls, the usage and the session file. Before: the budget was not
// looked at, and the child ran until its script ran out.
func TestRunBudgetStopsTheChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	tests := []struct {
		name   string
		budget api.Budget
		want   string
	}{
		{"tool calls", api.Budget{ToolCalls: 2}, "Budget exceeded: 2 tool calls of a budget of 2; the child was stopped"},
		// Each answer of the script costs 120 tokens: the third passes 300.
		{"tokens", api.Budget{Tokens: 300}, "Budget exceeded: 360 tokens of a budget of 300; the child was stopped"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := fmt.Sprintf("busy-%d", i)
			var steps []scriptedmodel.Step
			for n := range 8 {
				// The calls past the budget take long: the stop, which
				// comes as the third answer ends, lands while pi runs the
				// call it asked for (a fast one was done and the fourth
				// request sent first on a loaded machine).
				command := fmt.Sprintf("echo %d", n)
				if n >= 2 {
					command = "sleep 30; " + command
				}
				steps = append(steps, scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, command)}}})
			}
			e.model.Script(script, steps...)
			in := e.sessionInput("[[script:" + script + "]] Count to eight, one call at a time.")
			budget := tt.budget
			in.Child.Budget = &budget
			var res api.SessionResult
			if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
				t.Fatalf("session: %v", err)
			}
			turn := res.LastTurn
			if turn.State != api.StateFailed || turn.Error == nil || turn.Error.Code != errcode.BudgetExceeded || turn.Error.Message != tt.want {
				t.Fatalf("turn %s, error %+v", turn.State, turn.Error)
			}
			// Stopped as its third answer asked for a third call, and not
			// sent back with corrective feedback.
			if turn.ChildRuns != 1 || len(e.model.RequestsFor(script)) != 3 {
				t.Fatalf("child runs %d, %d model requests", turn.ChildRuns, len(e.model.RequestsFor(script)))
			}
			r := turn.Result
			if r.ToolCalls != 2 || len(r.ToolRows) != 2 || r.ToolRows[1].Status != "ok" || turn.Usage.Turns != 3 || turn.Usage.Input != 300 {
				t.Fatalf("tool calls %d rows %+v usage %+v", r.ToolCalls, r.ToolRows, turn.Usage)
			}
			b, err := os.ReadFile(r.SessionFile)
			if err != nil || !strings.Contains(string(b), `echo 1`) {
				t.Fatalf("session file: %v", err)
			}
		})
	}
}
