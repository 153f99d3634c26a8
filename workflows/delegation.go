package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// resolveActivityTimeoutSec bounds the profile resolution activity: it
// reads a few files.
const resolveActivityTimeoutSec = 30

// Delegation runs a batch of tasks as sessions, at most MaxConcurrency at a
// time, and returns when every task's first turn has ended. One task's
// failure never stops another; the sessions stay addressable after it.
func Delegation(ctx workflow.Context, in api.DelegationInput) (api.DelegationStatus, error) {
	d, err := newDelegation(ctx, in)
	if err != nil {
		return api.DelegationStatus{}, err
	}
	return d.run(ctx)
}

type delegation struct {
	in        api.DelegationInput
	resumes   map[int]api.SessionLookup
	id        string
	limit     int
	tasks     []api.TaskResult
	started   []bool
	running   int
	cancel    bool
	resolved  bool
	delivered bool
}

func newDelegation(ctx workflow.Context, in api.DelegationInput) (*delegation, error) {
	if err := api.ValidateDelegation(in); refuses(ctx, err) {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.CodeOf(err)), err)
	}
	d := &delegation{in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID, limit: in.MaxConcurrency}
	if d.limit == 0 {
		d.limit = api.DefaultMaxConcurrency
	}
	d.tasks = make([]api.TaskResult, len(in.Tasks))
	d.started = make([]bool, len(in.Tasks))
	for i, t := range in.Tasks {
		p := t.ProfileOr("")
		if p == "" {
			p = in.Profile
		}
		d.tasks[i] = api.TaskResult{Index: i, Name: t.Name, SessionID: in.SessionIDs[i], Profile: p, State: api.StateQueued}
	}
	if err := d.registerHandlers(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// registerHandlers sets the delegation's query, update and signal handlers
// (api/messages.go names them); each is a method below.
func (d *delegation) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, api.StatusQuery, d.onStatus); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, api.WaitUpdate, d.onWait); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, api.CancelUpdate, d.onCancel); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.AckUpdate, d.onAck,
		workflow.UpdateHandlerOptions{Validator: d.validateAck}); err != nil {
		return err
	}
	workflow.Go(ctx, d.receiveSignals)
	return nil
}

// onStatus answers StatusQuery.
func (d *delegation) onStatus() (api.DelegationStatus, error) { return d.status(), nil }

// onWait answers WaitUpdate once every task has ended.
func (d *delegation) onWait(ctx workflow.Context, _ api.WaitRequest) (api.DelegationStatus, error) {
	if err := workflow.Await(ctx, d.allDone); err != nil {
		return api.DelegationStatus{}, err
	}
	return d.status(), nil
}

// onCancel answers CancelUpdate: finished tasks keep their results, the
// others are cancelled.
func (d *delegation) onCancel(ctx workflow.Context, _ api.CancelRequest) (api.CancelResult, error) {
	prior := d.status().State
	applied := !d.allDone()
	if applied {
		d.cancelAll(ctx)
	}
	return api.CancelResult{CancelApplied: applied, PriorStatus: prior}, nil
}

// onAck answers AckUpdate: the parent has the results, the delegation may
// complete.
func (d *delegation) onAck(_ workflow.Context, _ api.AckRequest) (api.DelegationStatus, error) {
	d.delivered = true
	return d.status(), nil
}

// validateAck refuses an ack before every task has ended.
func (d *delegation) validateAck(api.AckRequest) error {
	if !d.allDone() {
		return temporal.NewApplicationError("the delegation has not finished: there is nothing to acknowledge yet", string(errcode.SessionRunning))
	}
	return nil
}

// receiveSignals serves the delegation's signals (delegationSignals).
func (d *delegation) receiveSignals(ctx workflow.Context) {
	delegationSignals(ctx,
		func(msg api.TaskDone) { d.finish(msg.Index, msg.Turn.State, &msg.Turn, msg.Turn.Error) },
		func() { d.cancelAll(ctx) },
		func() {
			if d.allDone() {
				d.delivered = true
			}
		})
}

