package workflows

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// TestHandMadeInputWithABadName: a Session started by hand with an agent
// or profile that is not a valid name fails at once with INVALID_INPUT,
// before any child run.
func TestHandMadeInputWithABadName(t *testing.T) {
	const bad = "../../../../tmp/x/notes"
	tests := []struct {
		name string
		edit func(*api.SessionInput)
	}{
		{"agent", func(in *api.SessionInput) { in.Agent = bad }},
		{"profile", func(in *api.SessionInput) { in.Child.Profile = bad }},
		{"session ID", func(in *api.SessionInput) { in.SessionID = "../s" }},
		{"one-task delegation's profile", func(in *api.SessionInput) {
			in.Delegation = &api.DelegationRole{ID: api.OneTaskDelegationID(in.SessionID), Task: api.TaskSpec{Profile: bad}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := &fakeChild{results: []api.RunPiResult{finalized("ran")}}
			env := newTestEnv(t, child.run)
			in := oneTurn("Do it.")
			tt.edit(&in)
			env.ExecuteWorkflow(api.SessionWorkflowName, in)
			var appErr *temporal.ApplicationError
			if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != string(errcode.InvalidInput) {
				t.Fatalf("workflow error %v, want INVALID_INPUT", err)
			}
			if len(child.inputs) != 0 {
				t.Fatalf("a child ran: %+v", child.inputs)
			}
		})
	}
}
