package activities

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// CancelNested asks every open workflow whose parent session is sessionID
// (the delegations, plans and sessions a child that delegates started:
// docs/pi.md, "Nesting") to cancel, with the answerless CancelSignal each
// of them takes, and returns how many it asked. A session cancelled this
// way does the same for what its own child started, so a cancel reaches
// the whole tree below the task. It is run by the session's workflow when
// a run of such a child ends cancelled: the workflow knows the tree's
// root, and only the service can find what the child started, as the
// child's own delegations were started from outside any workflow.
func (s *Sessions) CancelNested(ctx context.Context, sessionID string) (int, error) {
	if sessionID == "" || strings.ContainsAny(sessionID, `'"\`) {
		return 0, errcode.Errorf(errcode.InvalidInput, "session ID %q cannot name a parent session", sessionID)
	}
	q := fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'", api.ParentSessionKey.GetName(), sessionID)
	asked := 0
	var token []byte
	for {
		resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token})
		if err != nil {
			return asked, err
		}
		for _, info := range resp.GetExecutions() {
			ex := info.GetExecution()
			// A workflow that ended since it was listed cannot be told;
			// it needs no cancel either.
			if err := s.Client.SignalWorkflow(ctx, ex.GetWorkflowId(), ex.GetRunId(), api.CancelSignal,
				api.CancelRequest{Reason: "the task that started it was cancelled"}); err == nil {
				asked++
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return asked, nil
		}
	}
}
