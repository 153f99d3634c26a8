package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Names of the delegation workflow and the profile resolution activity.
const (
	DelegationWorkflowName     = "Delegation"
	ResolveTasksActivityName   = "ResolveTasks"
	LookupSessionsActivityName = "LookupSessions"
	DefaultMaxConcurrency      = 4  // seed 002's MAX_CONCURRENCY
	MaxConcurrency             = 16 // as many as a delegation may hold
	MaxTasks                   = 16 // seed 002's MAX_PARALLEL_TASKS
	DefaultMaxDepth            = 1  // seed 003's subagents.maxDepth: children do not delegate
	resolveActivityTimeoutSec  = 30
	// DefaultAckTTL is how long a finished delegation started with Deliver
	// waits for its parent to acknowledge the results: as long as `subagents
	// dev` keeps closed workflows, so that a parent pi resumed within a month
	// still receives what it started. A waiting workflow costs nothing.
	DefaultAckTTL = 30 * 24 * time.Hour
)

// TaskSpec is one task of a delegation (seed 002's task object; `agent` is
// seed 000's name for `profile`).
type TaskSpec struct {
	Name    string                `json:"name"`
	Prompt  string                `json:"prompt"`
	Profile string                `json:"profile,omitempty"`
	Agent   string                `json:"agent,omitempty"`
	Cwd     string                `json:"cwd"`
	Timeout int                   `json:"timeout,omitempty"`
	Files   []activities.FileSpec `json:"files,omitempty"`
	Model   string                `json:"model,omitempty"`
	// Resume continues an earlier session (its ID) instead of starting one:
	// the same pi session file, so the child keeps its context.
	Resume string `json:"resume,omitempty"`
	// Description is seed 001's short label of the task, kept in the
	// session's memo for the UI and `list`.
	Description string `json:"description,omitempty"`
	// Rejected is why the caller refused this item of a batch on its own
	// (seed 001: the other items run); it never runs.
	Rejected *errcode.Info `json:"rejected,omitempty"`
}

// profile is the task's own profile name, whichever field it used.
func (t TaskSpec) profile() string { return t.ProfileOr("") }

// ProfileOr is the task's profile name, whichever field it used, else def
// (the delegation's default profile).
func (t TaskSpec) ProfileOr(def string) string {
	return cmp.Or(t.Profile, t.Agent, def)
}

// DelegationInput starts a delegation.
type DelegationInput struct {
	Tasks []TaskSpec `json:"tasks"`
	// Profile is the default for tasks that name none.
	Profile string `json:"profile,omitempty"`
	// SessionIDs are chosen by the caller, one per task, so that it knows
	// them before anything runs and the workflow stays deterministic.
	SessionIDs      []string `json:"sessionIds"`
	MaxConcurrency  int      `json:"maxConcurrency,omitempty"`
	ParentSessionID string   `json:"parentSessionId,omitempty"`
	// Depth is the caller's depth: 0 for a top-level pi.
	Depth    int `json:"depth,omitempty"`
	MaxDepth int `json:"maxDepth,omitempty"`
	// IdleTTLSeconds is handed to every session (0: DefaultIdleTTL).
	IdleTTLSeconds int `json:"idleTtlSeconds,omitempty"`
	// Deliver keeps the finished delegation open until its parent
	// acknowledges the results (AckUpdate), at most AckTTLSeconds (0:
	// DefaultAckTTL): how a parent pi that restarts finds what it has not
	// received yet.
	Deliver       bool `json:"deliver,omitempty"`
	AckTTLSeconds int  `json:"ackTtlSeconds,omitempty"`
	// Host runs the tasks on that host's workers (HostQueue): the caller's
	// machine, where the cwds exist. Empty: any worker.
	Host string `json:"host,omitempty"`
	// Version is the code version the delegation runs (CurrentVersion for
	// new ones; 0 for those started before versions existed).
	Version int `json:"version,omitempty"`
	// Tool is the tool family the delegation came through ("subagent",
	// "task", ...), for the profile policies that depend on it.
	Tool string `json:"tool,omitempty"`
}

// TaskResult is one task of a delegation.
type TaskResult struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	SessionID string `json:"sessionId"`
	Profile   string `json:"profile,omitempty"`
	// Model is the child's provider/id once the profile is resolved.
	Model string        `json:"model,omitempty"`
	State State         `json:"state"`
	Turn  *TurnResult   `json:"turn,omitempty"`
	Error *errcode.Info `json:"error,omitempty"`
}

