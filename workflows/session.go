// Package workflows holds the workflow code: delegations and the per-task
// session, their message names and payload types.
package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Defaults of a session's settings.
const (
	// maxTurnsPerRun bounds the history of one run of a long sticky
	// session: each turn adds about a dozen events, so 100 turns stay far
	// below the size where Temporal suggests continue-as-new.
	maxTurnsPerRun = 100
	// maxRunMarks bounds the turn marks a session carries across
	// continue-as-new (about 60 bytes each); a transcript, capped at 1 MiB,
	// never shows more runs than that anyway.
	maxRunMarks = 1000
	// reopenWait is how long a reopened run waits for the send it was
	// reopened for when that did not come with its start: signal-with-start
	// brings it in the first workflow task, so only a run started some
	// other way (by hand, from the UI) ever waits, and then ends as it
	// began.
	reopenWait = time.Minute
)

// Session runs a subagent task as a sticky session: turns of child pi runs
// on one pi session file, each retried with corrective feedback until the
// child finalizes, then waiting for `send` until the idle TTL passes.
func Session(ctx workflow.Context, in api.SessionInput) (api.SessionResult, error) {
	s, err := newSession(ctx, in)
	if err != nil {
		return api.SessionResult{}, err
	}
	return s.run(ctx)
}

// session is one Session workflow run. Its durable state is one struct,
// api.SessionCarry, which continue-as-new hands on as it is; the rest is
// this run's.
type session struct {
	in         api.SessionInput
	maxRetries int
	idleTTL    time.Duration

	api.SessionCarry

	state     api.State
	turn      int                 // the running or last turn
	childRun  int                 // the turn's child run: 1, then one more per finalize retry
	cancelRun workflow.CancelFunc // cancels the running child, when one runs
	turnsRun  int                 // turns run since this run of the workflow started
	started   time.Time           // when the running or last turn started

	// Of a session that is its own one-task delegation (in.Delegation),
	// before its first turn has run: why its task was refused (its
	// profile could not be resolved), and a cancel that came before its
	// child started.
	refused        *errcode.Info
	cancelledEarly bool

	// owed is the notice of a turn whose starter reads it from the run's
	// close (version 5), until a send keeps the run open (payOwed).
	owed *owedNotice

	// The children's questions to their parent and progress updates
	// (question.go).
	questionLog
}

// owedNotice is a turn's TaskDone not sent yet (session.owed).
type owedNotice struct {
	req  api.SendRequest
	turn api.TurnResult
}

func newSession(ctx workflow.Context, in api.SessionInput) (*session, error) {
	if in.Prompt == "" && in.Carry == nil {
		return nil, temporal.NewNonRetryableApplicationError("prompt must not be empty", string(errcode.InvalidInput), nil)
	}
	if err := api.ValidateSession(in); refuses(ctx, err) {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.InvalidInput), err)
	}
	s := &session{in: in, maxRetries: api.DefaultMaxFinalizeRetries, idleTTL: api.DefaultIdleTTL, state: api.StateQueued}
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
		if v, ok := keywordOf(ctx, api.StatusKey.GetName()); ok && v != "" {
			s.state = api.State(v)
		}
	}
	if c := in.Carry; c != nil {
		s.SessionCarry, s.turn = *c, c.Ended
	} else {
		s.accept(api.SendRequest{Prompt: in.Prompt, Files: in.Files, NotifyWorkflowID: in.NotifyWorkflowID, NotifyIndex: in.NotifyIndex})
	}

	if err := s.registerHandlers(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// registerHandlers sets the session's query, update and signal handlers
// (api/messages.go names them); each is a method below.
func (s *session) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, api.StatusQuery, s.onStatus); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.SendUpdate, s.onSend,
		workflow.UpdateHandlerOptions{Validator: validateSend}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, api.WaitUpdate, s.onWait); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, api.CancelUpdate, s.onCancel); err != nil {
		return err
	}
	if err := s.registerReply(ctx); err != nil {
		return err
	}
	if s.in.Delegation != nil {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, api.AckUpdate, s.onAck,
			workflow.UpdateHandlerOptions{Validator: s.validateAck}); err != nil {
			return err
		}
	}
	workflow.Go(ctx, s.receiveSignals)
	return nil
}

