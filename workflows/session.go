// Package workflows holds the workflow code: delegations and the per-task
// session, their message names and payload types.
package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/internal/errcode"
)

// Names under which the worker registers workflows and activities. They are
// part of every recorded history: renaming one breaks running workflows.
const (
	SessionWorkflowName = "Session"
	RunPiActivityName   = "RunPi"
)

// Defaults of a session's settings.
const (
	// DefaultMaxFinalizeRetries: how many times a child that did not
	// finalize is sent corrective feedback (seed 000: "a small retry limit").
	DefaultMaxFinalizeRetries = 2
	// DefaultIdleTTL: how long a finished session waits for a `send` before
	// it completes; it can still be resumed by ID afterwards.
	DefaultIdleTTL = time.Hour
	// maxTurnsPerRun bounds the history of one run of a long sticky
	// session: each turn adds about a dozen events, so 100 turns stay far
	// below the size where Temporal suggests continue-as-new.
	maxTurnsPerRun = 100
	// maxRunMarks bounds the turn marks a session carries across
	// continue-as-new (about 60 bytes each); a transcript, capped at 1 MiB,
	// never shows more runs than that anyway.
	maxRunMarks = 1000
)

// SessionInput starts a session (one subagent task), or carries it across
// continue-as-new.
type SessionInput struct {
	// SessionID is also the workflow ID.
	SessionID       string                `json:"sessionId"`
	Agent           string                `json:"agent,omitempty"`
	Cwd             string                `json:"cwd"`
	Prompt          string                `json:"prompt"`
	Files           []activities.FileSpec `json:"files,omitempty"`
	Name            string                `json:"name,omitempty"`
	ParentSessionID string                `json:"parentSessionId,omitempty"`
	// Model is provider/id, for callers that set nothing else of Child.
	Model string `json:"model,omitempty"`
	// Host pins the child runs to the workers of that host (HostQueue):
	// the one that sees Cwd and keeps the session file. Empty: any worker.
	Host string `json:"host,omitempty"`
	// TimeoutSeconds bounds one turn; 0 means the default (600 s).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Child is the resolved profile: how every turn's pi runs. Its session,
	// agent, cwd, prompt, files and turn are filled in per turn.
	Child activities.RunPiInput `json:"child"`
	// MaxFinalizeRetries defaults to DefaultMaxFinalizeRetries; nil is the
	// default, 0 means no corrective feedback.
	MaxFinalizeRetries *int `json:"maxFinalizeRetries,omitempty"`
	// IdleTTLSeconds: 0 is DefaultIdleTTL; negative completes the session as
	// soon as its turns are done.
	IdleTTLSeconds int `json:"idleTtlSeconds,omitempty"`
	// NotifyWorkflowID, when set, is the delegation to signal (TaskDone,
	// with NotifyIndex) when the first turn (Prompt) ends.
	NotifyWorkflowID string `json:"notifyWorkflowId,omitempty"`
	NotifyIndex      int    `json:"notifyIndex,omitempty"`
	// Carry is the state continue-as-new hands to the next run.
	Carry *SessionCarry `json:"carry,omitempty"`
	// Version is the code version the session runs (CurrentVersion).
	Version int `json:"version,omitempty"`
}

// SessionCarry is what a session's next run needs from the previous one.
type SessionCarry struct {
	Turns    int                  `json:"turns"`
	Accepted int                  `json:"accepted"`
	Usage    activities.Usage     `json:"usage"`
	LastTurn *TurnResult          `json:"lastTurn,omitempty"`
	Pending  []SendRequest        `json:"pending,omitempty"`
	Runs     []activities.RunMark `json:"runs,omitempty"`
}