// DelegationStatus answers StatusQuery and WaitUpdate and is the
// delegation's result; tasks are in input order, with seed 001's batch
// accounting.
type DelegationStatus struct {
	DelegationID  string           `json:"delegationId"`
	State         State            `json:"state"`
	Done          bool             `json:"done"`
	Tasks         []TaskResult     `json:"tasks"`
	TotalCount    int              `json:"total_count"`
	AcceptedCount int              `json:"accepted_count"`
	RejectedCount int              `json:"rejected_count"`
	BatchStatus   string           `json:"batch_status"`
	Usage         activities.Usage `json:"usage"`
	// Deliver and Delivered: the parent acknowledges the results.
	Deliver   bool `json:"deliver,omitempty"`
	Delivered bool `json:"delivered,omitempty"`
	// ParentSessionID is the pi session that started the delegation.
	ParentSessionID string `json:"parentSessionId,omitempty"`
}

// ValidateDelegation checks a request before anything starts; the client
// runs it too, so that bad input never becomes a workflow.
func ValidateDelegation(in DelegationInput) error {
	maxDepth := in.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	switch {
	case in.Depth >= maxDepth:
		return errcode.Errorf(errcode.DepthExceeded, "Subagent depth %d reached the limit of %d: a subagent cannot delegate further", in.Depth, maxDepth)
	case len(in.Tasks) == 0:
		return errcode.New(errcode.InvalidInput, "tasks must hold 1 to 16 tasks, got none")
	case len(in.Tasks) > MaxTasks:
		return errcode.Errorf(errcode.InvalidInput, "tasks must hold 1 to 16 tasks, got %d", len(in.Tasks))
	case len(in.SessionIDs) != len(in.Tasks):
		return errcode.Errorf(errcode.InvalidInput, "one session ID per task: %d IDs for %d tasks", len(in.SessionIDs), len(in.Tasks))
	case in.MaxConcurrency < 0 || in.MaxConcurrency > MaxConcurrency:
		return errcode.Errorf(errcode.InvalidInput, "maxConcurrency must be 1 to %d", MaxConcurrency)
	case !ValidHost(in.Host):
		return errcode.Errorf(errcode.InvalidInput, "host %q cannot name a task queue (no '@', '/' or spaces)", in.Host)
	}
	seen := map[string]bool{}
	for i, t := range in.Tasks {
		if t.Rejected != nil {
			continue
		}
		if err := ValidateTask(i, t); err != nil {
			return err
		}
		switch {
		case seen[in.SessionIDs[i]]:
			return errcode.Errorf(errcode.InvalidInput, "session ID %s is given twice", in.SessionIDs[i])
		case t.Resume != "" && seen["resume:"+t.Resume]:
			return errcode.Errorf(errcode.InvalidInput, "session %q is resumed by two tasks", t.Resume)
		}
		seen[in.SessionIDs[i]] = true
		if t.Resume != "" {
			seen["resume:"+t.Resume] = true
		}
	}
	return nil
}

// ValidateTask checks one task of a batch on its own: what makes this
// item, and not its batch, wrong.
func ValidateTask(i int, t TaskSpec) error {
	switch {
	case strings.TrimSpace(t.Name) == "":
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d]: name must not be empty", i)
	case strings.TrimSpace(t.Prompt) == "":
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): prompt must not be empty", i, t.Name)
	case t.Timeout < 0:
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): timeout must be at least 1 second", i, t.Name)
	case t.Profile != "" && t.Agent != "" && t.Profile != t.Agent:
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): agent %q and profile %q disagree", i, t.Name, t.Agent, t.Profile)
	}
	if err := activities.ValidateCwd(t.Cwd); err != nil {
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): %s", i, t.Name, err.Error())
	}
	for _, f := range t.Files {
		if err := f.Validate(); err != nil {
			return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): %s", i, t.Name, err.Error())
		}
	}
	return nil
}

// Delegation runs a batch of tasks as sessions, at most MaxConcurrency at a
// time, and returns when every task's first turn has ended. One task's
// failure never stops another; the sessions stay addressable after it.
func Delegation(ctx workflow.Context, in DelegationInput) (DelegationStatus, error) {
	d, err := newDelegation(ctx, in)
	if err != nil {
		return DelegationStatus{}, err
	}
	return d.run(ctx)
}

type delegation struct {
	in        DelegationInput
	resumes   map[int]activities.SessionLookup
	id        string
	limit     int
	tasks     []TaskResult
	started   []bool
	running   int
	cancel    bool
	resolved  bool
	delivered bool
}

