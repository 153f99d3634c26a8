package api

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/internal/errcode"
)

// A session's defaults.
const (
	// DefaultMaxFinalizeRetries: how many times a child that did not
	// finalize is sent corrective feedback (the sessions contract: "a small retry limit").
	DefaultMaxFinalizeRetries = 2
	// DefaultIdleTTL: how long a finished session waits for a `send` before
	// it completes; it can still be resumed by ID afterwards.
	DefaultIdleTTL = time.Hour
)

// SessionInput starts a session (one subagent task), or carries it across
// continue-as-new.
type SessionInput struct {
	// SessionID is also the workflow ID.
	SessionID       string     `json:"sessionId"`
	Agent           string     `json:"agent,omitempty"`
	Cwd             string     `json:"cwd"`
	Prompt          string     `json:"prompt"`
	Files           []FileSpec `json:"files,omitempty"`
	Name            string     `json:"name,omitempty"`
	ParentSessionID string     `json:"parentSessionId,omitempty"`
	// Host pins the child runs to the workers of that host (HostQueue):
	// the one that sees Cwd and keeps the session file. Empty: any worker.
	Host string `json:"host,omitempty"`
	// Child is the resolved profile: how every turn's pi runs. Its session,
	// agent, cwd, prompt, files and turn are filled in per turn.
	Child RunPiInput `json:"child"`
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
	// QuestionTimeoutSeconds is how long a child's question waits for its
	// answer (0: DefaultQuestionTimeout).
	QuestionTimeoutSeconds int `json:"questionTimeoutSeconds,omitempty"`
	// Carry is the state continue-as-new hands to the next run.
	Carry *SessionCarry `json:"carry,omitempty"`
	// Version is the code version the session runs (CurrentVersion).
	Version int `json:"version,omitempty"`
	// Delegation, when set, makes the session its own one-task delegation
	// (version 3): it resolves its task's profile in its first workflow
	// task, answers the delegation's status, wait, cancel and ack as
	// DelegationRole.ID, and with Deliver completes no earlier than its
	// parent acknowledges the first turn. One workflow instead of a
	// delegation and its session: half the server's work per task.
	Delegation *DelegationRole `json:"delegation,omitempty"`
}

// DelegationRole is the one-task delegation a session stands for.
type DelegationRole struct {
	// ID is the delegation's ID: OneTaskDelegationID of the session's.
	ID string `json:"id"`
	// Task is the task as the caller gave it: its profile, model and
	// timeout are resolved by the session.
	Task TaskSpec `json:"task"`
	// Depth is the caller's depth (DelegationInput.Depth); Tool the tool
	// family the call came through.
	Depth int    `json:"depth,omitempty"`
	Tool  string `json:"tool,omitempty"`
	// Knobs are the calling pi's (DelegationInput.Knobs).
	Knobs *CallerKnobs `json:"knobs,omitempty"`
	// Deliver and AckTTLSeconds are DelegationInput's.
	Deliver       bool `json:"deliver,omitempty"`
	AckTTLSeconds int  `json:"ackTtlSeconds,omitempty"`
	// ForkFrom is the parent's pi session file when the task's context is
	// fork (RunPiInput.ForkFrom).
	ForkFrom string `json:"forkFrom,omitempty"`
}

// DelegationView is what a session that is its own one-task delegation
// reports of it (SessionStatus.Delegation): enough for the delegation's
// status (SessionStatus.AsDelegation).
type DelegationView struct {
	ID        string `json:"id"`
	Profile   string `json:"profile,omitempty"`
	Deliver   bool   `json:"deliver,omitempty"`
	Delivered bool   `json:"delivered,omitempty"`
	// FirstTurn is the delegation's task: the session's first turn, once
	// it has ended.
	FirstTurn       *TurnResult `json:"firstTurn,omitempty"`
	ParentSessionID string      `json:"parentSessionId,omitempty"`
}

// SessionCarry is a session's durable state: the workflow keeps it as it
// runs, and continue-as-new hands it to the next run as it is.
type SessionCarry struct {
	// Ended counts the turns that have ended; Accepted the turns queued so
	// far (Pending holds those not started yet).
	Ended    int           `json:"turns"`
	Accepted int           `json:"accepted"`
	Usage    Usage         `json:"usage"`
	LastTurn *TurnResult   `json:"lastTurn,omitempty"`
	Pending  []SendRequest `json:"pending,omitempty"`
	// Runs mark where each turn begins in the session file.
	Runs []RunMark `json:"runs,omitempty"`
	// FirstTurn and Delivered are the one-task delegation's (Delegation):
	// its task's result, and whether the parent acknowledged it.
	FirstTurn *TurnResult `json:"firstTurn,omitempty"`
	Delivered bool        `json:"delivered,omitempty"`
}

// TurnResult is one turn of a session: its last child run's result, and
// the usage of all its child runs.
type TurnResult struct {
	Turn int `json:"turn"`
	// Name is the name of the task that ran this turn, when a delegation
	// resumed the session with one (the latest run's name, for the
	// delegate contract's get_subagent_session); empty: the session's.
	Name  string `json:"name,omitempty"`
	State State  `json:"state"`
	// ChildRuns is the number of child runs of this turn: 1 plus the
	// finalize retries it needed (docs/design.md, "Delegations and sessions in Temporal"; "attempts" on the wire).
	ChildRuns int           `json:"attempts"`
	Usage     Usage         `json:"usage"`
	Result    RunPiResult   `json:"result"`
	Error     *errcode.Info `json:"error,omitempty"`
}

