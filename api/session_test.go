package api

import (
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

// TestAsDelegation: a session that is its own one-task delegation reports
// that delegation as a delegation of several tasks reports its task: not
// done until the first turn has ended, a task refused before any child ran
// counted as rejected, a cancelled one as cancelled.
func TestAsDelegation(t *testing.T) {
	turn := func(st State, runs int, code errcode.Code) *TurnResult {
		tr := &TurnResult{Turn: 1, State: st, ChildRuns: runs, Usage: Usage{Input: 10, Turns: 1}}
		if code != "" {
			tr.Error = errcode.NewInfo(code, "why")
		}
		return tr
	}
	tests := []struct {
		name     string
		state    State
		first    *TurnResult
		want     State
		task     State
		done     bool
		rejected int
		batch    string
	}{
		{"queued", StateQueued, nil, StateRunning, StateQueued, false, 0, "accepted"},
		{"running", StateRunning, nil, StateRunning, StateRunning, false, 0, "accepted"},
		{"completed, then waiting for a send", StateWaitingForInput, turn(StateCompleted, 1, ""), StateCompleted, StateCompleted, true, 0, "completed"},
		{"a later turn runs", StateRunning, turn(StateCompleted, 2, ""), StateCompleted, StateCompleted, true, 0, "completed"},
		{"refused before a child ran", StateFailed, turn(StateFailed, 0, errcode.UnknownAgent), StateFailed, StateFailed, true, 1, "rejected"},
		{"cancelled", StateCancelled, turn(StateCancelled, 1, errcode.Cancelled), StateCancelled, StateCancelled, true, 0, "completed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := SessionStatus{SessionID: "s-1", Name: "task", State: tc.state, Model: "m/x",
				Delegation: &DelegationView{ID: OneTaskDelegationID("s-1"), Profile: "scout", FirstTurn: tc.first, ParentSessionID: "p"}}
			d := st.AsDelegation()
			task := d.Tasks[0]
			if d.DelegationID != "delegation-s-1" || d.State != tc.want || d.Done != tc.done || d.RejectedCount != tc.rejected ||
				d.AcceptedCount != 1-tc.rejected || d.TotalCount != 1 || d.BatchStatus != tc.batch || d.ParentSessionID != "p" {
				t.Fatalf("delegation %+v", d)
			}
			if task.State != tc.task || task.SessionID != "s-1" || task.Profile != "scout" || task.Model != "m/x" || task.Name != "task" {
				t.Fatalf("task %+v", task)
			}
			if tc.done && tc.rejected == 0 && (task.Turn == nil || d.Usage.Input != 10) {
				t.Fatalf("the task's turn and usage: %+v, %+v", task.Turn, d.Usage)
			}
		})
	}
}