func newDelegation(ctx workflow.Context, in DelegationInput) (*delegation, error) {
	if err := ValidateDelegation(in); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.CodeOf(err)), err)
	}
	d := &delegation{in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID, limit: in.MaxConcurrency}
	if d.limit == 0 {
		d.limit = DefaultMaxConcurrency
	}
	d.tasks = make([]TaskResult, len(in.Tasks))
	d.started = make([]bool, len(in.Tasks))
	for i, t := range in.Tasks {
		p := t.profile()
		if p == "" {
			p = in.Profile
		}
		d.tasks[i] = TaskResult{Index: i, Name: t.Name, SessionID: in.SessionIDs[i], Profile: p, State: StateQueued}
	}
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (DelegationStatus, error) { return d.status(), nil }); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandler(ctx, WaitUpdate, func(ctx workflow.Context, _ WaitRequest) (DelegationStatus, error) {
		if err := workflow.Await(ctx, d.allDone); err != nil {
			return DelegationStatus{}, err
		}
		return d.status(), nil
	}); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandler(ctx, CancelUpdate, func(ctx workflow.Context, _ CancelRequest) (CancelResult, error) {
		prior := d.status().State
		applied := !d.allDone()
		if applied {
			d.cancelAll(ctx)
		}
		return CancelResult{CancelApplied: applied, PriorStatus: prior}, nil
	}); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, AckUpdate,
		func(ctx workflow.Context, _ AckRequest) (DelegationStatus, error) {
			d.delivered = true
			return d.status(), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(AckRequest) error {
			if !d.allDone() {
				return temporal.NewApplicationError("the delegation has not finished: there is nothing to acknowledge yet", string(errcode.SessionRunning))
			}
			return nil
		}},
	); err != nil {
		return nil, err
	}
	done := workflow.GetSignalChannel(ctx, TaskDoneSignal)
	cancels := workflow.GetSignalChannel(ctx, CancelSignal)
	acks := workflow.GetSignalChannel(ctx, AckSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(done, func(c workflow.ReceiveChannel, _ bool) {
				var msg TaskDone
				c.Receive(ctx, &msg)
				d.finish(msg.Index, msg.Turn.State, &msg.Turn, msg.Turn.Error)
			})
			sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				d.cancelAll(ctx)
			})
			sel.AddReceive(acks, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				if d.allDone() {
					d.delivered = true
				}
			})
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
		}
	})
	return d, nil
}

func (d *delegation) finish(i int, st State, turn *TurnResult, e *errcode.Info) {
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
			workflow.SignalExternalWorkflow(ctx, d.tasks[i].SessionID, "", CancelSignal, CancelRequest{Reason: "delegation cancelled"})
		default:
			d.finish(i, StateCancelled, nil, cancelledError())
		}
	}
}

func cancelledError() *errcode.Info {
	return errcode.NewInfo(errcode.Cancelled, "Cancelled before it started")
}

func (d *delegation) run(ctx workflow.Context) (DelegationStatus, error) {
	if d.in.Version >= 2 {
		upsertChanged(ctx, keyword{StatusKey, string(StateRunning)}, keyword{AgentKey, "delegation"},
			keyword{ParentSessionKey, d.in.ParentSessionID})
	} else {
		_ = workflow.UpsertTypedSearchAttributes(ctx, StatusKey.ValueSet(string(StateRunning)), AgentKey.ValueSet("delegation"))
		if d.in.ParentSessionID != "" {
			_ = workflow.UpsertTypedSearchAttributes(ctx, ParentSessionKey.ValueSet(d.in.ParentSessionID))
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
			d.finish(i, StateFailed, nil, e)
			continue
		}
		if resolved[i].Error != nil {
			d.finish(i, StateFailed, nil, resolved[i].Error)
			continue
		}
		workflow.Go(ctx, func(ctx workflow.Context) { d.runTask(ctx, i, resolved[i]) })
	}
	if err := workflow.Await(ctx, d.allDone); err != nil {
		return d.status(), err
	}
	st := d.status()
	_ = workflow.UpsertTypedSearchAttributes(ctx, StatusKey.ValueSet(string(st.State)))
	if d.in.Deliver {
		ttl := DefaultAckTTL
		if d.in.AckTTLSeconds > 0 {
			ttl = time.Duration(d.in.AckTTLSeconds) * time.Second
		}
		if _, err := workflow.AwaitWithTimeout(ctx, ttl, func() bool { return d.delivered }); err != nil {
			return st, err
		}
		st = d.status()
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return st, err
	}
	return st, nil
}

