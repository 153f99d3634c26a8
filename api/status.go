package api

import (
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
)

// State is where a session, task or delegation stands: the one status
// vocabulary of the README's glossary. The workflows record it in the
// SubagentStatus search attribute; every surface (status, list and its
// filters, the UI, the extension) derives what it shows from that record
// and the workflow's execution status, through ClosedAs and StateClause.
type State string

// States. A session's state is its running turn's (queued, running) or how
// its last turn ended; whether it still takes a `send` is whether its
// workflow is open, not a state of its own.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
	StateTimedOut  State = "timed_out"
	// StateTerminated: an operator terminated the workflow; its code never
	// ran its last step, so only Temporal's execution status says so.
	StateTerminated State = "terminated"
	// StateWaitingForInput is what sessions of code versions before 4
	// recorded after each turn, hiding how the turn ended; new sessions
	// record the turn's own state. `list --status waiting_for_input`
	// finds open sessions between turns, of any version.
	StateWaitingForInput State = "waiting_for_input"
	// StateSkipped is a plan step's only: it never ran, because an earlier
	// step of its lane failed or the plan stopped. No workflow records it,
	// so it is not among States (a filter).
	StateSkipped State = "skipped"
)

// States is the vocabulary in the order the README's glossary gives it.
var States = []State{StateQueued, StateRunning, StateCompleted, StateFailed, StateCancelled, StateTimedOut, StateTerminated}

// Terminal reports whether a turn, task or workflow in this state has ended.
func (s State) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateTimedOut, StateTerminated, StateSkipped:
		return true
	}
	return false
}

// ParseState reads a state a user typed (a filter): one of States, or
// waiting_for_input.
func ParseState(s string) (State, error) {
	st := State(strings.TrimSpace(s))
	if st == StateWaitingForInput {
		return st, nil
	}
	for _, known := range States {
		if st == known {
			return st, nil
		}
	}
	names := make([]string, len(States))
	for i, known := range States {
		names[i] = string(known)
	}
	return "", fmt.Errorf("unknown status %q: use one of %s (or waiting_for_input: open sessions between turns)", s, strings.Join(names, ", "))
}

// ClosedAs is the state of a workflow whose execution status is exec and
// whose code last recorded recorded: an end the code did not run to
// (terminated, cancelled, failed or timed out by Temporal) wins over the
// record, which that end left as it was.
func ClosedAs(exec enumspb.WorkflowExecutionStatus, recorded State) State {
	switch exec {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return StateTerminated
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return StateCancelled
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		if recorded == StateTimedOut {
			// A session closes failed with a turn that timed out
			// (version 5): the record says which.
			return StateTimedOut
		}
		return StateFailed
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return StateTimedOut
	}
	return recorded
}

// StateClause is the visibility query (Temporal's list filter syntax, as
// `temporal workflow list -q` takes it) of the workflows in state st, as
// ClosedAs derives it: the recorded state where the code ran to its end or
// still runs, Temporal's execution status where it did not.
func StateClause(st State) string {
	attr := StatusKey.GetName()
	// Where the record stands: open, completed by the code, or handed to
	// the next run.
	ranToEnd := "ExecutionStatus IN ('Running', 'Completed', 'ContinuedAsNew')"
	recorded := func(values ...State) string {
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = "'" + string(v) + "'"
		}
		if len(quoted) == 1 {
			return fmt.Sprintf("%s = %s", attr, quoted[0])
		}
		return fmt.Sprintf("%s IN (%s)", attr, strings.Join(quoted, ", "))
	}
	switch st {
	case StateQueued, StateRunning:
		return fmt.Sprintf("(%s AND ExecutionStatus = 'Running')", recorded(st))
	case StateCompleted:
		return fmt.Sprintf("(%s AND %s)", recorded(st), ranToEnd)
	case StateFailed:
		// A session whose turn timed out closes failed too (version 5).
		return fmt.Sprintf("((%s AND %s) OR (ExecutionStatus = 'Failed' AND (%s IS NULL OR %s != '%s')))", recorded(st), ranToEnd, attr, attr, StateTimedOut)
	case StateCancelled:
		return fmt.Sprintf("((%s AND %s) OR ExecutionStatus = 'Canceled')", recorded(st), ranToEnd)
	case StateTimedOut:
		return fmt.Sprintf("((%s AND (%s OR ExecutionStatus = 'Failed')) OR ExecutionStatus = 'TimedOut')", recorded(st), ranToEnd)
	case StateTerminated:
		return "ExecutionStatus = 'Terminated'"
	case StateWaitingForInput:
		// Sessions only: a delegation that waits for its parent's ack is
		// not waiting for input.
		return fmt.Sprintf("(%s AND ExecutionStatus = 'Running' AND WorkflowType = '%s')",
			recorded(StateWaitingForInput, StateCompleted, StateFailed, StateCancelled, StateTimedOut), SessionWorkflowName)
	}
	return fmt.Sprintf("%s = '%s'", attr, st)
}
