package workflows

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// prepareActivityTimeoutSec bounds PrepareScheduled: it reads a settings
// file and perhaps a plan file; the bound catches a worker that hangs on a
// network file system.
const prepareActivityTimeoutSec = 30

// prepareAttempts: a preparation that fails this often for a reason no
// code names (a file system that does not answer) is the run's failure,
// delivered as one, rather than a fire that retries until the next one.
const prepareAttempts = 5

// Scheduled is one fire of a schedule (docs/schedules.md): it prepares the
// schedule's delegation or plan as a start from the command would at this
// moment (PrepareScheduled, on a worker that sees the folder), runs it as
// a child that outlives it (ParentClosePolicy ABANDON: a fire terminated
// from the UI leaves its delegation running, as any delegation runs on
// without its caller), and waits for it to end, so that the schedule's
// overlap policy sees a fire running exactly while its work runs. A cancel
// of the fire (the overlap policy cancel_other, or the UI) cancels the
// work and waits for it to stop. Then, unless the schedule is quiet and
// the work completed, it leaves the result to a ScheduledResult, which
// waits for the folder's next pi session.
func Scheduled(ctx workflow.Context, in api.ScheduledInput) (api.ScheduledRunResult, error) {
	fireID := workflow.GetInfo(ctx).WorkflowExecution.ID
	res := api.ScheduledRunResult{ScheduleID: in.ScheduleID}
	if err := api.ValidateScheduled(in); err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.CodeOf(err)), err)
	}
	prep, err := prepareFire(ctx, in, fireID)
	switch {
	case err != nil && temporal.IsCanceledError(err):
		res.State, res.Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the scheduled run was cancelled before it started")
	case err != nil:
		res.State, res.Error = api.StateFailed, errcode.NewInfo(errcode.Failed, "could not prepare the scheduled run: "+err.Error())
	case prep.Error != nil:
		res.State, res.Error = api.StateFailed, prep.Error
	default:
		res.DelegationID = prep.ChildID
		runChild(ctx, in, prep, &res)
	}
	if res.Summary == "" && res.Error != nil {
		res.Summary = api.Summarize(res.Error.Message)
	}
	// What is left to do happens also after a cancel: the result must
	// reach the folder, and the UI must show how the run ended.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.UpsertTypedSearchAttributes(dctx, api.StatusKey.ValueSet(string(res.State)))
	_ = workflow.UpsertMemo(dctx, map[string]any{"delegation": res.DelegationID, "summary": res.Summary})
	if api.Delivered(in.Quiet, res.State) {
		res.ResultID = fireID + api.ResultIDSuffix
		if err := leaveResult(dctx, in, fireID, res); err != nil {
			res.ResultID = ""
			return res, err
		}
	}
	if ctx.Err() != nil {
		// Recorded as cancelled in Temporal too, so the schedule and the
		// UI tell it from a run that ended by itself.
		return res, temporal.NewCanceledError()
	}
	return res, nil
}

// prepareFire runs PrepareScheduled where the schedule's folder is: on the
// schedule's host, else on any worker, as a delegation resolves its
// profiles.
func prepareFire(ctx workflow.Context, in api.ScheduledInput, fireID string) (api.ScheduledPrepared, error) {
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: prepareActivityTimeoutSec * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: prepareAttempts},
	}
	if in.Host != "" {
		opts.TaskQueue = hostQueue(ctx, in.Host)
	}
	var prep api.ScheduledPrepared
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), api.PrepareScheduledActivityName,
		api.PrepareScheduledInput{Scheduled: in, FireID: fireID}).Get(ctx, &prep)
	return prep, err
}

