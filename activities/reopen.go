package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// reopenTries bounds how often SendToSession looks again when the session
// changed between its look and its send (a run closed, or another send
// reopened it): each change is a turn ending, so a few looks always see a
// settled session.
const reopenTries = 3

// SendToSession sends in.Send to a session as its next turn: to its run
// while one is open, or, when its last run closed with its turn (version
// 5) within its idle TTL, to a new run of the same workflow ID that starts
// with what the closed one carried (api.SessionResult.ReopenInput), in one
// signal-with-start: two sends that race make one new run, the later one
// its next turn. Not sent (Sent false): the last run cannot be reopened so,
// and the caller starts the session again as before.
func (s *Sessions) SendToSession(ctx context.Context, in api.SendToSessionInput) (api.SendToSessionResult, error) {
	for range reopenTries {
		desc, err := s.Client.DescribeWorkflowExecution(ctx, in.SessionID, "")
		if err != nil {
			var notFound *serviceerror.NotFound
			if errors.As(err, &notFound) {
				return api.SendToSessionResult{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("Cannot resume: session %q not found. The session may have expired or the ID is incorrect.", in.SessionID),
					string(errcode.SessionNotFound), err)
			}
			return api.SendToSessionResult{}, err
		}
		info := desc.GetWorkflowExecutionInfo()
		if info.GetCloseTime() == nil {
			err := s.Client.SignalWorkflow(ctx, in.SessionID, "", api.SendSignal, in.Send)
			if err == nil {
				return api.SendToSessionResult{Sent: true, RunID: info.GetExecution().GetRunId()}, nil
			}
			var notFound *serviceerror.NotFound
			if !errors.As(err, &notFound) {
				return api.SendToSessionResult{}, err
			}
			// It closed in the meantime: look again.
			continue
		}
		next, ok, err := s.reopenInput(ctx, info)
		if err != nil || !ok {
			return api.SendToSessionResult{}, err
		}
		opts := client.StartWorkflowOptions{
			ID: in.SessionID, TaskQueue: info.GetTaskQueue(),
			// A new run of the closed session's ID; a run that another send
			// has reopened meanwhile takes this send as its next turn.
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			TypedSearchAttributes:    reopenAttributes(info),
			Memo:                     memoOf(info),
		}
		if md := desc.GetExecutionConfig().GetUserMetadata(); md != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(md.GetSummary(), &opts.StaticSummary)
			_ = converter.GetDefaultDataConverter().FromPayload(md.GetDetails(), &opts.StaticDetails)
		}
		run, err := s.Client.SignalWithStartWorkflow(ctx, in.SessionID, api.SendSignal, in.Send, opts, api.SessionWorkflowName, next)
		if err != nil {
			return api.SendToSessionResult{}, err
		}
		return api.SendToSessionResult{Sent: true, Reopened: run.GetRunID() != info.GetExecution().GetRunId(), RunID: run.GetRunID()}, nil
	}
	return api.SendToSessionResult{}, fmt.Errorf("session %s kept changing while the send looked at it", in.SessionID)
}

// reopenInput is the input that reopens the session whose closed run info
// describes: false when that run cannot be reopened (closed before version
// 5, terminated or timed out by Temporal, not sticky, or past its idle
// TTL).
func (s *Sessions) reopenInput(ctx context.Context, info *workflowpb.WorkflowExecutionInfo) (api.SessionInput, bool, error) {
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
	default:
		return api.SessionInput{}, false, nil
	}
	var until time.Time
	p := info.GetSearchAttributes().GetIndexedFields()[api.SendUntilKey.GetName()]
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &until) != nil || time.Now().After(until) {
		return api.SessionInput{}, false, nil
	}
	exec := info.GetExecution()
	var res api.SessionResult
	err := s.Client.GetWorkflow(ctx, exec.GetWorkflowId(), exec.GetRunId()).Get(ctx, &res)
	if err != nil {
		if held, derr := api.DetailsOf(err, &res); held {
			err = derr
		}
		if err != nil {
			return api.SessionInput{}, false, fmt.Errorf("reading how session %s closed: %w", exec.GetWorkflowId(), err)
		}
	}
	next, ok := res.ReopenInput()
	return next, ok, nil
}

// reopenAttributes are the search attributes of a reopened run: the closed
// run's (its agent, folder, parent and delegation), running.
func reopenAttributes(info *workflowpb.WorkflowExecutionInfo) temporal.SearchAttributes {
	fields := info.GetSearchAttributes().GetIndexedFields()
	keyword := func(k temporal.SearchAttributeKeyKeyword) string {
		var v string
		if p := fields[k.GetName()]; p != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
		}
		return v
	}
	var more []temporal.SearchAttributeUpdate
	if d := keyword(api.DelegationKey); d != "" {
		more = append(more, api.DelegationKey.ValueSet(d))
	}
	return api.SessionAttributes(keyword(api.AgentKey), keyword(api.CwdKey), api.StateRunning, keyword(api.ParentSessionKey), more...)
}

// memoOf is the closed run's memo, for the run that reopens it: its
// values are strings (api.SessionMemo).
func memoOf(info *workflowpb.WorkflowExecutionInfo) map[string]any {
	out := map[string]any{}
	for k, p := range info.GetMemo().GetFields() {
		var v string
		if converter.GetDefaultDataConverter().FromPayload(p, &v) == nil {
			out[k] = v
		}
	}
	return out
}