// onAck answers AckUpdate on a session that is its own one-task
// delegation: the parent has the first turn's result.
func (s *session) onAck(ctx workflow.Context, _ api.AckRequest) (api.SessionStatus, error) {
	s.acknowledge(ctx)
	return s.status(), nil
}

// validateAck refuses an ack before the first turn has ended.
func (s *session) validateAck(api.AckRequest) error {
	if s.FirstTurn == nil {
		return temporal.NewApplicationError("the delegation has not finished: there is nothing to acknowledge yet", string(errcode.SessionRunning))
	}
	return nil
}

// acknowledge records the parent's ack of the first turn, once; the
// delegation it stands for is closed from then on.
func (s *session) acknowledge(ctx workflow.Context) {
	if s.FirstTurn == nil || s.Delivered {
		return
	}
	s.Delivered = true
	_ = workflow.UpsertTypedSearchAttributes(ctx, api.DelegationKey.ValueSet(api.DelegationClosed))
}

// onStatus answers StatusQuery.
func (s *session) onStatus() (api.SessionStatus, error) { return s.status(), nil }

// onSend answers SendUpdate: the turn the prompt will run as.
func (s *session) onSend(_ workflow.Context, req api.SendRequest) (api.SendAccepted, error) {
	return api.SendAccepted{Turn: s.accept(req)}, nil
}

// onWait answers WaitUpdate once the turn asked for (default: the last one
// accepted) has ended, or with Questions while a child's question waits.
func (s *session) onWait(ctx workflow.Context, req api.WaitRequest) (api.SessionStatus, error) {
	target := req.Turn
	if target <= 0 {
		target = s.Accepted
	}
	if err := workflow.Await(ctx, func() bool { return s.Ended >= target || req.Questions && s.waitsForAnswer() }); err != nil {
		return api.SessionStatus{}, err
	}
	return s.status(), nil
}

// onCancel answers CancelUpdate: whether a running child was stopped.
func (s *session) onCancel(_ workflow.Context, _ api.CancelRequest) (api.CancelResult, error) {
	return api.CancelResult{CancelApplied: s.cancel(), PriorStatus: s.state}, nil
}

// receiveSignals takes SendSignal, CancelSignal and ReplySignal, the
// answerless forms of SendUpdate, CancelUpdate and ReplyUpdate (and
// AckSignal, of a one-task delegation), for as long as the run lasts.
func (s *session) receiveSignals(ctx workflow.Context) {
	sends := workflow.GetSignalChannel(ctx, api.SendSignal)
	cancels := workflow.GetSignalChannel(ctx, api.CancelSignal)
	for {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(sends, func(c workflow.ReceiveChannel, _ bool) {
			var req api.SendRequest
			c.Receive(ctx, &req)
			if validateSend(req) == nil {
				s.accept(req)
			}
		})
		sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
			var req api.CancelRequest
			c.Receive(ctx, &req)
			_ = s.cancel()
		})
		s.receiveReplies(ctx, sel)
		if s.in.Delegation != nil {
			sel.AddReceive(workflow.GetSignalChannel(ctx, api.AckSignal), func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				// An ack before the first turn has ended is ignored, as the
				// update's validator refuses it.
				s.acknowledge(ctx)
			})
		}
		sel.Select(ctx)
		if ctx.Err() != nil {
			return
		}
	}
}