// delegationSignals takes, for as long as the run lasts, TaskDoneSignal
// from the sessions, and CancelSignal and AckSignal (the answerless forms
// of the updates): a delegation's and a plan's, which answer as one.
func delegationSignals(ctx workflow.Context, done func(api.TaskDone), cancel, ack func()) {
	dones := workflow.GetSignalChannel(ctx, api.TaskDoneSignal)
	cancels := workflow.GetSignalChannel(ctx, api.CancelSignal)
	acks := workflow.GetSignalChannel(ctx, api.AckSignal)
	for {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(dones, func(c workflow.ReceiveChannel, _ bool) {
			var msg api.TaskDone
			c.Receive(ctx, &msg)
			done(msg)
		})
		sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			cancel()
		})
		sel.AddReceive(acks, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			ack()
		})
		sel.Select(ctx)
		if ctx.Err() != nil {
			return
		}
	}
}

func (d *delegation) finish(i int, st api.State, turn *api.TurnResult, e *errcode.Info) {
	if i < 0 || i >= len(d.tasks) || d.tasks[i].State.Terminal() {
		return
	}
	d.tasks[i].State, d.tasks[i].Turn, d.tasks[i].Error = st, turn, e
}

func (d *delegation) allDone() bool {
	for _, t := range d.tasks {
		if !t.State.Terminal() {
			return false
		}
	}
	return d.resolved
}

// cancelAll cancels the running sessions and the tasks not yet started;
// finished tasks keep their results.
func (d *delegation) cancelAll(ctx workflow.Context) {
	d.cancel = true
	for i := range d.tasks {
		switch {
		case d.tasks[i].State.Terminal():
		case d.started[i]:
			workflow.SignalExternalWorkflow(ctx, d.tasks[i].SessionID, "", api.CancelSignal, api.CancelRequest{Reason: "delegation cancelled"})
		default:
			d.finish(i, api.StateCancelled, nil, cancelledError())
		}
	}
}

func cancelledError() *errcode.Info {
	return errcode.NewInfo(errcode.Cancelled, "Cancelled before it started")
}

func (d *delegation) run(ctx workflow.Context) (api.DelegationStatus, error) {
	if d.in.Version >= 2 {
		upsertChanged(ctx, keyword{api.StatusKey, string(api.StateRunning)}, keyword{api.AgentKey, "delegation"},
			keyword{api.ParentSessionKey, d.in.ParentSessionID})
	} else {
		_ = workflow.UpsertTypedSearchAttributes(ctx, api.StatusKey.ValueSet(string(api.StateRunning)), api.AgentKey.ValueSet("delegation"))
		if d.in.ParentSessionID != "" {
			_ = workflow.UpsertTypedSearchAttributes(ctx, api.ParentSessionKey.ValueSet(d.in.ParentSessionID))
		}
	}
	if err := d.checkResumes(ctx); err != nil {
		return d.status(), err
	}
	resolved, err := d.resolve(ctx)
	if err != nil {
		return d.status(), err
	}
	d.resolved = true
	for i := range d.tasks {
		if e := d.in.Tasks[i].Rejected; e != nil {
			d.finish(i, api.StateFailed, nil, e)
			continue
		}
		if resolved[i].Error != nil {
			d.finish(i, api.StateFailed, nil, resolved[i].Error)
			continue
		}
		workflow.Go(ctx, func(ctx workflow.Context) { d.runTask(ctx, i, resolved[i]) })
	}
	if err := workflow.Await(ctx, d.allDone); err != nil {
		d.cancelledByTemporal(ctx)
		return d.status(), err
	}
	return settle(ctx, d.status, d.in.Deliver, d.in.AckTTLSeconds, func() bool { return d.delivered })
}

// settle ends a delegation (or a plan) whose tasks have ended: it records
// its state, waits for its parent's ack when it delivers (at most the ack
// TTL), and lets its handlers finish; the answer is its status then.
func settle(ctx workflow.Context, status func() api.DelegationStatus, deliver bool, ackTTLSeconds int, delivered func() bool) (api.DelegationStatus, error) {
	st := status()
	_ = workflow.UpsertTypedSearchAttributes(ctx, api.StatusKey.ValueSet(string(st.State)))
	if deliver {
		if _, err := workflow.AwaitWithTimeout(ctx, api.AckTTL(ackTTLSeconds), delivered); err != nil {
			return st, err
		}
		st = status()
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return st, err
	}
	return st, nil
}