// checkResumes validates every resume target before anything runs (seed
// 002): one that does not exist or is still running fails the whole call.
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
	var found []activities.SessionLookup
	if err := workflow.ExecuteActivity(actx, LookupSessionsActivityName, ids).Get(ctx, &found); err != nil {
		return err
	}
	d.resumes = map[int]activities.SessionLookup{}
	for k, l := range found {
		if k >= len(idx) {
			break
		}
		switch {
		case !l.Found:
			msg := fmt.Sprintf("Cannot resume: session %q not found. The session may have expired or the ID is incorrect.", l.SessionID)
			return temporal.NewNonRetryableApplicationError(msg, string(errcode.SessionNotFound), nil)
		case l.Open && l.State != string(StateWaitingForInput):
			msg := fmt.Sprintf("Cannot resume: session %q is still running. Wait for it to complete before resuming.", l.SessionID)
			return temporal.NewNonRetryableApplicationError(msg, string(errcode.SessionRunning), nil)
		}
		d.resumes[idx[k]] = l
		d.tasks[idx[k]].SessionID = l.SessionID
	}
	return nil
}

func (d *delegation) resolve(ctx workflow.Context) ([]profiles.ResolvedTask, error) {
	req := profiles.ResolveRequest{}
	for i, t := range d.in.Tasks {
		req.Tasks = append(req.Tasks, profiles.ResolveTask{Profile: d.tasks[i].Profile, Cwd: t.Cwd, Model: t.Model, TimeoutSeconds: t.Timeout, Tool: d.in.Tool})
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// Project profiles live under the tasks' cwds: read them there.
		TaskQueue: hostQueue(ctx, d.in.Host),
		// Reading a few profile files takes milliseconds; the bound only
		// catches a worker that hangs on a network file system.
		StartToCloseTimeout: resolveActivityTimeoutSec * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var out []profiles.ResolvedTask
	if d.in.Version >= 2 && d.in.Host == "" {
		// Any worker sees the tasks' cwds: resolve them on this one, in the
		// workflow task itself, without a round trip through the server.
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: resolveActivityTimeoutSec * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
		})
		if err := workflow.ExecuteLocalActivity(lctx, ResolveTasksActivityName, req).Get(ctx, &out); err != nil {
			return nil, err
		}
	} else if err := workflow.ExecuteActivity(actx, ResolveTasksActivityName, req).Get(ctx, &out); err != nil {
		return nil, err
	}
	if len(out) != len(d.tasks) {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("resolved %d of %d tasks", len(out), len(d.tasks)), string(errcode.Failed), nil)
	}
	return out, nil
}

// runTask starts one task's session when a concurrency slot is free and
// waits for its first turn to end.
func (d *delegation) runTask(ctx workflow.Context, i int, r profiles.ResolvedTask) {
	if err := workflow.Await(ctx, func() bool { return d.running < d.limit || d.cancel }); err != nil || d.cancel {
		d.finish(i, StateCancelled, nil, cancelledError())
		return
	}
	d.running++
	defer func() { d.running-- }()
	t := d.in.Tasks[i]
	d.tasks[i].State = StateRunning
	lookup, resuming := d.resumes[i]
	if resuming && lookup.Open {
		// The session waits for input: its next turn is this task.
		req := SendRequest{Prompt: t.Prompt, Files: t.Files, NotifyWorkflowID: d.id, NotifyIndex: i}
		if err := workflow.SignalExternalWorkflow(ctx, lookup.SessionID, "", SendSignal, req).Get(ctx, nil); err == nil {
			d.started[i] = true
			_ = workflow.Await(ctx, func() bool { return d.tasks[i].State.Terminal() })
			return
		}
		// It closed in the meantime: start it again below.
	}
	child := r.Child
	child.Depth = d.in.Depth + 1
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
	in := SessionInput{
		SessionID: d.tasks[i].SessionID, Agent: agent, Cwd: cwd, Prompt: t.Prompt, Files: t.Files,
		Name: t.Name, ParentSessionID: d.in.ParentSessionID, Child: child, Host: host,
		MaxFinalizeRetries: r.MaxFinalizeRetries, IdleTTLSeconds: d.in.IdleTTLSeconds,
		NotifyWorkflowID: d.id, NotifyIndex: i, Version: d.in.Version,
	}
	// A session starts running its first turn at once.
	initial := StateQueued
	if d.in.Version >= 2 {
		initial = StateRunning
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: in.SessionID,
		// A resumed session that had completed runs again under its ID.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// Sessions outlive their delegation: they stay addressable for
		// send, status and resume until their idle TTL passes.
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			AgentKey.ValueSet(activities.AgentName(in.Agent)), CwdKey.ValueSet(in.Cwd),
			StatusKey.ValueSet(string(initial)), ParentSessionKey.ValueSet(d.in.ParentSessionID),
		),
		Memo:          sessionMemo(t, d.id, host),
		StaticSummary: fmt.Sprintf("%s (%s)", t.Name, activities.AgentName(in.Agent)),
		StaticDetails: TaskDetails(t.Name, activities.AgentName(in.Agent), in.Cwd, t.Prompt, d.in.ParentSessionID, d.id),
	})
	fut := workflow.ExecuteChildWorkflow(cctx, SessionWorkflowName, in)
	if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		d.finish(i, StateFailed, nil, errcode.NewInfo(errcode.Failed, "could not start the session: "+err.Error()))
		return
	}
	d.started[i] = true
	// The session signals when its first turn ends; if it ends some other
	// way (terminated from the UI), its completion says so.
	workflow.Go(ctx, func(ctx workflow.Context) {
		var res SessionResult
		err := fut.Get(ctx, &res)
		switch {
		case err == nil && res.LastTurn != nil:
			d.finish(i, res.State, res.LastTurn, res.LastTurn.Error)
		case err == nil:
			d.finish(i, res.State, res.LastTurn, nil)
		case errors.As(err, new(*temporal.CanceledError)):
			d.finish(i, StateCancelled, res.LastTurn, errcode.NewInfo(errcode.Cancelled, "the session was cancelled"))
		default:
			d.finish(i, StateFailed, nil, errcode.NewInfo(errcode.Failed, err.Error()))
		}
	})
	_ = workflow.Await(ctx, func() bool { return d.tasks[i].State.Terminal() })
}

