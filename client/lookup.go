package client

import (
	"context"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// Finding the workflow an ID names: a session, a delegation (a plan among
// them) or the session a one-task delegation's ID stands for; a task ID a
// start has just returned is waited for a moment; its memo and search
// attributes read.

// kind of a workflow the client addresses by ID.
type kind string

const (
	kindSession    kind = "session"
	kindDelegation kind = "delegation"
	// kindOneTask is a delegation ID whose workflow is its task's session
	// (api.SessionInput.Delegation); never a list kind.
	kindOneTask kind = "one-task delegation"
)

// oneTaskSession is the session a delegation ID stands for when it names a
// one-task delegation (api.OneTaskDelegationID), else "": its workflow.
func oneTaskSession(id string) string {
	rest, ok := strings.CutPrefix(id, api.DelegationIDPrefix)
	if !ok {
		return ""
	}
	// A session ID: a UUID, or one a sticky session's caller chose.
	if !api.ValidName(rest) {
		return ""
	}
	return rest
}

// describeOneTask describes the session a one-task delegation ID stands
// for; nil when id is not one (a delegation of several tasks, or a session
// that stands for no delegation of that ID).
func (c *Client) describeOneTask(ctx context.Context, id string) *workflowservice.DescribeWorkflowExecutionResponse {
	sid := oneTaskSession(id)
	if sid == "" {
		return nil
	}
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, sid, "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetType().GetName() != api.SessionWorkflowName ||
		memoString(desc.GetWorkflowExecutionInfo(), "delegation") != id {
		return nil
	}
	return desc
}

// describe finds id's workflow; a missing one is SESSION_NOT_FOUND with
// the delegate contract's message.
func (c *Client) describe(ctx context.Context, id string) (*workflowservice.DescribeWorkflowExecutionResponse, kind, error) {
	if strings.TrimSpace(id) == "" {
		return nil, "", errcode.New(errcode.InvalidInput, "a task or session ID is required")
	}
	if desc := c.describeOneTask(ctx, id); desc != nil {
		return desc, kindOneTask, nil
	}
	desc, err := c.describeAppearing(ctx, id)
	if err != nil {
		return nil, "", c.temporalError(err, id)
	}
	switch name := desc.GetWorkflowExecutionInfo().GetType().GetName(); name {
	case api.SessionWorkflowName:
		return desc, kindSession, nil
	case api.DelegationWorkflowName, api.PlanWorkflowName:
		// A plan answers as a delegation whose tasks are its task steps.
		return desc, kindDelegation, nil
	default:
		return nil, "", errcode.Errorf(errcode.SessionNotFound, "%q is a %s workflow, not a subagent session or delegation", id, name)
	}
}

// sessionAppearsWithin bounds the wait for a task ID a start just returned:
// its session workflow is started by the delegation's first workflow task,
// tens of milliseconds after the start answered on a live worker; an ID
// still unknown after this is not a session.
const sessionAppearsWithin = 2 * time.Second

// describeAppearing describes workflow id; one that does not exist yet but
// was just made (justMinted) is asked for again until it does, for at most
// sessionAppearsWithin, and the last answer (not found) is returned after
// that. Any other unknown ID is not found at once.
func (c *Client) describeAppearing(ctx context.Context, id string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if !isNotFound(err) || !justMinted(id, c.CurrentTime()) {
		return desc, err
	}
	for deadline := time.Now().Add(sessionAppearsWithin); isNotFound(err) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return desc, err
		case <-time.After(50 * time.Millisecond):
		}
		desc, err = c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	}
	return desc, err
}

func memoString(info *workflowpb.WorkflowExecutionInfo, key string) string {
	return payloadString(info.GetMemo().GetFields(), key)
}

// payloadString decodes one string field of a memo or of the search
// attributes; a missing or non-string field is "".
func payloadString(fields map[string]*commonpb.Payload, key string) string {
	p, ok := fields[key]
	if !ok {
		return ""
	}
	var s string
	_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
	return s
}

func searchAttr(info *workflowpb.WorkflowExecutionInfo, name string) string {
	return payloadString(info.GetSearchAttributes().GetIndexedFields(), name)
}