// runChild starts the prepared delegation or plan and waits for its end,
// filling res with how it ended.
func runChild(ctx workflow.Context, in api.ScheduledInput, prep api.ScheduledPrepared, res *api.ScheduledRunResult) {
	agent, cwd, parent := "delegation", in.Cwd, api.ScheduleParentPrefix+in.ScheduleID
	var wfType string
	var arg any
	if prep.Delegation != nil {
		wfType, arg = api.DelegationWorkflowName, *prep.Delegation
		if len(prep.Delegation.Tasks) > 0 {
			cwd = prep.Delegation.Tasks[0].Cwd
		}
	} else {
		agent, wfType, arg, cwd = "plan", api.PlanWorkflowName, *prep.Plan, prep.Plan.Cwd
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: prep.ChildID,
		// A fire's work is started once; its ID is never another's.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		// A cancel of the fire reaches its work (the delegation passes it
		// to its sessions), and the fire waits for the work to stop.
		WaitForCancellation: true,
		// What a start from the command gives a delegation or plan.
		TypedSearchAttributes: temporal.NewSearchAttributes(api.AgentKey.ValueSet(agent), api.StatusKey.ValueSet(string(api.StateRunning)),
			api.CwdKey.ValueSet(cwd), api.ParentSessionKey.ValueSet(parent)),
		Memo:          map[string]any{"name": prep.Name, "schedule": in.ScheduleID},
		StaticSummary: prep.Summary,
		StaticDetails: prep.Details,
	})
	fut := workflow.ExecuteChildWorkflow(cctx, wfType, arg)
	if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		res.DelegationID = ""
		if temporal.IsCanceledError(err) {
			res.State, res.Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the scheduled run was cancelled before it started")
			return
		}
		res.State, res.Error = api.StateFailed, errcode.NewInfo(errcode.Failed, "could not start the scheduled run: "+err.Error())
		return
	}
	var st api.DelegationStatus
	err := fut.Get(ctx, &st)
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		res.State, res.Summary = st.State, api.RunSummary(st)
		if res.State != api.StateCompleted {
			res.Error = firstError(st)
		}
	case temporal.IsCanceledError(err):
		res.State, res.Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the scheduled run was cancelled")
	case errors.As(err, new(*temporal.TerminatedError)):
		res.State, res.Error = api.StateTerminated, errcode.NewInfo(errcode.Terminated, "the scheduled run's workflow was terminated")
	case errors.As(err, new(*temporal.TimeoutError)):
		res.State, res.Error = api.StateTimedOut, errcode.NewInfo(errcode.Timeout, "the scheduled run's workflow timed out")
	case errors.As(err, &appErr):
		code := errcode.Code(appErr.Type())
		if _, ok := errcode.Parse(string(code)); !ok {
			code = errcode.Failed
		}
		res.State, res.Error = api.StateFailed, errcode.NewInfo(code, appErr.Message())
	default:
		res.State, res.Error = api.StateFailed, errcode.NewInfo(errcode.Failed, err.Error())
	}
}

// firstError is the first failed task's error of a run that did not
// complete.
func firstError(st api.DelegationStatus) *errcode.Info {
	for _, t := range st.Tasks {
		if t.Error != nil {
			return t.Error
		}
	}
	if st.Plan != nil && st.Plan.Stopped != nil {
		return st.Plan.Stopped
	}
	return errcode.NewInfo(errcode.Failed, "the scheduled run "+string(st.State))
}

// leaveResult starts the fire's ScheduledResult, which outlives the fire.
func leaveResult(ctx workflow.Context, in api.ScheduledInput, fireID string, res api.ScheduledRunResult) error {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            fireID + api.ResultIDSuffix,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		TypedSearchAttributes: temporal.NewSearchAttributes(api.AgentKey.ValueSet("schedule"), api.StatusKey.ValueSet(string(res.State)),
			api.CwdKey.ValueSet(in.Cwd)),
		Memo:          map[string]any{"schedule": in.ScheduleID, "delegation": res.DelegationID, "summary": res.Summary},
		StaticSummary: "result of " + fireID + " (" + string(res.State) + "), for the next pi session in " + in.Cwd,
	})
	fut := workflow.ExecuteChildWorkflow(cctx, api.ScheduledResultWorkflowName, api.ScheduledResultInput{
		ScheduleID: in.ScheduleID, FireID: fireID, DelegationID: res.DelegationID, Cwd: in.Cwd,
		State: res.State, Error: res.Error, Summary: res.Summary,
	})
	return fut.GetChildWorkflowExecution().Get(ctx, nil)
}

