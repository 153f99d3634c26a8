package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// list: delegations and sessions found by their search attributes, newest
// first, one row each.

// ListFilter narrows `list`; empty fields match everything.
type ListFilter struct {
	Status          string `json:"status,omitempty"`
	Agent           string `json:"agent,omitempty"`
	ParentSessionID string `json:"parent_session_id,omitempty"`
	Cwd             string `json:"cwd,omitempty"`
	// Kind is "session", "delegation" (plans among them), "plan" (plans
	// only), or "" for all.
	Kind string `json:"kind,omitempty"`
	// Open keeps only workflows that still run (delegations awaiting their
	// parent's acknowledgement among them) and sessions that still take a
	// send (api.SendUntilKey).
	Open  bool `json:"open,omitempty"`
	Limit int  `json:"limit,omitempty"`

	// running keeps only workflows that still run (Open without the
	// sessions whose run has closed).
	running bool
	// now is when a closed session stops taking a send is compared with
	// (time.Now when zero).
	now time.Time
}

// listKindPlan is the list kind of plans only: a plan lists as a
// delegation (ListItem.Kind), which it is.
const listKindPlan = "plan"

// List finds delegations and sessions by their search attributes, newest
// first.
func (c *Client) List(ctx context.Context, f ListFilter) (Envelope, error) {
	q, err := listQuery(f)
	if err != nil {
		return Envelope{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		// A page of the UI: enough to find a run, small enough to read.
		limit = 100
	}
	env := Envelope{ContractVersion: ContractVersion, Op: "list", Backend: Backend, Runs: []ListItem{}}
	var token []byte
	seen := map[string]bool{}
	for len(env.Runs) < limit {
		resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: int32(min(limit, 1000))})
		if err != nil {
			return Envelope{}, c.temporalError(err, "")
		}
		for _, info := range resp.GetExecutions() {
			if len(env.Runs) == limit {
				break
			}
			it := c.listItem(info)
			if f.Kind == string(kindDelegation) && it.Kind == string(kindSession) {
				it = oneTaskItem(it, info)
			}
			if seen[it.ID] {
				// An earlier run of a session a send reopened (version 5):
				// Temporal lists the open and the latest-closed runs first,
				// and the latest is the session's.
				continue
			}
			seen[it.ID] = true
			env.Runs = append(env.Runs, it)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	env.Count = len(env.Runs)
	return env, nil
}

// listQuery builds the visibility query of f. Values go inside quotes, so
// quotes and backslashes in them are refused rather than escaped.
func listQuery(f ListFilter) (string, error) {
	var clauses []string
	switch f.Kind {
	case "":
		clauses = append(clauses, fmt.Sprintf("(WorkflowType = '%s' OR WorkflowType = '%s' OR WorkflowType = '%s')", api.SessionWorkflowName, api.DelegationWorkflowName, api.PlanWorkflowName))
	case string(kindSession):
		clauses = append(clauses, fmt.Sprintf("WorkflowType = '%s'", api.SessionWorkflowName))
	case string(kindDelegation):
		// Delegations of several tasks, and the sessions that are one-task
		// delegations; open: those not yet ended and acknowledged (a
		// session stays open after its delegation, waiting for a send).
		if f.Open {
			clauses = append(clauses, fmt.Sprintf("(WorkflowType IN ('%s', '%s') OR %s = '%s')", api.DelegationWorkflowName, api.PlanWorkflowName, api.DelegationKey.GetName(), api.DelegationOpen))
		} else {
			clauses = append(clauses, fmt.Sprintf("(WorkflowType IN ('%s', '%s') OR %s IN ('%s', '%s'))", api.DelegationWorkflowName, api.PlanWorkflowName,
				api.DelegationKey.GetName(), api.DelegationOpen, api.DelegationClosed))
		}
	case listKindPlan:
		// Plans only: they are delegations too, which --kind delegation
		// lists with the rest.
		clauses = append(clauses, fmt.Sprintf("WorkflowType = '%s'", api.PlanWorkflowName))
	default:
		return "", errcode.Errorf(errcode.InvalidInput, "kind must be session, delegation or plan, not %q", f.Kind)
	}
	if f.Status != "" {
		st, err := api.ParseState(f.Status)
		if err != nil {
			return "", errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
		clauses = append(clauses, api.StateClause(st))
	}
	for _, kv := range []struct{ attr, value string }{
		{api.AgentKey.GetName(), f.Agent},
		{api.ParentSessionKey.GetName(), f.ParentSessionID},
		{api.CwdKey.GetName(), f.Cwd},
	} {
		if kv.value == "" {
			continue
		}
		if strings.ContainsAny(kv.value, `'"\`) {
			return "", errcode.Errorf(errcode.InvalidInput, "filter %s must not hold quotes or backslashes: %q", kv.attr, kv.value)
		}
		clauses = append(clauses, fmt.Sprintf("%s = '%s'", kv.attr, kv.value))
	}
	switch {
	case f.running, f.Open && (f.Kind == string(kindDelegation) || f.Kind == listKindPlan):
		// A delegation is open while its workflow runs (until its parent
		// has its results); only a session's closed run takes a send.
		clauses = append(clauses, "ExecutionStatus = 'Running'")
	case f.Open:
		now := f.now
		if now.IsZero() {
			now = time.Now()
		}
		clauses = append(clauses, fmt.Sprintf("(ExecutionStatus = 'Running' OR %s > '%s')", api.SendUntilKey.GetName(), now.UTC().Format(time.RFC3339Nano)))
	}
	return strings.Join(clauses, " AND "), nil
}

func (c *Client) listItem(info *workflowpb.WorkflowExecutionInfo) ListItem {
	id := info.GetExecution().GetWorkflowId()
	it := ListItem{
		ID: id, Kind: string(kindSession), Name: memoString(info, "name"), Description: memoString(info, "description"),
		Delegation: memoString(info, "delegation"),
		Agent:      searchAttr(info, api.AgentKey.GetName()),
		Status:     string(api.ClosedAs(info.GetStatus(), api.State(searchAttr(info, api.StatusKey.GetName())))),
		Cwd:        searchAttr(info, api.CwdKey.GetName()), ParentSessionID: searchAttr(info, api.ParentSessionKey.GetName()),
		Open: takesSend(info), Started: info.GetStartTime().AsTime(), UIURL: c.uiLink(id),
		ExecutionStatus: strings.ToLower(strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")),
	}
	if n := info.GetType().GetName(); n == api.DelegationWorkflowName || n == api.PlanWorkflowName {
		it.Kind = string(kindDelegation)
	}
	if ct := info.GetCloseTime(); ct != nil {
		t := ct.AsTime()
		it.Closed = &t
	}
	return it
}

// oneTaskItem is a session that stands for a one-task delegation, listed
// as that delegation: its ID, and open until its delegation has ended and
// been acknowledged.
func oneTaskItem(it ListItem, info *workflowpb.WorkflowExecutionInfo) ListItem {
	it.ID, it.Kind, it.Delegation = it.Delegation, string(kindDelegation), ""
	it.Open = info.GetCloseTime() == nil && searchAttr(info, api.DelegationKey.GetName()) == api.DelegationOpen
	return it
}

// takesSend reports whether the workflow info describes is open: it runs,
// or it is a session whose run closed with its turn and still takes a send
// that reopens it (api.SendUntilKey).
func takesSend(info *workflowpb.WorkflowExecutionInfo) bool {
	if info.GetCloseTime() == nil {
		return true
	}
	var until time.Time
	p := info.GetSearchAttributes().GetIndexedFields()[api.SendUntilKey.GetName()]
	return p != nil && converter.GetDefaultDataConverter().FromPayload(p, &until) == nil && time.Now().Before(until)
}