// busy reports whether a resume target in state st (open) runs a turn: a
// session of a version before 4 recorded waiting_for_input between turns,
// later ones record how the turn ended.
func (d *delegation) busy(st api.State) bool {
	if d.in.Version < 4 {
		return st != api.StateWaitingForInput
	}
	return st == api.StateRunning || st == api.StateQueued
}

// cancelledByTemporal, from version 4 on, passes a cancel of the
// delegation's own workflow (`temporal workflow cancel`, the UI) to its
// running sessions, as the cancel update does, and records cancelled.
func (d *delegation) cancelledByTemporal(ctx workflow.Context) {
	if d.in.Version < 4 || !temporal.IsCanceledError(ctx.Err()) {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var sent []workflow.Future
	d.cancel = true
	for i := range d.tasks {
		switch {
		case d.tasks[i].State.Terminal():
		case d.started[i]:
			sent = append(sent, workflow.SignalExternalWorkflow(dctx, d.tasks[i].SessionID, "", api.CancelSignal, api.CancelRequest{Reason: "delegation cancelled"}))
		default:
			d.finish(i, api.StateCancelled, nil, cancelledError())
		}
	}
	// The server drops what a workflow that has closed asked of others:
	// the delegation stays open until its sessions have the cancel.
	for _, f := range sent {
		_ = f.Get(dctx, nil)
	}
	_ = workflow.UpsertTypedSearchAttributes(dctx, api.StatusKey.ValueSet(string(api.StateCancelled)))
}

// checkResumes validates every resume target before anything runs (the delegate
// contract): one that does not exist or is still running fails the whole call.
func (d *delegation) checkResumes(ctx workflow.Context) error {
	var ids []string
	var idx []int
	for i, t := range d.in.Tasks {
		if t.Resume != "" && t.Rejected == nil {
			ids, idx = append(ids, t.Resume), append(idx, i)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A few describe calls to the frontend; the bound catches a
		// frontend that does not answer.
		StartToCloseTimeout: resolveActivityTimeoutSec * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var found []api.SessionLookup
	if err := workflow.ExecuteActivity(actx, api.LookupSessionsActivityName, ids).Get(ctx, &found); err != nil {
		return err
	}
	d.resumes = map[int]api.SessionLookup{}
	for k, l := range found {
		if k >= len(idx) {
			break
		}
		switch {
		case !l.Found:
			msg := fmt.Sprintf("Cannot resume: session %q not found. The session may have expired or the ID is incorrect.", l.SessionID)
			return temporal.NewNonRetryableApplicationError(msg, string(errcode.SessionNotFound), nil)
		case l.Open && d.busy(api.State(l.State)) && !d.in.Send:
			msg := fmt.Sprintf("Cannot resume: session %q is still running. Wait for it to complete before resuming.", l.SessionID)
			return temporal.NewNonRetryableApplicationError(msg, string(errcode.SessionRunning), nil)
		}
		d.resumes[idx[k]] = l
		d.tasks[idx[k]].SessionID = l.SessionID
	}
	return nil
}

func (d *delegation) resolve(ctx workflow.Context) ([]profiles.ResolvedTask, error) {
	req := profiles.ResolveRequest{Depth: d.in.Depth + 1, Knobs: d.in.Knobs}
	early := 0
	for i, t := range d.in.Tasks {
		_, resuming := d.resumes[i]
		// The tasks that start at once: their children may start while
		// the sessions do.
		now := t.Rejected == nil && !resuming && early < d.limit
		if now {
			early++
		}
		req.Tasks = append(req.Tasks, profiles.ResolveTask{Profile: d.tasks[i].Profile, Cwd: t.Cwd, Model: t.Model,
			TimeoutSeconds: t.TimeoutSeconds, Tool: d.in.Tool, Early: now})
	}
	return resolveTasks(ctx, d.in.Host, d.in.Version, req)
}

// resolveTasks resolves the tasks' profiles on a worker that sees their
// cwds: host's, or (version 2 on) this one, in the workflow task itself;
// one answer per task, in their order.
func resolveTasks(ctx workflow.Context, host string, version int, req profiles.ResolveRequest) ([]profiles.ResolvedTask, error) {
	out, err := runResolve(ctx, host, version, req)
	if err == nil && len(out) != len(req.Tasks) {
		err = temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolved %d of %d tasks", len(out), len(req.Tasks)), string(errcode.Failed), nil)
	}
	return out, err
}

// runResolve runs the ResolveTasks activity where resolveTasks says.
func runResolve(ctx workflow.Context, host string, version int, req profiles.ResolveRequest) ([]profiles.ResolvedTask, error) {
	var out []profiles.ResolvedTask
	if version >= 2 && host == "" {
		// Any worker sees the tasks' cwds: resolve them on this one, in the
		// workflow task itself, without a round trip through the server.
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: resolveActivityTimeoutSec * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
		})
		err := workflow.ExecuteLocalActivity(lctx, api.ResolveTasksActivityName, req).Get(ctx, &out)
		return out, err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// Project profiles live under the tasks' cwds: read them there.
		TaskQueue: hostQueue(ctx, host),
		// Reading a few profile files takes milliseconds; the bound only
		// catches a worker that hangs on a network file system.
		StartToCloseTimeout: resolveActivityTimeoutSec * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	err := workflow.ExecuteActivity(actx, api.ResolveTasksActivityName, req).Get(ctx, &out)
	return out, err
}

// runTask starts one task's session when a concurrency slot is free and
// waits for its first turn to end.
func (d *delegation) runTask(ctx workflow.Context, i int, r profiles.ResolvedTask) {
	if err := workflow.Await(ctx, func() bool { return d.running < d.limit || d.cancel }); err != nil || d.cancel {
		d.finish(i, api.StateCancelled, nil, cancelledError())
		return
	}
	d.running++
	defer func() { d.running-- }()
	t := d.in.Tasks[i]
	d.tasks[i].State = api.StateRunning
	lookup, resuming := d.resumes[i]
	if resuming {
		// Its next turn is this task: sent to the session's run, or to a
		// new run that reopens it (version 5).
		req := api.SendRequest{Prompt: t.Prompt, Files: t.Files, NotifyWorkflowID: d.id, NotifyIndex: i, Name: t.Name}
		if sendToSession(ctx, d.in.Version, lookup.SessionID, lookup.Open, req) {
			d.started[i] = true
			_ = workflow.Await(ctx, func() bool { return d.tasks[i].State.Terminal() })
			return
		}
		// It closed before version 5, or past its idle TTL: start it
		// again below, on its pi session file.
	}
	child := r.Child
	profiles.Isolate(&child, t.Worktree, t.BaseRef)
	child.Depth = d.in.Depth + 1
	if t.Context == "fork" && !resuming {
		child.ForkFrom = d.in.ParentSessionFile
	}
	d.tasks[i].Model = child.Model
	if d.tasks[i].Model == "" {
		d.tasks[i].Model = t.Model
	}
	cwd, agent, host := t.Cwd, d.tasks[i].Profile, d.in.Host
	if resuming {
		// The pi session file is found by the original agent and cwd, on
		// the host that wrote it.
		cwd, agent, host = lookup.Cwd, lookup.Agent, lookup.Host
		if agent == "default" {
			agent = ""
		}
	}
	in := api.SessionInput{
		SessionID: d.tasks[i].SessionID, Agent: agent, Cwd: cwd, Prompt: t.Prompt, Files: t.Files,
		Name: t.Name, ParentSessionID: d.in.ParentSessionID, Child: child, Host: host,
		MaxFinalizeRetries: r.MaxFinalizeRetries, IdleTTLSeconds: d.in.IdleTTLSeconds,
		NotifyWorkflowID: d.id, NotifyIndex: i, Version: d.in.Version,
		QuestionTimeoutSeconds: r.QuestionTimeoutSeconds,
	}
	if t.QuestionTimeoutSeconds > 0 {
		// The task's own wins over its profile's.
		in.QuestionTimeoutSeconds = t.QuestionTimeoutSeconds
	}
	// A session starts running its first turn at once.
	initial := api.StateQueued
	if d.in.Version >= 2 {
		initial = api.StateRunning
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: in.SessionID,
		// A resumed session that had completed runs again under its ID.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// Sessions outlive their delegation: they stay addressable for
		// send, status and resume until their idle TTL passes.
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		TypedSearchAttributes: api.SessionAttributes(api.AgentName(in.Agent), in.Cwd, initial, d.in.ParentSessionID),
		Memo:                  api.SessionMemo(t, d.id, host),
		StaticSummary:         api.SessionSummary(t.Name, api.AgentName(in.Agent)) + api.NestedUnder(d.in.Depth, d.in.ParentSessionID),
		StaticDetails:         api.TaskDetails(t.Name, api.AgentName(in.Agent), in.Cwd, t.Prompt, d.in.ParentSessionID, d.id, d.in.Depth),
	})
	fut := workflow.ExecuteChildWorkflow(cctx, api.SessionWorkflowName, in)
	if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		d.finish(i, api.StateFailed, nil, errcode.NewInfo(errcode.Failed, "could not start the session: "+err.Error()))
		return
	}
	d.started[i] = true
	// The session signals when its first turn ends; if it ends some other
	// way (terminated from the UI), its completion says so.
	workflow.Go(ctx, func(ctx workflow.Context) {
		var res api.SessionResult
		err := fut.Get(ctx, &res)
		if d.in.Version >= 5 && sessionResultOf(err, &res) {
			// It closed as its turn ended (failed or cancelled).
			err = nil
		}
		switch {
		case err == nil && res.LastTurn != nil:
			d.finish(i, res.State, res.LastTurn, res.LastTurn.Error)
		case err == nil:
			d.finish(i, res.State, res.LastTurn, nil)
		case errors.As(err, new(*temporal.CanceledError)):
			d.finish(i, api.StateCancelled, res.LastTurn, errcode.NewInfo(errcode.Cancelled, "the session was cancelled"))
		default:
			d.finish(i, api.StateFailed, nil, errcode.NewInfo(errcode.Failed, err.Error()))
		}
	})
	_ = workflow.Await(ctx, func() bool { return d.tasks[i].State.Terminal() })
}