func validateSend(req api.SendRequest) error {
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
func (s *session) accept(req api.SendRequest) int {
	s.Accepted++
	s.Pending = append(s.Pending, req)
	return s.Accepted
}

// cancel stops the running child and says whether there was one; with none
// running (the session waits for input, or is done) it does nothing.
func (s *session) cancel() bool {
	if s.cancelRun == nil {
		if s.in.Delegation != nil && s.Ended == 0 && !s.cancelledEarly {
			// A one-task delegation cancelled before its child started:
			// its task ends cancelled instead of starting.
			s.cancelledEarly = true
			return true
		}
		return false
	}
	s.cancelRun()
	return true
}

func (s *session) status() api.SessionStatus {
	st := api.SessionStatus{
		SessionID: s.in.SessionID, Agent: s.in.Agent, State: s.reportedState(),
		Turn: s.turn, Accepted: s.Accepted, ChildRun: s.childRun, Usage: s.Usage, LastTurn: s.LastTurn,
		TurnStarted: s.started, TimeoutSeconds: s.timeoutSeconds(),
		Model: s.in.Child.Model, Thinking: s.in.Child.Thinking, Cwd: s.in.Cwd, Name: s.in.Name, Host: s.in.Host,
		Runs:      append([]api.RunMark(nil), s.Runs...),
		Questions: append([]api.Question(nil), s.questions...),
	}
	if s.LastTurn != nil {
		st.Error = s.LastTurn.Error
		if st.Model == "" {
			// pi's default: the model its last child run reported.
			st.Model = s.LastTurn.Result.Model
		}
	}
	st.Delegation = s.delegationView()
	return st
}

// reportedState is the state status and the result report: the recorded
// one, except that a session of a version before 4 waiting for input
// reports how its last turn ended, as later versions record it.
func (s *session) reportedState() api.State {
	if s.state == api.StateWaitingForInput && s.LastTurn != nil {
		return s.LastTurn.State
	}
	return s.state
}

// delegationView is what status and result report of the one-task
// delegation the session stands for; nil for any other session.
func (s *session) delegationView() *api.DelegationView {
	r := s.in.Delegation
	if r == nil {
		return nil
	}
	return &api.DelegationView{ID: r.ID, Profile: r.Task.ProfileOr(""), Deliver: r.Deliver,
		Delivered: s.Delivered, FirstTurn: s.FirstTurn, ParentSessionID: s.in.ParentSessionID}
}

// timeoutSeconds is a turn's timeout: the resolved child's (the task's,
// else its profile's: profiles.Resolve), else the default
// (RunPiInput.Timeout, the one place it is applied).
func (s *session) timeoutSeconds() int {
	return int(s.in.Child.Timeout() / time.Second)
}

func (s *session) result() api.SessionResult {
	return api.SessionResult{SessionID: s.in.SessionID, State: s.reportedState(), Turns: s.Ended, Usage: s.Usage, LastTurn: s.LastTurn,
		Delegation: s.delegationView()}
}

func (s *session) run(ctx workflow.Context) (api.SessionResult, error) {
	s.upsertIdentity(ctx)
	if s.in.Delegation != nil && s.in.Carry == nil {
		if err := s.resolve(ctx); err != nil {
			return s.result(), err
		}
	}
	if s.in.Version >= 5 && s.in.Carry != nil && len(s.Pending) == 0 {
		// A reopened run: the send that reopened it came with its start
		// (SendToSession's signal-with-start), in this first task.
		s.drainSends(ctx)
		if len(s.Pending) == 0 {
			if _, err := workflow.AwaitWithTimeout(ctx, reopenWait, func() bool { return len(s.Pending) > 0 }); err != nil {
				s.recordCancelled(ctx)
				return s.result(), err
			}
		}
	}
	for {
		if s.in.Version >= 5 {
			if len(s.Pending) == 0 {
				res, closed, err := s.close(ctx)
				if closed {
					return res, err
				}
				continue
			}
			if s.turnsRun >= maxTurnsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
				// Sends queued faster than the turns end: the queue goes on
				// in the next run.
				return s.continueAsNew(ctx)
			}
		} else if len(s.Pending) == 0 {
			if s.in.Version >= 2 && s.idleTTL == 0 && s.LastTurn != nil {
				// Not sticky: done as soon as its turns are.
				return s.finish(ctx)
			}
			if s.in.Version >= 4 && s.refused != nil {
				// Its task was refused before any child ran (its profile
				// could not be used): there is no session to send to.
				return s.finish(ctx)
			}
			if s.LastTurn != nil && s.in.Version < 4 {
				s.setState(ctx, api.StateWaitingForInput)
			}
			if s.turnsRun >= maxTurnsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
				return s.continueAsNew(ctx)
			}
			got, err := workflow.AwaitWithTimeout(ctx, s.idleTTL, func() bool { return len(s.Pending) > 0 })
			if err != nil {
				s.recordCancelled(ctx)
				return s.result(), err
			}
			if !got {
				return s.finish(ctx)
			}
		}
		req := s.Pending[0]
		s.Pending = s.Pending[1:]
		s.runTurn(ctx, req)
		if ctx.Err() != nil {
			// The workflow itself was cancelled (e.g. from the UI).
			s.recordCancelled(ctx)
			return s.result(), temporal.NewCanceledError(s.result())
		}
	}
}

