package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// A child asks its parent with contact_supervisor: its run ends at the
// question (RunPiResult.Questions), and the session waits for the answer
// with nothing running, only this workflow's timer. A reply (ReplyUpdate,
// ReplySignal) or the timeout ends the wait, and the answers go to the
// child as the prompt of its next run on the same pi session file, in the
// same turn. A worker that dies while a question waits loses nothing: there
// is no run to lose, and the model is asked nothing again.

// questionMemo is the memo field that holds a waiting question, so that
// the Temporal UI and `list` show it without a query.
const questionMemo = "question"

// questionMemoChars bounds the question in the memo: a line of the UI.
const questionMemoChars = 200

// questionLog is what a session keeps of its children's contact_supervisor
// messages.
type questionLog struct {
	// questions are the latest turn's messages, at most MaxQuestionsKept.
	questions []api.Question
	// askedTurn and asked count the questions of the running turn
	// (MaxQuestionsPerTurn).
	askedTurn, asked int
}

// registerReply sets the reply update's handler.
func (s *session) registerReply(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, api.ReplyUpdate, s.onReply,
		workflow.UpdateHandlerOptions{Validator: s.validateReply})
}

// receiveReplies adds ReplySignal, the answerless form of ReplyUpdate, to
// the session's signal selector.
func (s *session) receiveReplies(ctx workflow.Context, sel workflow.Selector) {
	sel.AddReceive(workflow.GetSignalChannel(ctx, api.ReplySignal), func(c workflow.ReceiveChannel, _ bool) {
		var req api.ReplyRequest
		c.Receive(ctx, &req)
		// A reply that fits no waiting question is ignored, as the
		// update's validator refuses it.
		if s.validateReply(req) == nil {
			s.answer(ctx, req)
		}
	})
}

// onReply answers ReplyUpdate with the question answered.
func (s *session) onReply(ctx workflow.Context, req api.ReplyRequest) (api.Question, error) {
	return s.answer(ctx, req), nil
}

// validateReply refuses a reply that fits no question waiting for one. A
// reply that repeats the answer a question already has is accepted, and
// changes nothing: a parent that restarted before it saw its reply land
// may send it again.
func (s *session) validateReply(req api.ReplyRequest) error {
	if err := req.Validate(); err != nil {
		return temporal.NewApplicationError(err.Error(), string(errcode.InvalidInput))
	}
	q := s.replyTarget(req)
	switch {
	case q == nil && req.QuestionID != "":
		return temporal.NewApplicationError(fmt.Sprintf("session %s has no question %s", s.in.SessionID, req.QuestionID), string(errcode.InvalidInput))
	case q == nil:
		return temporal.NewApplicationError(fmt.Sprintf("no question of session %s waits for an answer", s.in.SessionID), string(errcode.InvalidInput))
	case q.State == api.QuestionAnswered && q.Answer == req.Message:
		return nil
	case q.State != api.QuestionPending:
		return temporal.NewApplicationError(fmt.Sprintf("question %s of session %s is %s already, and takes no answer", q.ID, s.in.SessionID, q.State), string(errcode.InvalidInput))
	}
	return nil
}

// replyTarget is the question req answers: the one it names (the pending
// one of that ID, else its latest, when a model used an ID twice), else
// the first one pending.
func (s *session) replyTarget(req api.ReplyRequest) *api.Question {
	var named *api.Question
	for i := range s.questions {
		q := &s.questions[i]
		switch {
		case req.QuestionID == "" && q.State == api.QuestionPending:
			return q
		case req.QuestionID != "" && q.ID == req.QuestionID && q.State == api.QuestionPending:
			return q
		case req.QuestionID != "" && q.ID == req.QuestionID:
			named = q
		}
	}
	return named
}

// answer records a validated reply and returns its question.
func (s *session) answer(ctx workflow.Context, req api.ReplyRequest) api.Question {
	q := s.replyTarget(req)
	if q.State == api.QuestionPending {
		q.State, q.Answer, q.By, q.Answered = api.QuestionAnswered, req.Message, req.By, workflow.Now(ctx)
		workflow.GetLogger(ctx).Info("question answered", "session", s.in.SessionID, "question", q.ID, "by", req.By)
	}
	return *q
}

// questionTimeout is how long a question waits for its answer.
func (s *session) questionTimeout() time.Duration {
	if s.in.QuestionTimeoutSeconds > 0 {
		return time.Duration(s.in.QuestionTimeoutSeconds) * time.Second
	}
	return api.DefaultQuestionTimeout
}

