package api

import (
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

func TestClosedAs(t *testing.T) {
	tests := []struct {
		exec     enumspb.WorkflowExecutionStatus
		recorded State
		want     State
	}{
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, StateRunning, StateRunning},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, StateFailed, StateFailed},
		{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, StateCompleted, StateCompleted},
		{enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, StateCompleted, StateCompleted},
		// The record a terminate or cancel left behind loses.
		{enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, StateRunning, StateTerminated},
		{enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, StateCompleted, StateTerminated},
		{enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, StateWaitingForInput, StateCancelled},
		{enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, StateRunning, StateFailed},
		{enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, StateRunning, StateTimedOut},
	}
	for _, tc := range tests {
		if got := ClosedAs(tc.exec, tc.recorded); got != tc.want {
			t.Errorf("ClosedAs(%s, %s) = %s, want %s", tc.exec, tc.recorded, got, tc.want)
		}
	}
}

func TestParseState(t *testing.T) {
	for _, st := range append(States, StateWaitingForInput) {
		if got, err := ParseState(string(st)); err != nil || got != st {
			t.Errorf("ParseState(%q) = %q, %v", st, got, err)
		}
	}
	if _, err := ParseState("done"); err == nil || !strings.Contains(err.Error(), "queued, running, completed, failed, cancelled, timed_out, terminated") {
		t.Errorf("ParseState(done) = %v, want the vocabulary named", err)
	}
}

// TestStateClause: each state's query selects what ClosedAs derives, both
// from the record and from Temporal's execution status.
func TestStateClause(t *testing.T) {
	tests := []struct {
		st   State
		want string
	}{
		{StateRunning, "(SubagentStatus = 'running' AND ExecutionStatus = 'Running')"},
		{StateCompleted, "(SubagentStatus = 'completed' AND ExecutionStatus IN ('Running', 'Completed', 'ContinuedAsNew'))"},
		{StateFailed, "((SubagentStatus = 'failed' AND ExecutionStatus IN ('Running', 'Completed', 'ContinuedAsNew')) OR (ExecutionStatus = 'Failed' AND (SubagentStatus IS NULL OR SubagentStatus != 'timed_out')))"},
		{StateTimedOut, "((SubagentStatus = 'timed_out' AND (ExecutionStatus IN ('Running', 'Completed', 'ContinuedAsNew') OR ExecutionStatus = 'Failed')) OR ExecutionStatus = 'TimedOut')"},
		{StateCancelled, "((SubagentStatus = 'cancelled' AND ExecutionStatus IN ('Running', 'Completed', 'ContinuedAsNew')) OR ExecutionStatus = 'Canceled')"},
		{StateTerminated, "ExecutionStatus = 'Terminated'"},
		{StateWaitingForInput, "(SubagentStatus IN ('waiting_for_input', 'completed', 'failed', 'cancelled', 'timed_out') AND ExecutionStatus = 'Running' AND WorkflowType = 'Session')"},
	}
	for _, tc := range tests {
		if got := StateClause(tc.st); got != tc.want {
			t.Errorf("StateClause(%s) =\n  %s\nwant\n  %s", tc.st, got, tc.want)
		}
	}
}