// finish completes the session once it has been idle for its TTL, with the
// state of its last turn.
func (s *session) finish(ctx workflow.Context) (api.SessionResult, error) {
	if r := s.in.Delegation; r != nil && r.Deliver && !s.Delivered && s.FirstTurn != nil {
		// The delegation it stands for waits for its parent's ack, as a
		// delegation of several tasks does.
		if _, err := workflow.AwaitWithTimeout(ctx, api.AckTTL(r.AckTTLSeconds), func() bool { return s.Delivered }); err != nil {
			return s.result(), err
		}
	}
	if s.LastTurn != nil {
		s.setState(ctx, s.LastTurn.State)
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return s.result(), err
	}
	return s.result(), nil
}

// close ends the run (version 5) once its turns have: in Temporal's own
// terms, as its last turn ended (closeWith). Not closed when a send came
// in the meantime: the caller runs it. A one-task delegation that delivers
// waits for its parent's ack first, as finish does: its result is not yet
// where it was asked for.
func (s *session) close(ctx workflow.Context) (api.SessionResult, bool, error) {
	if s.LastTurn == nil {
		// A run with no turn to run: reopened without its send (started by
		// hand), or a carry with nothing queued. It ends as it began.
		return s.closeWith(), true, nil
	}
	if r := s.in.Delegation; r != nil && r.Deliver && !s.Delivered && s.FirstTurn != nil {
		if _, err := workflow.AwaitWithTimeout(ctx, api.AckTTL(r.AckTTLSeconds), func() bool { return s.Delivered || len(s.Pending) > 0 }); err != nil {
			s.recordCancelled(ctx)
			return s.result(), true, err
		}
		if len(s.Pending) > 0 {
			s.payOwed(ctx)
			return api.SessionResult{}, false, nil
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		s.recordCancelled(ctx)
		return s.result(), true, err
	}
	// A send whose signal came with the last workflow task: the server
	// refuses to close a run that has not seen it, and the task that
	// follows reads it here.
	s.drainSends(ctx)
	if len(s.Pending) > 0 {
		s.payOwed(ctx)
		return api.SessionResult{}, false, nil
	}
	return s.closeWith(), true, s.closeError()
}

// payOwed tells the workflow that started the run how its turn ended, when
// the run was to tell it by closing (completesNow) but a send came first:
// the close will answer the later turn.
func (s *session) payOwed(ctx workflow.Context) {
	if o := s.owed; o != nil {
		s.owed = nil
		s.notify(ctx, o.req, o.turn)
	}
}

// closeWith is the result a version 5 run closes with: its status, and the
// input its next run starts with when a send reopens it (sticky sessions
// only: one that is not was asked to be done with its turns).
func (s *session) closeWith() api.SessionResult {
	res := s.result()
	if s.idleTTL > 0 && s.refused == nil {
		next := s.in
		next.Prompt, next.Files, next.NotifyWorkflowID, next.NotifyIndex = "", nil, "", 0
		next.Version = api.CurrentVersion
		carry := s.SessionCarry
		// The result holds them (SessionResult.ReopenInput).
		carry.LastTurn, carry.FirstTurn, carry.Pending = nil, nil, nil
		next.Carry = &carry
		res.Next = &next
	}
	return res
}

// closeError is how the run's last turn ended, as Temporal records a
// workflow's end: nil for a completed turn (Completed), a CanceledError for
// a cancelled one (Canceled), else a failure whose type is the turn's error
// code and whose message is its message (Failed), the result in its
// details either way.
func (s *session) closeError() error {
	st := s.reportedState()
	switch st {
	case api.StateCompleted:
		return nil
	case api.StateCancelled:
		return temporal.NewCanceledError(s.closeWith())
	}
	code, msg := errcode.Failed, "the task failed"
	if st == api.StateTimedOut {
		code, msg = errcode.Timeout, "the task timed out"
	}
	if e := s.lastError(); e != nil {
		code, msg = e.Code, e.Message
	}
	return temporal.NewNonRetryableApplicationError(msg, string(code), nil, s.closeWith())
}

// lastError is the last turn's error, or the refusal of a one-task
// delegation's task.
func (s *session) lastError() *errcode.Info {
	if s.LastTurn != nil && s.LastTurn.Error != nil {
		return s.LastTurn.Error
	}
	return s.refused
}

// drainSends takes the sends already delivered to the run without
// blocking: before its first turn (a reopened run's) and before it closes.
func (s *session) drainSends(ctx workflow.Context) {
	sends := workflow.GetSignalChannel(ctx, api.SendSignal)
	for {
		var req api.SendRequest
		if !sends.ReceiveAsync(&req) {
			return
		}
		if validateSend(req) == nil {
			s.accept(req)
		}
	}
}

func (s *session) continueAsNew(ctx workflow.Context) (api.SessionResult, error) {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return s.result(), err
	}
	next := s.in
	next.Prompt, next.Files = "", nil
	carry := s.SessionCarry
	next.Carry = &carry
	return api.SessionResult{}, workflow.NewContinueAsNewError(ctx, api.SessionWorkflowName, next)
}