// TurnResult is one turn of a session: its last attempt's result, and the
// usage of all its attempts.
type TurnResult struct {
	Turn  int   `json:"turn"`
	State State `json:"state"`
	// Attempts is the number of child runs of this turn: 1 plus the
	// finalize retries it needed.
	Attempts int                    `json:"attempts"`
	Usage    activities.Usage       `json:"usage"`
	Result   activities.RunPiResult `json:"result"`
	Error    *errcode.Info          `json:"error,omitempty"`
}

// SessionStatus answers StatusQuery and WaitUpdate.
type SessionStatus struct {
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent,omitempty"`
	State     State  `json:"state"`
	// Turn is the running (or last) turn; Accepted the last turn queued.
	Turn     int `json:"turn"`
	Accepted int `json:"accepted"`
	// Attempt is the child run within the turn (finalize retries).
	Attempt int `json:"attempt"`
	// TurnStarted is when the running (or last) turn started; with
	// TimeoutSeconds it gives a turn's elapsed time against its timeout.
	TurnStarted    time.Time        `json:"turnStarted,omitempty"`
	TimeoutSeconds int              `json:"timeoutSeconds"`
	Usage          activities.Usage `json:"usage"`
	LastTurn       *TurnResult      `json:"lastTurn,omitempty"`
	Error          *errcode.Info    `json:"error,omitempty"`
	// Model is the child's provider/id ("" for pi's default) and Thinking
	// its thinking level.
	Model    string `json:"model,omitempty"`
	Thinking string `json:"thinking,omitempty"`
	Cwd      string `json:"cwd"`
	Name     string `json:"name,omitempty"`
	Host     string `json:"host,omitempty"`
	// Runs mark where each turn begins in the pi session file, for
	// transcripts.
	Runs []activities.RunMark `json:"runs,omitempty"`
}

// SessionResult is what a session returns when it completes.
type SessionResult struct {
	SessionID string           `json:"sessionId"`
	State     State            `json:"state"`
	Turns     int              `json:"turns"`
	Usage     activities.Usage `json:"usage"`
	LastTurn  *TurnResult      `json:"lastTurn,omitempty"`
}

// Session runs a subagent task as a sticky session: turns of child pi runs
// on one pi session file, each retried with corrective feedback until the
// child finalizes, then waiting for `send` until the idle TTL passes.
func Session(ctx workflow.Context, in SessionInput) (SessionResult, error) {
	s, err := newSession(ctx, in)
	if err != nil {
		return SessionResult{}, err
	}
	return s.run(ctx)
}

type session struct {
	in         SessionInput
	maxRetries int
	idleTTL    time.Duration

	state     State
	turn      int // the running or last turn
	done      int // turns that have ended
	accepted  int // turns queued so far
	attempt   int
	pending   []SendRequest
	usage     activities.Usage
	last      *TurnResult
	cancelRun workflow.CancelFunc // cancels the running child, when one runs
	turnsRun  int                 // turns run since this run of the workflow started
	started   time.Time           // when the running or last turn started
	runs      []activities.RunMark
}

