package client

import (
	"context"
	"fmt"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// Bounds of the nested tree `status` shows under a task. The depth limit
// of the settings is at most 5 (profiles.MaxSettingsDepth), so five
// levels reach every run a task can have started; a page of runs is what a
// reader of one status can take in, and keeps the cost to a few queries.
const (
	nestedLevels  = 5
	nestedMaxRuns = 100
)

// WithNested sets, on each item of env, the sessions its task's child
// started (nested delegations, docs/pi.md#nesting), and theirs in turn:
// each carries its parent session, the task that started it, so that a
// reader draws the tree. A run's tasks are found by the parent-session
// search attribute the worker sets on them, one visibility query per
// level; a failed query leaves the tree as far as it got (the status
// itself stands).
func (c *Client) WithNested(ctx context.Context, env *Envelope) {
	// The item each run descends from, by the run's ID: the tasks' own
	// first.
	root := map[string]int{}
	var frontier []string
	for i, it := range env.Items {
		if it.TaskID != "" {
			root[it.TaskID] = i
			frontier = append(frontier, it.TaskID)
		}
	}
	total := 0
	for level := 0; level < nestedLevels && len(frontier) > 0 && total < nestedMaxRuns; level++ {
		runs, err := c.childSessions(ctx, frontier, nestedMaxRuns-total)
		if err != nil {
			return
		}
		frontier = frontier[:0]
		for _, r := range runs {
			i, ok := root[r.ParentSessionID]
			if _, seen := root[r.ID]; !ok || seen {
				continue
			}
			root[r.ID] = i
			env.Items[i].Nested = append(env.Items[i].Nested, r)
			frontier = append(frontier, r.ID)
			total++
		}
	}
}

// childSessions are the sessions whose parent session is one of parents,
// oldest first (the order they were started in), at most limit.
func (c *Client) childSessions(ctx context.Context, parents []string, limit int) ([]ListItem, error) {
	quoted := make([]string, 0, len(parents))
	for _, p := range parents {
		if strings.ContainsAny(p, `'"\`) {
			continue // never a session ID the service makes
		}
		quoted = append(quoted, "'"+p+"'")
	}
	if len(quoted) == 0 {
		return nil, nil
	}
	q := fmt.Sprintf("WorkflowType = '%s' AND %s IN (%s)", api.SessionWorkflowName, api.ParentSessionKey.GetName(), strings.Join(quoted, ", "))
	resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]ListItem, 0, len(resp.GetExecutions()))
	for _, info := range resp.GetExecutions() {
		out = append(out, c.listItem(info))
	}
	// Visibility lists the newest first; a tree reads in the order the
	// runs were started.
	slices.SortStableFunc(out, func(a, b ListItem) int { return a.Started.Compare(b.Started) })
	return out, nil
}

// SessionDepth is the depth of the child that runs session id, as Temporal
// records it: the input its latest run started with (a continue-as-new or a
// resumed session's run carries its depth again). A session that is not
// this project's, or not found, is SESSION_NOT_FOUND.
func (c *Client) SessionDepth(ctx context.Context, id string) (int, error) {
	notFound := errcode.Errorf(errcode.SessionNotFound, "the calling session %q is not found: a nested child delegates only while its session exists", id)
	iter := c.Temporal.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return 0, notFound
	}
	ev, err := iter.Next()
	if isNotFound(err) {
		return 0, notFound
	}
	if err != nil {
		return 0, c.temporalError(err, id)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || attrs.GetWorkflowType().GetName() != api.SessionWorkflowName || len(attrs.GetInput().GetPayloads()) == 0 {
		return 0, notFound
	}
	var in api.SessionInput
	if err := converter.GetDefaultDataConverter().FromPayload(attrs.GetInput().GetPayloads()[0], &in); err != nil {
		return 0, errcode.Wrap(errcode.Failed, err, fmt.Sprintf("session %s: cannot read its input: %v", id, err))
	}
	return sessionDepth(in), nil
}

// sessionDepth is the depth of in's child: the one its input names, else
// one below the caller of the one-task delegation it stands for (resolved
// in the workflow, after its input was written); a child is at least 1.
func sessionDepth(in api.SessionInput) int {
	d := in.Child.Depth
	if in.Delegation != nil {
		d = max(d, in.Delegation.Depth+1)
	}
	return max(d, 1)
}