// runTurn runs one turn: the child, then corrective feedback until it
// finalizes or the retries run out.
func (s *session) runTurn(ctx workflow.Context, req api.SendRequest) {
	s.turn++
	s.turnsRun++
	s.childRun = 0
	s.started = workflow.Now(ctx)
	s.setState(ctx, api.StateRunning)
	agent := api.AgentName(s.in.Agent)
	countTurn(ctx, TasksStartedMetric, map[string]string{"agent": agent})
	log := workflow.GetLogger(ctx)
	log.Info("turn started", "session", s.in.SessionID, "agent", agent, "turn", s.turn)
	turn := &api.TurnResult{Turn: s.turn, Name: req.Name}
	prompt, files := req.Prompt, req.Files
	s.Runs = append(s.Runs, api.RunMark{Turn: s.turn, State: string(api.StateRunning)})
	if len(s.Runs) > maxRunMarks {
		s.Runs = s.Runs[len(s.Runs)-maxRunMarks:]
	}
	mark := &s.Runs[len(s.Runs)-1]
	// asked counts the turn's child runs that ended at a question: they
	// are no finalize retries.
	asked := 0
	for {
		if s.in.Delegation != nil && s.Ended == 0 && (s.refused != nil || s.cancelledEarly) {
			// The one-task delegation's task ends without a child, as a
			// delegation's task does that never started.
			turn.State, turn.Error = api.StateFailed, s.refused
			if s.cancelledEarly {
				turn.State, turn.Error = api.StateCancelled, cancelledError()
			}
			break
		}
		s.childRun++
		turn.ChildRuns = s.childRun
		res, err := s.runChild(ctx, prompt, files)
		if s.childRun == 1 {
			mark.FirstMessage = res.MessagesBefore
		}
		turn.Result = res
		turn.Usage = turn.Usage.Add(res.Usage)
		s.keepWorktreeBase(res.Change)
		if err != nil {
			turn.State, turn.Error = stateOfError(err)
			break
		}
		// A long answer cut to the output cap is still an answer (the SingleResult contract):
		// the turn completes and carries the truncation notice.
		truncated := res.Error != nil && res.Error.Code == errcode.OutputTruncated && res.OutputTruncated
		if res.Error != nil && !truncated {
			turn.Error = res.Error
			turn.State = api.StateFailed
			if res.Error.Code == errcode.Timeout {
				turn.State = api.StateTimedOut
			}
			break
		}
		if waiting := s.recordQuestions(ctx, res); len(waiting) > 0 {
			// The child waits for its answer: nothing runs until it comes.
			next, ok := s.awaitAnswers(ctx, waiting)
			if !ok {
				turn.State, turn.Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "Cancelled while the child waited for an answer")
				break
			}
			prompt, files = next, nil
			if asked < api.MaxQuestionsPerTurn {
				asked++
				continue
			}
			// Past the turn's questions (each now answered with
			// QUESTION_TIMEOUT at once), a run that asks again counts as a
			// finalize retry: a child that keeps asking stops.
			if s.childRun-asked > s.maxRetries {
				turn.State = api.StateFailed
				turn.Error = errcode.NewInfo(errcode.QuestionTimeout,
					fmt.Sprintf("The sub-agent kept asking past the %d questions a turn may ask, without finalizing after %d attempts.", api.MaxQuestionsPerTurn, s.childRun))
				break
			}
			continue
		}
		if s.in.Child.NoFinalize || s.in.Child.FinalizeOptional || res.Finalize != nil {
			turn.State = api.StateCompleted
			if truncated {
				turn.Error = res.Error
			}
			if f := res.Finalize; f != nil && f.Status == "ERROR" {
				turn.State = api.StateFailed
				turn.Error = errcode.NewInfo(errcode.Failed, f.Error)
			}
			break
		}
		if s.childRun-asked > s.maxRetries {
			turn.State = api.StateFailed
			turn.Error = errcode.NewInfo(errcode.FinalizeMissing,
				fmt.Sprintf("The sub-agent ended without a valid subagent_finalize after %d attempts; its last output is returned as partial output.", s.childRun))
			break
		}
		prompt, files = CorrectiveFeedback(res), nil
		countTurn(ctx, FinalizeRetriesMetric, map[string]string{"agent": agent})
	}
	countTurn(ctx, TasksFinishedMetric, map[string]string{"agent": agent, "status": string(turn.State)})
	log.Info("turn ended", "session", s.in.SessionID, "agent", agent, "turn", s.turn, "state", turn.State, "attempts", turn.ChildRuns)
	if releaseStep != nil {
		releaseStep(ctx, turn)
	}
	s.Usage = s.Usage.Add(turn.Usage)
	s.LastTurn = turn
	s.Runs[len(s.Runs)-1].State = string(turn.State)
	s.Ended = s.turn
	var closed []temporal.SearchAttributeUpdate
	if r := s.in.Delegation; r != nil && s.FirstTurn == nil {
		first := *turn
		s.FirstTurn = &first
		if !r.Deliver {
			// Its delegation has ended with the turn: said in the same
			// upsert as the turn's state.
			closed = append(closed, api.DelegationKey.ValueSet(api.DelegationClosed))
		}
	}
	if s.in.Version >= 5 && len(s.Pending) == 0 && s.idleTTL > 0 && s.refused == nil && ctx.Err() == nil {
		// The run closes with this turn: it takes a send that reopens it
		// until then (`list --open`). Not when Temporal cancelled the
		// workflow itself: an operator ended the session.
		closed = append(closed, api.SendUntilKey.ValueSet(workflow.Now(ctx).Add(s.idleTTL)))
	}
	if s.in.Version >= 2 && s.in.Version < 4 && len(s.Pending) == 0 && s.idleTTL > 0 {
		// Nothing queued: the session now waits for a send. One upsert says
		// so; the turn's own state is in its result.
		s.setState(ctx, api.StateWaitingForInput, closed...)
	} else {
		s.setState(ctx, turn.State, closed...)
	}
	// A session that completes now needs no signal to its own delegation:
	// the delegation reads the turn from the child's completion instead.
	completesNow := s.in.Version >= 2 && (s.idleTTL == 0 || s.in.Version >= 5) && len(s.Pending) == 0 && req.NotifyWorkflowID == s.in.NotifyWorkflowID
	if req.NotifyWorkflowID != "" && !completesNow {
		s.notify(ctx, req, *turn)
	} else if req.NotifyWorkflowID != "" && s.in.Version >= 5 {
		s.owed = &owedNotice{req: req, turn: *turn}
	}
}