func (d *delegation) status() DelegationStatus {
	st := DelegationStatus{
		DelegationID: d.id, Tasks: append([]TaskResult(nil), d.tasks...), TotalCount: len(d.tasks),
		Deliver: d.in.Deliver, Delivered: d.delivered, ParentSessionID: d.in.ParentSessionID,
	}
	failed, cancelled := 0, 0
	for _, t := range d.tasks {
		if t.Turn != nil {
			st.Usage = st.Usage.Add(t.Turn.Usage)
		}
		rejected := t.Turn == nil && t.Error != nil && t.Error.Code != errcode.Cancelled
		if rejected {
			st.RejectedCount++
		} else {
			st.AcceptedCount++
		}
		switch t.State {
		case StateFailed, StateTimedOut:
			failed++
		case StateCancelled:
			cancelled++
		}
	}
	st.Done = d.allDone()
	st.BatchStatus = BatchStatus(st.TotalCount, st.RejectedCount, st.Done)
	switch {
	case !st.Done:
		st.State = StateRunning
	case d.cancel || cancelled > 0 && failed == 0 && cancelled == len(d.tasks):
		st.State = StateCancelled
	case failed > 0 || st.RejectedCount > 0:
		st.State = StateFailed
	default:
		st.State = StateCompleted
	}
	return st
}

// BatchStatus is seed 001's batch_status of total tasks of which rejected
// were refused on their own.
func BatchStatus(total, rejected int, done bool) string {
	switch {
	case rejected == total:
		return "rejected"
	case done && rejected == 0:
		return "completed"
	case rejected > 0:
		return "partial"
	}
	return "accepted"
}

// TaskDetails is a task as the Temporal UI shows it in a workflow's
// details: what an operator needs to tell one run from another without
// opening its history.
func TaskDetails(name, agent, cwd, prompt, parentSession, delegationID string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if r := []rune(first); len(r) > 200 {
		first = string(r[:200]) + "…"
	}
	details := fmt.Sprintf("**%s** · agent `%s`\n\n- cwd: `%s`\n- prompt: %s\n", name, agent, cwd, first)
	if parentSession != "" {
		details += fmt.Sprintf("- parent pi session: `%s`\n", parentSession)
	}
	if delegationID != "" {
		details += fmt.Sprintf("- delegation: `%s`\n", delegationID)
	}
	return details
}

// sessionMemo is what the UI and `list` show of a session beside its
// search attributes.
func sessionMemo(t TaskSpec, delegationID, host string) map[string]any {
	memo := map[string]any{"name": t.Name, "delegation": delegationID}
	if host != "" {
		// LookupSessions reads it back when the session is resumed.
		memo["host"] = host
	}
	if t.Description != "" {
		memo["description"] = t.Description
	}
	return memo
}