func newSession(ctx workflow.Context, in SessionInput) (*session, error) {
	if in.Prompt == "" && in.Carry == nil {
		return nil, temporal.NewNonRetryableApplicationError("prompt must not be empty", string(errcode.InvalidInput), nil)
	}
	s := &session{in: in, maxRetries: DefaultMaxFinalizeRetries, idleTTL: DefaultIdleTTL, state: StateQueued}
	if in.MaxFinalizeRetries != nil {
		s.maxRetries = max(*in.MaxFinalizeRetries, 0)
	}
	if in.IdleTTLSeconds > 0 {
		s.idleTTL = time.Duration(in.IdleTTLSeconds) * time.Second
	} else if in.IdleTTLSeconds < 0 {
		s.idleTTL = 0
	}
	if in.Version >= 2 {
		// The starter's status attribute is where the session stands.
		if v, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(StatusKey); ok && v != "" {
			s.state = State(v)
		}
	}
	if c := in.Carry; c != nil {
		s.turn, s.done, s.accepted, s.usage, s.last = c.Turns, c.Turns, c.Accepted, c.Usage, c.LastTurn
		s.pending, s.runs = c.Pending, c.Runs
	} else {
		s.accept(SendRequest{Prompt: in.Prompt, Files: in.Files, NotifyWorkflowID: in.NotifyWorkflowID, NotifyIndex: in.NotifyIndex})
	}

	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (SessionStatus, error) {
		return s.status(), nil
	}); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, SendUpdate,
		func(ctx workflow.Context, req SendRequest) (SendAccepted, error) {
			return SendAccepted{Turn: s.accept(req)}, nil
		},
		workflow.UpdateHandlerOptions{Validator: validateSend},
	); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandler(ctx, WaitUpdate,
		func(ctx workflow.Context, req WaitRequest) (SessionStatus, error) {
			target := req.Turn
			if target <= 0 {
				target = s.accepted
			}
			if err := workflow.Await(ctx, func() bool { return s.done >= target }); err != nil {
				return SessionStatus{}, err
			}
			return s.status(), nil
		},
	); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandler(ctx, CancelUpdate, func(ctx workflow.Context, _ CancelRequest) (CancelResult, error) {
		return CancelResult{CancelApplied: s.cancel(), PriorStatus: s.state}, nil
	}); err != nil {
		return nil, err
	}
	sends := workflow.GetSignalChannel(ctx, SendSignal)
	cancels := workflow.GetSignalChannel(ctx, CancelSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(sends, func(c workflow.ReceiveChannel, _ bool) {
				var req SendRequest
				c.Receive(ctx, &req)
				if validateSend(req) == nil {
					s.accept(req)
				}
			})
			sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
				var req CancelRequest
				c.Receive(ctx, &req)
				_ = s.cancel()
			})
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
		}
	})
	return s, nil
}

func validateSend(req SendRequest) error {
	if strings.TrimSpace(req.Prompt) == "" {
		return temporal.NewApplicationError("prompt must not be empty", string(errcode.InvalidInput))
	}
	for _, f := range req.Files {
		if err := f.Validate(); err != nil {
			return temporal.NewApplicationError(err.Error(), string(errcode.InvalidInput))
		}
	}
	return nil
}

// accept queues a prompt and returns the turn it will run as.
func (s *session) accept(req SendRequest) int {
	s.accepted++
	s.pending = append(s.pending, req)
	return s.accepted
}

// cancel stops the running child and says whether there was one; with none
// running (the session waits for input, or is done) it does nothing.
func (s *session) cancel() bool {
	if s.cancelRun == nil {
		return false
	}
	s.cancelRun()
	return true
}

func (s *session) status() SessionStatus {
	st := SessionStatus{
		SessionID: s.in.SessionID, Agent: s.in.Agent, State: s.state,
		Turn: s.turn, Accepted: s.accepted, Attempt: s.attempt, Usage: s.usage, LastTurn: s.last,
		TurnStarted: s.started, TimeoutSeconds: s.timeoutSeconds(),
		Model: s.model(), Thinking: s.in.Child.Thinking, Cwd: s.in.Cwd, Name: s.in.Name, Host: s.in.Host,
		Runs: append([]activities.RunMark(nil), s.runs...),
	}
	if s.last != nil {
		st.Error = s.last.Error
	}
	return st
}

// model is the child's provider/id: the profile's, else the task's.
func (s *session) model() string {
	if s.in.Child.Model != "" {
		return s.in.Child.Model
	}
	return s.in.Model
}

// timeoutSeconds is a turn's timeout: the resolved child's (the task's,
// else its profile's: profiles.Resolve), else the session input's, else the
// default RunPiInput.Timeout applies.
func (s *session) timeoutSeconds() int {
	child := activities.RunPiInput{TimeoutSeconds: cmp.Or(s.in.Child.TimeoutSeconds, s.in.TimeoutSeconds)}
	return int(child.Timeout() / time.Second)
}

