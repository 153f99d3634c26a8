package client

import (
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// endedMessage says why a task has no result of its own: Temporal ended its
// workflow (an operator's terminate or cancel, a workflow timeout) before
// its code recorded one.
func endedMessage(st api.State) *errcode.Info {
	switch st {
	case api.StateCancelled:
		return errcode.NewInfo(errcode.Cancelled, "The workflow was cancelled through Temporal before the task ended.")
	case api.StateTimedOut:
		return errcode.NewInfo(errcode.Timeout, "The workflow timed out before the task ended.")
	case api.StateFailed:
		return errcode.NewInfo(errcode.Failed, "The workflow failed before the task ended.")
	}
	return errcode.NewInfo(errcode.Terminated, "The workflow was terminated through Temporal (temporal workflow terminate) before the task ended; its child run did not report a result.")
}

// endedByTemporal makes st, a delegation whose workflow Temporal ended as
// ended before its tasks did, say so: it is done, in that state, and so
// is each task that had not ended; finished tasks keep their results.
func endedByTemporal(st *api.DelegationStatus, ended api.State) {
	for i := range st.Tasks {
		if t := &st.Tasks[i]; !t.State.Terminal() {
			t.State, t.Error = ended, endedMessage(ended)
		}
	}
	st.Done = true
	st.Summarize(false)
	st.State = ended
}

// sessionEndedByTemporal makes the status of a closed session say how
// Temporal ended it, when that was not its code's own end (exec is its
// execution status): a session terminated or cancelled while idle keeps its
// last turn's result, but is reported as terminated or cancelled.
func sessionEndedByTemporal(env *Envelope, exec enumspb.WorkflowExecutionStatus) {
	ended := api.ClosedAs(exec, api.State(env.Status))
	if ended == "" || ended == api.State(env.Status) {
		// Its code's own end: a session closes as its turn ended
		// (version 5), a failed one failed.
		return
	}
	env.Status, env.Done = string(ended), true
	if len(env.Items) == 1 {
		it := &env.Items[0]
		it.Status, it.SessionState, it.Done = string(ended), string(ended), true
		if it.Error == nil {
			it.Error = endedMessage(ended)
		}
	}
}