// SessionStatus answers StatusQuery and WaitUpdate.
type SessionStatus struct {
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent,omitempty"`
	State     State  `json:"state"`
	// Turn is the running (or last) turn; Accepted the last turn queued.
	Turn     int `json:"turn"`
	Accepted int `json:"accepted"`
	// ChildRun numbers the turn's child runs from 1 (a finalize retry is
	// the next one; "attempt" on the wire).
	ChildRun int `json:"attempt"`
	// TurnStarted is when the running (or last) turn started; with
	// TimeoutSeconds it gives a turn's elapsed time against its timeout.
	TurnStarted    time.Time     `json:"turnStarted,omitempty"`
	TimeoutSeconds int           `json:"timeoutSeconds"`
	Usage          Usage         `json:"usage"`
	LastTurn       *TurnResult   `json:"lastTurn,omitempty"`
	Error          *errcode.Info `json:"error,omitempty"`
	// Model is the child's provider/id ("" for pi's default) and Thinking
	// its thinking level.
	Model    string `json:"model,omitempty"`
	Thinking string `json:"thinking,omitempty"`
	Cwd      string `json:"cwd"`
	Name     string `json:"name,omitempty"`
	Host     string `json:"host,omitempty"`
	// Runs mark where each turn begins in the pi session file, for
	// transcripts.
	Runs []RunMark `json:"runs,omitempty"`
	// Delegation is set on a session that is its own one-task delegation.
	Delegation *DelegationView `json:"delegation,omitempty"`
	// Questions are the latest turn's contact_supervisor messages, in
	// order: questions (one pending while the child waits for its answer)
	// and progress updates (api/question.go).
	Questions []Question `json:"questions,omitempty"`
}

// AsDelegation is the status of the one-task delegation st stands for
// (st.Delegation must be set): its task is the session's first turn.
func (st SessionStatus) AsDelegation() DelegationStatus {
	v := st.Delegation
	task := TaskResult{SessionID: st.SessionID, Name: st.Name, Profile: v.Profile, Model: st.Model, State: StateRunning}
	if st.State == StateQueued {
		task.State = StateQueued
	}
	done := v.FirstTurn != nil
	if done {
		task.State, task.Turn, task.Error = v.FirstTurn.State, v.FirstTurn, v.FirstTurn.Error
		if v.FirstTurn.ChildRuns == 0 {
			// Refused before any child ran (its profile could not be
			// resolved), as a delegation reports a task it never started.
			task.Turn = nil
		}
	}
	out := DelegationStatus{DelegationID: v.ID, Tasks: []TaskResult{task}, Done: done,
		Deliver: v.Deliver, Delivered: v.Delivered, ParentSessionID: v.ParentSessionID}
	out.Summarize(false)
	return out
}

// SessionResult is what a session returns when it completes.
type SessionResult struct {
	SessionID string      `json:"sessionId"`
	State     State       `json:"state"`
	Turns     int         `json:"turns"`
	Usage     Usage       `json:"usage"`
	LastTurn  *TurnResult `json:"lastTurn,omitempty"`
	// Delegation is SessionStatus.Delegation, for a status read from the
	// result of a closed session.
	Delegation *DelegationView `json:"delegation,omitempty"`
	// Next is the input of the session's next run (version 5): what a
	// send that reopens it starts that run with (ReopenInput). Its carry
	// leaves out the last and first turns, which the result holds already:
	// the close event would hold them twice.
	Next *SessionInput `json:"next,omitempty"`
}

// ReopenInput is the input a send starts the session's next run with, from
// the result its last run closed with; false when that run cannot be
// reopened so (it closed before version 5, or was not sticky).
func (r SessionResult) ReopenInput() (SessionInput, bool) {
	if r.Next == nil || r.Next.Carry == nil {
		return SessionInput{}, false
	}
	next := *r.Next
	carry := *next.Carry
	carry.LastTurn = r.LastTurn
	if r.Delegation != nil {
		carry.FirstTurn = r.Delegation.FirstTurn
	}
	next.Carry = &carry
	return next, true
}

// SendToSessionInput is the SendToSession activity's input: a send to a
// session from a workflow (a delegation that resumes it, a plan's step that
// continues it).
type SendToSessionInput struct {
	SessionID string      `json:"sessionId"`
	Send      SendRequest `json:"send"`
}

// SendToSessionResult says whether the send reached the session: its
// running workflow, or a new run reopened with what its last run carried.
// Not sent: its last run cannot be reopened (it closed before version 5,
// was terminated, or its idle TTL has passed), and the caller starts it
// again on its pi session file as before.
type SendToSessionResult struct {
	Sent     bool   `json:"sent"`
	Reopened bool   `json:"reopened,omitempty"`
	RunID    string `json:"runId,omitempty"`
}

// DetailsOf reads into out the details of the failure or cancellation err
// holds: how a version 5 session whose turn failed or was cancelled closed
// (its SessionResult). held says whether err carried details at all; the
// error is their decoding's.
func DetailsOf(err error, out any) (held bool, _ error) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		return true, app.Details(out)
	}
	var cancelled *temporal.CanceledError
	if errors.As(err, &cancelled) && cancelled.HasDetails() {
		return true, cancelled.Details(out)
	}
	return false, nil
}