func (s *session) result() SessionResult {
	return SessionResult{SessionID: s.in.SessionID, State: s.state, Turns: s.done, Usage: s.usage, LastTurn: s.last}
}

func (s *session) run(ctx workflow.Context) (SessionResult, error) {
	s.upsertIdentity(ctx)
	for {
		if len(s.pending) == 0 {
			if s.in.Version >= 2 && s.idleTTL == 0 && s.last != nil {
				// Not sticky: done as soon as its turns are.
				return s.finish(ctx)
			}
			if s.last != nil {
				s.setState(ctx, StateWaitingForInput)
			}
			if s.turnsRun >= maxTurnsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
				return s.continueAsNew(ctx)
			}
			got, err := workflow.AwaitWithTimeout(ctx, s.idleTTL, func() bool { return len(s.pending) > 0 })
			if err != nil {
				return s.result(), err
			}
			if !got {
				return s.finish(ctx)
			}
		}
		req := s.pending[0]
		s.pending = s.pending[1:]
		s.runTurn(ctx, req)
		if ctx.Err() != nil {
			// The workflow itself was cancelled (e.g. from the UI).
			return s.result(), temporal.NewCanceledError(s.result())
		}
	}
}

// finish completes the session once it has been idle for its TTL, with the
// state of its last turn.
func (s *session) finish(ctx workflow.Context) (SessionResult, error) {
	if s.last != nil {
		s.setState(ctx, s.last.State)
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return s.result(), err
	}
	return s.result(), nil
}

func (s *session) continueAsNew(ctx workflow.Context) (SessionResult, error) {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return s.result(), err
	}
	next := s.in
	next.Prompt, next.Files = "", nil
	next.Carry = &SessionCarry{Turns: s.done, Accepted: s.accepted, Usage: s.usage, LastTurn: s.last, Pending: s.pending, Runs: s.runs}
	return SessionResult{}, workflow.NewContinueAsNewError(ctx, SessionWorkflowName, next)
}

// runTurn runs one turn: the child, then corrective feedback until it
// finalizes or the retries run out.
func (s *session) runTurn(ctx workflow.Context, req SendRequest) {
	s.turn++
	s.turnsRun++
	s.attempt = 0
	s.started = workflow.Now(ctx)
	s.setState(ctx, StateRunning)
	agent := activities.AgentName(s.in.Agent)
	countTurn(ctx, TasksStartedMetric, map[string]string{"agent": agent})
	log := workflow.GetLogger(ctx)
	log.Info("turn started", "session", s.in.SessionID, "agent", agent, "turn", s.turn)
	turn := &TurnResult{Turn: s.turn}
	prompt, files := req.Prompt, req.Files
	s.runs = append(s.runs, activities.RunMark{Turn: s.turn, State: string(StateRunning)})
	if len(s.runs) > maxRunMarks {
		s.runs = s.runs[len(s.runs)-maxRunMarks:]
	}
	mark := &s.runs[len(s.runs)-1]
	for {
		s.attempt++
		turn.Attempts = s.attempt
		res, err := s.runChild(ctx, prompt, files)
		if s.attempt == 1 {
			mark.FirstMessage = res.MessagesBefore
		}
		turn.Result = res
		turn.Usage = turn.Usage.Add(res.Usage)
		if err != nil {
			turn.State, turn.Error = stateOfError(err)
			break
		}
		// A long answer cut to the output cap is still an answer (seed 004):
		// the turn completes and carries the truncation notice.
		truncated := res.Error != nil && res.Error.Code == errcode.OutputTruncated && res.OutputTruncated
		if res.Error != nil && !truncated {
			turn.Error = res.Error
			turn.State = StateFailed
			if res.Error.Code == errcode.Timeout {
				turn.State = StateTimedOut
			}
			break
		}
		if s.in.Child.NoFinalize || res.Finalize != nil {
			turn.State = StateCompleted
			if truncated {
				turn.Error = res.Error
			}
			if f := res.Finalize; f != nil && f.Status == "ERROR" {
				turn.State = StateFailed
				turn.Error = errcode.NewInfo(errcode.Failed, f.Error)
			}
			break
		}
		if s.attempt > s.maxRetries {
			turn.State = StateFailed
			turn.Error = errcode.NewInfo(errcode.FinalizeMissing,
				fmt.Sprintf("The sub-agent ended without a valid subagent_finalize after %d attempts; its last output is returned as partial output.", s.attempt))
			break
		}
		prompt, files = CorrectiveFeedback(res), nil
		countTurn(ctx, FinalizeRetriesMetric, map[string]string{"agent": agent})
	}
	countTurn(ctx, TasksFinishedMetric, map[string]string{"agent": agent, "status": string(turn.State)})
	log.Info("turn ended", "session", s.in.SessionID, "agent", agent, "turn", s.turn, "state", turn.State, "attempts", turn.Attempts)
	s.usage = s.usage.Add(turn.Usage)
	s.last = turn
	s.runs[len(s.runs)-1].State = string(turn.State)
	s.done = s.turn
	if s.in.Version >= 2 && len(s.pending) == 0 && s.idleTTL > 0 {
		// Nothing queued: the session now waits for a send. One upsert says
		// so; the turn's own state is in its result.
		s.setState(ctx, StateWaitingForInput)
	} else {
		s.setState(ctx, turn.State)
	}
	// A session that completes now needs no signal to its own delegation:
	// the delegation reads the turn from the child's completion instead.
	completesNow := s.in.Version >= 2 && s.idleTTL == 0 && len(s.pending) == 0 && req.NotifyWorkflowID == s.in.NotifyWorkflowID
	if req.NotifyWorkflowID != "" && !completesNow {
		s.notify(ctx, req, *turn)
	}
}