// recordQuestions adds a child run's contact_supervisor messages to the
// log and returns the IDs of the questions the child now waits for: none
// when the run also finalized (its task has its result). A question past
// the turn's MaxQuestionsPerTurn times out at once.
func (s *session) recordQuestions(ctx workflow.Context, res api.RunPiResult) []string {
	if len(res.Questions) == 0 {
		return nil
	}
	if len(s.questions) > 0 && s.questions[0].Turn != s.turn {
		s.questions = nil
	}
	if s.askedTurn != s.turn {
		s.askedTurn, s.asked = s.turn, 0
	}
	now := workflow.Now(ctx)
	var waiting []string
	for _, q := range res.Questions {
		// A retried run reports the question its session file ends at
		// again: the same call, already recorded. A model that numbers its
		// calls per request (call_1 in every run) asks a new question
		// under an old ID: it differs in its text.
		if slices.ContainsFunc(s.questions, func(o api.Question) bool { return o.ID == q.ID && o.Message == q.Message && o.Reason == q.Reason }) {
			continue
		}
		q.Turn, q.Asked = s.turn, now
		switch {
		case !q.Waits():
			q.State = api.QuestionSent
		case res.Finalize != nil:
			q.State = api.QuestionDropped
		default:
			s.asked++
			q.State, q.Deadline = api.QuestionPending, now.Add(s.questionTimeout())
			if s.asked > api.MaxQuestionsPerTurn {
				q.State, q.Deadline = api.QuestionTimedOut, now
				q.Error = errcode.NewInfo(errcode.QuestionTimeout,
					fmt.Sprintf("not asked: this turn has asked %d questions, the most a turn may ask", api.MaxQuestionsPerTurn))
			}
			waiting = append(waiting, q.ID)
		}
		s.questions = append(s.questions, q)
	}
	if over := len(s.questions) - api.MaxQuestionsKept; over > 0 {
		s.questions = slices.Delete(s.questions, 0, over)
	}
	return waiting
}

// awaitAnswers waits until every question of ids has its answer, or their
// deadline passes, and returns the prompt that brings the answers to the
// child; ok is false when the turn was cancelled meanwhile (`cancel`, or
// the workflow's own cancellation).
func (s *session) awaitAnswers(ctx workflow.Context, ids []string) (prompt string, ok bool) {
	batch := func() []*api.Question {
		var out []*api.Question
		for i := range s.questions {
			if slices.Contains(ids, s.questions[i].ID) {
				out = append(out, &s.questions[i])
			}
		}
		return out
	}
	pending := func() []*api.Question {
		return slices.DeleteFunc(batch(), func(q *api.Question) bool { return q.State != api.QuestionPending })
	}
	if waiting := pending(); len(waiting) > 0 {
		workflow.GetLogger(ctx).Info("child waits for an answer", "session", s.in.SessionID, "question", waiting[0].ID, "reason", waiting[0].Reason)
		s.upsertQuestionMemo(ctx, waiting[0])
		waitCtx, cancel := workflow.WithCancel(ctx)
		// `cancel` ends the wait as it would stop a running child.
		s.cancelRun = cancel
		got, err := workflow.AwaitWithTimeout(waitCtx, waiting[0].Deadline.Sub(workflow.Now(ctx)), func() bool { return len(pending()) == 0 })
		s.cancelRun = nil
		if err != nil {
			for _, q := range pending() {
				q.State, q.Error = api.QuestionCancelled, errcode.NewInfo(errcode.Cancelled, "Cancelled while the child waited for its answer")
			}
			s.upsertQuestionMemo(ctx, nil)
			return "", false
		}
		if !got {
			for _, q := range pending() {
				q.State = api.QuestionTimedOut
				q.Error = errcode.NewInfo(errcode.QuestionTimeout, fmt.Sprintf("no answer within %s", s.questionTimeout()))
			}
		}
		s.upsertQuestionMemo(ctx, nil)
	}
	var qs []api.Question
	for _, q := range batch() {
		qs = append(qs, *q)
	}
	return api.AnswersPrompt(qs), true
}

// waitsForAnswer reports whether a question of the session waits for its
// answer.
func (s *session) waitsForAnswer() bool {
	return slices.ContainsFunc(s.questions, func(q api.Question) bool { return q.State == api.QuestionPending })
}

// upsertQuestionMemo shows q, while it waits, in the workflow's memo; nil
// clears it. Its context outlives a cancellation, so a cancelled wait still
// clears the memo.
func (s *session) upsertQuestionMemo(ctx workflow.Context, q *api.Question) {
	var v any
	if q != nil {
		v = clipRunes(q.Reason+": "+q.Message, questionMemoChars)
	}
	memoCtx, _ := workflow.NewDisconnectedContext(ctx)
	if err := workflow.UpsertMemo(memoCtx, map[string]any{questionMemo: v}); err != nil {
		workflow.GetLogger(ctx).Warn("could not show the question in the memo", "session", s.in.SessionID, "error", err)
	}
}

// clipRunes cuts s to n runes, the last one an ellipsis when it cut.
func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