func (d *delegation) status() api.DelegationStatus {
	st := api.DelegationStatus{
		DelegationID: d.id, Tasks: append([]api.TaskResult(nil), d.tasks...), Done: d.allDone(),
		Deliver: d.in.Deliver, Delivered: d.delivered, ParentSessionID: d.in.ParentSessionID,
	}
	st.Summarize(d.cancel)
	return st
}

// sendToSession sends req to session sid as its next turn: by a signal
// while its run is open, else (version 5) by SendToSession, which reopens
// a run that closed with its turn. False when it cannot be sent so: the
// caller starts the session again.
func sendToSession(ctx workflow.Context, version int, sid string, open bool, req api.SendRequest) bool {
	if open {
		if err := workflow.SignalExternalWorkflow(ctx, sid, "", api.SendSignal, req).Get(ctx, nil); err == nil {
			return true
		}
		// It closed in the meantime.
	}
	if version < 5 {
		return false
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary: "send to session " + sid,
		// A describe, a history read and a signal-with-start to the
		// frontend; the bound catches a frontend that does not answer.
		StartToCloseTimeout: resolveActivityTimeoutSec * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var out api.SendToSessionResult
	if err := workflow.ExecuteActivity(actx, api.SendToSessionActivityName, api.SendToSessionInput{SessionID: sid, Send: req}).Get(ctx, &out); err != nil {
		workflow.GetLogger(ctx).Warn("could not send to the session", "session", sid, "error", err)
		return false
	}
	return out.Sent
}

// sessionResultOf reads into res the result a version 5 session closed
// with when its turn failed or was cancelled (the failure's details): true
// when err held one.
func sessionResultOf(err error, res *api.SessionResult) bool {
	held, derr := api.DetailsOf(err, res)
	return held && derr == nil && res.SessionID != ""
}