// notify tells the delegation that started this session how its turn ended.
// A delegation that is gone (cancelled, terminated) cannot be told; the
// session's own result still holds the turn.
func (s *session) notify(ctx workflow.Context, req SendRequest, turn TurnResult) {
	done := TaskDone{Index: req.NotifyIndex, SessionID: s.in.SessionID, Turn: turn}
	// The signal must go out even when the turn was cancelled with the
	// session's context: use a context that outlives that cancellation.
	sigCtx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.SignalExternalWorkflow(sigCtx, req.NotifyWorkflowID, "", TaskDoneSignal, done).Get(sigCtx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not tell the delegation that the task ended", "delegation", req.NotifyWorkflowID, "error", err)
	}
}

// runChild runs one RunPi activity that the `cancel` signal can stop.
func (s *session) runChild(ctx workflow.Context, prompt string, files []activities.FileSpec) (activities.RunPiResult, error) {
	child := s.in.Child
	child.SessionID, child.Agent, child.Cwd = s.in.SessionID, s.in.Agent, s.in.Cwd
	child.Prompt, child.Files, child.Turn = prompt, files, s.turn
	if child.Model == "" {
		child.Model = s.in.Model
	}
	child.TimeoutSeconds = s.timeoutSeconds()
	runCtx, cancel := workflow.WithCancel(ctx)
	s.cancelRun = cancel
	defer func() { s.cancelRun = nil }()
	// The UI shows the summary beside each RunPi: which turn, and whether
	// it is the corrective-feedback retry.
	summary := fmt.Sprintf("turn %d: %s", s.turn, activities.AgentName(s.in.Agent))
	if s.attempt > 1 {
		summary = fmt.Sprintf("turn %d: corrective feedback, run %d", s.turn, s.attempt)
	}
	runCtx = workflow.WithActivityOptions(runCtx, workflow.ActivityOptions{
		Summary:   summary,
		TaskQueue: hostQueue(ctx, s.in.Host),
		// The run ends itself at its ceiling (the timeout, its extension,
		// max_runtime); the margin lets pi stop and the result be written,
		// so Temporal's own timeout only ends a worker that hangs, and the
		// retry then finds the ceiling passed (see RunPi).
		StartToCloseTimeout: child.Ceiling() + 2*time.Minute,
		// A worker that dies stops heartbeating; after this long the turn
		// is retried on another worker, which continues the session file.
		// The activity heartbeats every 2 s, so 5 s still rides out one late
		// beat; a retry that comes too early waits on the session lock
		// until the old attempt has stopped its pi (see RunPi).
		HeartbeatTimeout: 5 * time.Second,
		// Wait for the child to be stopped, so a cancelled turn records the
		// partial output and usage the activity returns.
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			// The first retry follows a dead worker: go at once.
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			// Only worker trouble is retried (see RunPi); ten attempts ride
			// out a worker crash loop without retrying forever.
			MaximumAttempts: 10,
		},
	})
	var res activities.RunPiResult
	err := workflow.ExecuteActivity(runCtx, RunPiActivityName, child).Get(runCtx, &res)
	if err != nil {
		var cancelled *temporal.CanceledError
		if errors.As(err, &cancelled) && cancelled.HasDetails() {
			_ = cancelled.Details(&res)
		}
	}
	return res, err
}