// notify tells the delegation that started this session how its turn ended.
// A delegation that is gone (cancelled, terminated) cannot be told; the
// session's own result still holds the turn.
func (s *session) notify(ctx workflow.Context, req api.SendRequest, turn api.TurnResult) {
	done := api.TaskDone{Index: req.NotifyIndex, SessionID: s.in.SessionID, Turn: turn}
	// The signal must go out even when the turn was cancelled with the
	// session's context: use a context that outlives that cancellation.
	sigCtx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.SignalExternalWorkflow(sigCtx, req.NotifyWorkflowID, "", api.TaskDoneSignal, done).Get(sigCtx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not tell the delegation that the task ended", "delegation", req.NotifyWorkflowID, "error", err)
	}
}

// keepWorktreeBase remembers the commit a worktree session's first run
// started from (api.WorktreeSpec.Base): its later runs start there too,
// also when the change so far was empty and its branch is gone. Only the
// activity's input changes: no command, so a replay is the same.
func (s *session) keepWorktreeBase(c *api.Change) {
	if w := s.in.Child.Worktree; w != nil && w.Base == "" && c != nil && c.Base != "" {
		kept := *w
		kept.Base = c.Base
		s.in.Child.Worktree = &kept
	}
}

// runChild runs one RunPi activity that the `cancel` signal can stop.
func (s *session) runChild(ctx workflow.Context, prompt string, files []api.FileSpec) (api.RunPiResult, error) {
	child := s.in.Child
	child.SessionID, child.Agent, child.Cwd = s.in.SessionID, s.in.Agent, s.in.Cwd
	child.Prompt, child.Files, child.Turn = prompt, files, s.turn
	child.TimeoutSeconds = s.timeoutSeconds()
	if s.turn > 1 {
		// The steps after the plan step this session started for began
		// with its first turn; a later turn (a continuing step's, a send)
		// starts nothing early.
		child.Then = nil
	}
	runCtx, cancel := workflow.WithCancel(ctx)
	s.cancelRun = cancel
	defer func() { s.cancelRun = nil }()
	// The UI shows the summary beside each RunPi: which turn, and whether
	// it is the corrective-feedback retry.
	summary := fmt.Sprintf("turn %d: %s", s.turn, api.AgentName(s.in.Agent))
	if s.childRun > 1 {
		summary = fmt.Sprintf("turn %d: corrective feedback, run %d", s.turn, s.childRun)
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
	var res api.RunPiResult
	err := workflow.ExecuteActivity(runCtx, api.RunPiActivityName, child).Get(runCtx, &res)
	if err != nil {
		var cancelled *temporal.CanceledError
		if errors.As(err, &cancelled) {
			if cancelled.HasDetails() {
				_ = cancelled.Details(&res)
			}
			if profiles.Nested(child.Tools) {
				s.cancelNested(ctx)
			}
		}
	}
	return res, err
}

// CancelNestedActivityName is the activity that cancels what a session's
// child delegated (activities.Sessions.CancelNested).
const CancelNestedActivityName = "CancelNested"

// cancelNested cancels the open delegations the session's child started
// (their parent session is this session's ID), once its run was
// cancelled: a cancel of the task ends the whole tree below it. Only a
// child that could delegate (profiles.Nested) has any, so no other
// session's history changes. Best effort: what cannot be reached is
// logged, and the task's own cancel stands.
func (s *session) cancelNested(ctx workflow.Context) {
	// The session's own context may be the one cancelled (from the UI):
	// the cancel of its tree must go out all the same.
	cctx, _ := workflow.NewDisconnectedContext(ctx)
	cctx = workflow.WithActivityOptions(cctx, workflow.ActivityOptions{
		Summary: "cancel what the child delegated",
		// A list and a signal per open delegation: seconds at most; the
		// retries ride out a worker restart.
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var asked int
	if err := workflow.ExecuteActivity(cctx, CancelNestedActivityName, s.in.SessionID).Get(cctx, &asked); err != nil {
		workflow.GetLogger(ctx).Warn("could not cancel what the child delegated", "session", s.in.SessionID, "error", err)
	}
}

// stateOfError maps an activity failure to a turn's state and error.
func stateOfError(err error) (api.State, *errcode.Info) {
	var cancelled *temporal.CanceledError
	if errors.As(err, &cancelled) {
		return api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "Cancelled while running")
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
	return api.StateFailed, errcode.NewInfo(code, msg)
}

// CorrectiveFeedback is the prompt that tells a child what was wrong with
// how it ended, so its next run on the same session can fix it.
func CorrectiveFeedback(res api.RunPiResult) string {
	var rejected string
	for _, row := range res.ToolRows {
		if row.Name == api.FinalizeToolName && row.Status == "error" {
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

// setState records where the session stands, in its status attribute and
// with it the other attribute changes given, in one upsert.
func (s *session) setState(ctx workflow.Context, st api.State, also ...temporal.SearchAttributeUpdate) {
	if s.state == st && len(also) == 0 {
		return
	}
	if s.state != st {
		also = append(also, api.StatusKey.ValueSet(string(st)))
	}
	s.state = st
	_ = workflow.UpsertTypedSearchAttributes(ctx, also...)
}

// recordCancelled records, from version 4 on, that the workflow itself was
// cancelled (`temporal workflow cancel`, the UI): its status says cancelled
// before it closes, whatever its last turn's was.
func (s *session) recordCancelled(ctx workflow.Context) {
	if s.in.Version < 4 || !temporal.IsCanceledError(ctx.Err()) {
		return
	}
	s.setState(ctx, api.StateCancelled)
}

// resolve reads the profile of the one-task delegation the session stands
// for into its child's settings, as a delegation does for its tasks; a
// profile that cannot be used refuses the task (the first turn fails
// without a child).
func (s *session) resolve(ctx workflow.Context) error {
	r := s.in.Delegation
	req := profiles.ResolveRequest{Depth: r.Depth + 1, Knobs: r.Knobs, Tasks: []profiles.ResolveTask{{
		Profile: r.Task.ProfileOr(""), Cwd: s.in.Cwd, Model: r.Task.Model, TimeoutSeconds: r.Task.TimeoutSeconds,
		Tool: r.Tool, Early: true,
	}}}
	out, err := resolveTasks(ctx, s.in.Host, s.in.Version, req)
	if err != nil {
		return err
	}
	if out[0].Error != nil {
		s.refused = out[0].Error
		return nil
	}
	s.in.Child = out[0].Child
	profiles.Isolate(&s.in.Child, r.Task.Worktree, r.Task.BaseRef)
	s.in.Child.Depth = r.Depth + 1
	s.in.Child.ForkFrom = r.ForkFrom
	if m := out[0].MaxFinalizeRetries; m != nil {
		s.in.MaxFinalizeRetries, s.maxRetries = m, max(*m, 0)
	}
	// The task's own (set by its start) wins over its profile's.
	if s.in.QuestionTimeoutSeconds == 0 {
		s.in.QuestionTimeoutSeconds = out[0].QuestionTimeoutSeconds
	}
	return nil
}

// upsertIdentity sets the search attributes that do not change, in case the
// starter did not set them.
func (s *session) upsertIdentity(ctx workflow.Context) {
	if s.in.Carry != nil {
		return
	}
	if s.in.Version >= 2 {
		upsertChanged(ctx, keyword{api.AgentKey, api.AgentName(s.in.Agent)}, keyword{api.CwdKey, s.in.Cwd},
			keyword{api.StatusKey, string(s.state)}, keyword{api.ParentSessionKey, s.in.ParentSessionID})
		return
	}
	updates := []temporal.SearchAttributeUpdate{
		api.AgentKey.ValueSet(api.AgentName(s.in.Agent)),
		api.CwdKey.ValueSet(s.in.Cwd),
		api.StatusKey.ValueSet(string(s.state)),
	}
	if s.in.ParentSessionID != "" {
		updates = append(updates, api.ParentSessionKey.ValueSet(s.in.ParentSessionID))
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, updates...)
}
