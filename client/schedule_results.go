package client

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// The results of scheduled runs reach the next pi session started in their
// folder (docs/schedules.md#results): each waits in a ScheduledResult
// workflow. The session's extension claims those of its folder (the
// workflow lets one session have each: the first claim wins), writes them
// into its session, then acknowledges them, which ends their wait. A
// claim stays its session's; a pi that finds the claimant's process gone
// replaces the claim (Replace), which only one pi can do.

// maxWaitingResults bounds one claim's look: more results than this wait
// for the next look (a session's start, the service's start).
const maxWaitingResults = 100

// ClaimResults claims, for pi session by (its process holder), the results
// of cwd's scheduled runs that wait for a session, oldest first; a result
// that replace names the claimant of is taken from it. The answer groups
// them by schedule, with every schedule of cwd: a run this claim won
// carries its result (the delegation's envelope, as status gives it); one
// it lost names who holds it.
func (c *Client) ClaimResults(ctx context.Context, cwd, by string, holder *api.ResultHolder, replace []string) (Envelope, error) {
	switch {
	case !strings.HasPrefix(cwd, "/"):
		return Envelope{}, errcode.Errorf(errcode.InvalidInput, "cwd must be an absolute path, not %q", cwd)
	case strings.ContainsAny(cwd, `'\`):
		return Envelope{}, errcode.Errorf(errcode.InvalidInput, "cwd %q holds a quote or a backslash, which a visibility query cannot name", cwd)
	case by == "":
		return Envelope{}, errcode.New(errcode.InvalidInput, "a claim names the pi session that takes the results (--by)")
	}
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = '%s'", api.ScheduledResultWorkflowName, api.CwdKey.GetName(), cwd)
	resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: maxWaitingResults})
	if err != nil {
		return Envelope{}, c.temporalError(err, "")
	}
	execs := resp.GetExecutions()
	// Oldest first: they are delivered in the order they ran.
	slices.Reverse(execs)
	bySchedule := map[string]*ScheduleItem{}
	var order []string
	won := 0
	for _, info := range execs {
		id := info.GetExecution().GetWorkflowId()
		req := api.ClaimRequest{By: by, Holder: holder}
		if cur := memoString(info, "claimedBy"); cur != "" && cur != by && slices.Contains(replace, cur) {
			req.Replace = cur
		}
		h, err := c.updateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: api.ClaimUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted, Args: []any{req},
		})
		var res api.ClaimResult
		if err == nil {
			err = h.Get(ctx, &res)
		}
		if err != nil {
			if isClosed(err) {
				// Acknowledged (by another session) since the listing.
				continue
			}
			return Envelope{}, c.temporalError(err, id)
		}
		run := ScheduleRun{
			ID: res.Run.FireID, ResultID: id, DelegationID: res.Run.DelegationID, Status: string(res.Run.State),
			Summary: res.Run.Summary, Error: res.Run.Error, ClaimedBy: res.ClaimedBy, Holder: res.Holder, UIURL: c.uiLink(res.Run.DelegationID),
		}
		if t := info.GetStartTime(); t != nil {
			// The result is left as the run ends: its start is the run's end.
			ended := t.AsTime()
			run.Ended, run.Fired = &ended, ended
		}
		if t, ok := fireTime(res.Run.ScheduleID, res.Run.FireID); ok {
			run.Fired = t
		}
		if res.Won {
			env, err := c.resultEnvelope(ctx, id, res.Run)
			if err != nil {
				return Envelope{}, err
			}
			run.Result = &env
			won++
		}
		sid := res.Run.ScheduleID
		item, ok := bySchedule[sid]
		if !ok {
			item = &ScheduleItem{ID: sid, Cwd: cwd, UIURL: c.scheduleLink(sid)}
			bySchedule[sid] = item
			order = append(order, sid)
		}
		item.Runs = append(item.Runs, run)
	}
	// The folder's schedules too, with no runs when none of theirs waits,
	// and those (deleted perhaps) whose runs have yet to leave a result: a
	// folder with none of these has nothing more to look for.
	item := func(sid string) *ScheduleItem {
		if _, ok := bySchedule[sid]; !ok {
			bySchedule[sid] = &ScheduleItem{ID: sid, Cwd: cwd, UIURL: c.scheduleLink(sid)}
			order = append(order, sid)
		}
		return bySchedule[sid]
	}
	ids, err := c.scheduleIDs(ctx, cwd)
	if err != nil {
		return Envelope{}, err
	}
	for _, sid := range ids {
		item(sid)
	}
	running, err := c.runningFires(ctx, cwd)
	if err != nil {
		return Envelope{}, err
	}
	for _, sid := range running {
		item(sid).Running++
	}
	items := make([]ScheduleItem, 0, len(order))
	for _, sid := range order {
		items = append(items, *bySchedule[sid])
	}
	return scheduleEnvelope(fmt.Sprintf("%d result(s) of scheduled runs for this session", won), items...), nil
}

// fireTime is the time fire fireID of schedule id stood for: Temporal
// names a fire by its schedule and that time, to the second (FireID).
func fireTime(id, fireID string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(fireID, id+"-")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, rest)
	return t, err == nil
}

// fireResultLag is how long after a run ended a claim still counts it
// among those whose results are to come: the run starts its
// ScheduledResult before it ends, but the listing of workflows may show
// the run ended a moment before it shows the result waiting.
const fireResultLag = time.Minute

// runningFires are the schedule IDs of cwd's runs whose results are to
// come (running, or ended within fireResultLag), one per run.
func (c *Client) runningFires(ctx context.Context, cwd string) ([]string, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND %s = '%s' AND (ExecutionStatus = 'Running' OR CloseTime > '%s')",
		api.ScheduledWorkflowName, api.CwdKey.GetName(), cwd, c.CurrentTime().Add(-fireResultLag).UTC().Format(time.RFC3339Nano))
	resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: maxWaitingResults})
	if err != nil {
		return nil, c.temporalError(err, "")
	}
	var ids []string
	for _, info := range resp.GetExecutions() {
		if sid := memoString(info, "schedule"); sid != "" {
			ids = append(ids, sid)
		}
	}
	return ids, nil
}

// resultEnvelope is what a won result delivers: its delegation's status,
// or, for a run that never started its delegation, the run's failure as
// the one item of an envelope named after the result.
func (c *Client) resultEnvelope(ctx context.Context, resultID string, run api.ScheduledResultInput) (Envelope, error) {
	if run.DelegationID != "" {
		env, err := c.Status(ctx, run.DelegationID)
		if err == nil || !errcode.Is(err, errcode.SessionNotFound) {
			return env, err
		}
		// Its history is gone (past the namespace's retention): the
		// run's own record still says how it ended.
	}
	info := run.Error
	if info == nil {
		info = errcode.NewInfo(errcode.Failed, "the scheduled run left no delegation")
	}
	return Envelope{
		ContractVersion: ContractVersion, Op: "status", Backend: Backend, DelegationID: cmp.Or(run.DelegationID, resultID),
		Status: string(run.State), Done: true,
		Items: []Item{{Name: "schedule " + run.ScheduleID, Agent: "schedule", Status: string(run.State), Done: true, Error: info, Output: run.Summary}},
	}, nil
}

// AckResults tells the ScheduledResults ids (result IDs a claim gave) that
// session by has their results written: each ends its wait. One that is
// gone already, or claimed by another session now, is passed over.
func (c *Client) AckResults(ctx context.Context, ids []string, by string) (Envelope, error) {
	if len(ids) == 0 {
		return Envelope{}, errcode.New(errcode.InvalidInput, "name the results to acknowledge (their result IDs)")
	}
	n := 0
	for _, id := range ids {
		if !strings.HasSuffix(id, api.ResultIDSuffix) {
			return Envelope{}, errcode.Errorf(errcode.InvalidInput, "%q is not a scheduled run's result ID (it ends with %s)", id, api.ResultIDSuffix)
		}
		err := c.Temporal.SignalWorkflow(ctx, id, "", api.AckSignal, api.AckRequest{By: by})
		switch {
		case err == nil:
			n++
		case isClosed(err):
		default:
			return Envelope{}, c.temporalError(err, id)
		}
	}
	return scheduleEnvelope(fmt.Sprintf("%d result(s) acknowledged", n)), nil
}