// stateOfError maps an activity failure to a turn's state and error.
func stateOfError(err error) (State, *errcode.Info) {
	var cancelled *temporal.CanceledError
	if errors.As(err, &cancelled) {
		return StateCancelled, errcode.NewInfo(errcode.Cancelled, "Cancelled while running")
	}
	code := errcode.Failed
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		// An activity that refused its input says why with one of our
		// codes (e.g. PERMISSION_DENIED from the worker's profile check).
		if c, ok := errcode.Parse(app.Type()); ok {
			code = c
		}
	}
	msg := err.Error()
	if app != nil {
		msg = app.Message()
	}
	return StateFailed, errcode.NewInfo(code, msg)
}

// CorrectiveFeedback is the prompt that tells a child what was wrong with
// how it ended, so its next run on the same session can fix it.
func CorrectiveFeedback(res activities.RunPiResult) string {
	var rejected string
	for _, row := range res.ToolRows {
		if row.Name == activities.FinalizeToolName && row.Status == "error" {
			rejected = row.Error
		}
	}
	how := `Call subagent_finalize now as your only tool call: status "SUCCESS" with your complete answer in "result", ` +
		`or status "ERROR" with what went wrong in "error".`
	if rejected != "" {
		return "Your subagent_finalize call was rejected: " + rejected + "\n" + how
	}
	return "You ended without calling subagent_finalize, so your work has not been returned to the agent that delegated this task. " + how
}

func (s *session) setState(ctx workflow.Context, st State) {
	if s.state == st {
		return
	}
	s.state = st
	_ = workflow.UpsertTypedSearchAttributes(ctx, StatusKey.ValueSet(string(st)))
}

// upsertIdentity sets the search attributes that do not change, in case the
// starter did not set them.
func (s *session) upsertIdentity(ctx workflow.Context) {
	if s.in.Carry != nil {
		return
	}
	if s.in.Version >= 2 {
		upsertChanged(ctx, keyword{AgentKey, activities.AgentName(s.in.Agent)}, keyword{CwdKey, s.in.Cwd},
			keyword{StatusKey, string(s.state)}, keyword{ParentSessionKey, s.in.ParentSessionID})
		return
	}
	updates := []temporal.SearchAttributeUpdate{
		AgentKey.ValueSet(activities.AgentName(s.in.Agent)),
		CwdKey.ValueSet(s.in.Cwd),
		StatusKey.ValueSet(string(s.state)),
	}
	if s.in.ParentSessionID != "" {
		updates = append(updates, ParentSessionKey.ValueSet(s.in.ParentSessionID))
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, updates...)
}