// ScheduledResult holds one fire's result until a pi session of its
// folder has it: the first session to claim it (ClaimUpdate) gets it, and
// its ack (AckSignal) ends the wait. Claims are decided here, one at a
// time, so that two pis started in the folder at once never both deliver
// it; a claim stays its session's until that session acknowledges it,
// takes it again (a restart), or a later pi replaces it because the
// claimant's process is gone (ClaimRequest.Replace). It waits at most the
// TTL (a delegation's ack TTL by default).
func ScheduledResult(ctx workflow.Context, in api.ScheduledResultInput) (api.ClaimResult, error) {
	h := &resultHolder{in: in}
	if err := workflow.SetQueryHandler(ctx, api.ResultQuery, func() (api.ClaimResult, error) { return h.view(false), nil }); err != nil {
		return h.view(false), err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.ClaimUpdate, h.onClaim,
		workflow.UpdateHandlerOptions{Validator: h.validateClaim}); err != nil {
		return h.view(false), err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		acks := workflow.GetSignalChannel(ctx, api.AckSignal)
		for {
			var req api.AckRequest
			if !acks.Receive(ctx, &req) {
				return
			}
			// Only the claimant acknowledges a claimed result: a pi whose
			// claim was replaced must not end the wait of the one that
			// replaced it. Unclaimed, anyone may (a person discarding it).
			if h.claimedBy == "" || req.By == h.claimedBy {
				h.acked = true
			}
		}
	})
	if _, err := workflow.AwaitWithTimeout(ctx, api.AckTTL(in.TTLSeconds), func() bool { return h.acked }); err != nil {
		return h.view(false), err
	}
	if h.acked {
		// Who has it, for describe's runs (visibility reads the memo).
		to := h.claimedBy
		if to == "" {
			to = "(discarded)"
		}
		_ = workflow.UpsertMemo(ctx, map[string]any{"deliveredTo": to})
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return h.view(false), err
	}
	return h.view(false), nil
}

type resultHolder struct {
	in        api.ScheduledResultInput
	claimedBy string
	holder    *api.ResultHolder
	acked     bool
}

func (h *resultHolder) view(won bool) api.ClaimResult {
	return api.ClaimResult{Won: won, ClaimedBy: h.claimedBy, Holder: h.holder, Acked: h.acked, Run: h.in}
}

func (h *resultHolder) validateClaim(req api.ClaimRequest) error {
	if req.By == "" {
		return temporal.NewApplicationError("a claim names the pi session that takes the result", string(errcode.InvalidInput))
	}
	return nil
}

// onClaim decides a claim: won when nobody holds the result, when this
// session does already, or when it replaces the session that holds it.
func (h *resultHolder) onClaim(ctx workflow.Context, req api.ClaimRequest) (api.ClaimResult, error) {
	takes := h.claimedBy == "" || h.claimedBy == req.By || (req.Replace != "" && req.Replace == h.claimedBy)
	if h.acked || !takes {
		return h.view(false), nil
	}
	if h.claimedBy != req.By {
		_ = workflow.UpsertTypedSearchAttributes(ctx, api.ParentSessionKey.ValueSet(req.By))
	}
	if h.claimedBy != req.By || !sameHolder(h.holder, req.Holder) {
		_ = workflow.UpsertMemo(ctx, map[string]any{"claimedBy": req.By, "holder": req.Holder})
	}
	h.claimedBy, h.holder = req.By, req.Holder
	return h.view(true), nil
}

func sameHolder(a, b *api.ResultHolder) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
