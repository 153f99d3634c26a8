package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/durable-pi/subagents/api"
)

// TestSessionCancelCancelsWhatItsChildDelegated: a cancelled run of a
// child that could delegate (a delegation tool among its tools) cancels
// what it started, by its session ID; a child that could not delegate
// asks nothing of the kind.
func TestSessionCancelCancelsWhatItsChildDelegated(t *testing.T) {
	for _, c := range []struct {
		name  string
		tools []string
		want  []string
	}{
		{"a child that delegates", []string{"read", "task"}, []string{"s-1"}},
		{"a child without delegation tools", []string{"read"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv(t, untilCancelled(api.RunPiResult{}))
			var asked []string
			env.RegisterActivityWithOptions(func(_ context.Context, sessionID string) (int, error) {
				asked = append(asked, sessionID)
				return 1, nil
			}, activity.RegisterOptions{Name: CancelNestedActivityName})
			env.SetTestTimeout(30 * time.Second)
			in := oneTurn("Delegate.")
			in.Child.Tools = c.tools
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(api.CancelSignal, api.CancelRequest{Reason: "test"})
			}, time.Second)
			env.ExecuteWorkflow(api.SessionWorkflowName, in)
			var res api.SessionResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.LastTurn == nil || res.LastTurn.State != api.StateCancelled {
				t.Fatalf("turn %+v", res.LastTurn)
			}
			if len(asked) != len(c.want) || (len(asked) > 0 && asked[0] != c.want[0]) {
				t.Fatalf("CancelNested asked for %v, want %v", asked, c.want)
			}
		})
	}
}
