package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

// ContactSupervisorToolName is the child-side tool through which a child
// asks the agent that delegated its task (extension/child/contact-supervisor.ts),
// named as pi-subagents names it.
const ContactSupervisorToolName = "contact_supervisor"

// Reasons of a contact_supervisor call, pi-subagents' names: the first two
// wait for an answer, a progress update does not.
const (
	ReasonNeedDecision     = "need_decision"
	ReasonInterviewRequest = "interview_request"
	ReasonProgressUpdate   = "progress_update"
)

// QuestionState is where a child's message to its supervisor stands.
type QuestionState string

// Question states.
const (
	// QuestionPending waits for its answer: the child's run has paused
	// at it, and nothing runs until a reply or the timeout.
	QuestionPending QuestionState = "pending"
	// QuestionAnswered had its reply; the child's next run reads it.
	QuestionAnswered QuestionState = "answered"
	// QuestionTimedOut passed its deadline unanswered (QUESTION_TIMEOUT).
	QuestionTimedOut QuestionState = "timed_out"
	// QuestionCancelled was pending when the task was cancelled.
	QuestionCancelled QuestionState = "cancelled"
	// QuestionSent is a progress update: recorded, nothing to answer.
	QuestionSent QuestionState = "sent"
	// QuestionDropped was asked in a run that also finalized: the task
	// ended with its result, so nobody waits for the answer.
	QuestionDropped QuestionState = "dropped"
)

// ValidQuestionTimeout is whether seconds is a question timeout a start, a
// task or a profile may give: 0 (the default) or 1 to
// MaxQuestionTimeoutSeconds.
func ValidQuestionTimeout(seconds int) bool {
	return seconds >= 0 && seconds <= MaxQuestionTimeoutSeconds
}

// Limits of questions and answers.
const (
	// DefaultQuestionTimeout is how long a question waits for its answer
	// when the session names no timeout. The wait costs nothing (no
	// process, no activity, only a workflow timer), so it is long enough
	// for a person to come back to a pi they closed; it is the same hour a
	// finished session waits for a send (DefaultIdleTTL), past which a task
	// nobody attends should not hold its caller (a parent's wait, a plan)
	// any longer.
	DefaultQuestionTimeout = time.Hour
	// MaxQuestionTimeoutSeconds bounds a question's wait (a start's, a
	// task's or a profile's questionTimeoutSeconds): a week covers a
	// person's time away; a longer wait holds a parent's delegation (and
	// its timer in history) for a task nobody attends.
	MaxQuestionTimeoutSeconds = 7 * 24 * 3600
	// MaxQuestionChars bounds a question's text in history and status: the
	// output cap's default; the session file keeps it whole.
	MaxQuestionChars = 8000
	// MaxAnswerBytes bounds a reply: an answer is read by a model, and a
	// history keeps it; pi-subagents caps a supervisor message at the same
	// 64 KiB.
	MaxAnswerBytes = 64 << 10
	// MaxQuestionsPerTurn bounds the questions one turn may ask: a child
	// that asks again after every timeout would otherwise hold its task
	// for hours; past it a question times out at once.
	MaxQuestionsPerTurn = 10
	// MaxQuestionsKept bounds SessionStatus.Questions: a turn's questions and
	// progress updates, the latest kept.
	MaxQuestionsKept = 20
)

// Question is one contact_supervisor call of a child: a question that
// waits for its answer, or a progress update that does not. Its field names
// are single words, the same in workflow payloads and in envelopes.
type Question struct {
	// ID is the tool call's ID, unique in the session; a reply names it.
	ID      string `json:"id"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Turn is the session's turn that asked it.
	Turn  int           `json:"turn,omitempty"`
	State QuestionState `json:"state"`
	// Asked is when the child's run ended at it; Deadline when it times
	// out unanswered.
	Asked    time.Time `json:"asked,omitzero"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Answer, By and Answered are the reply's: its text, who gave it (the
	// parent's session, an operator), and when.
	Answer   string    `json:"answer,omitempty"`
	By       string    `json:"by,omitempty"`
	Answered time.Time `json:"answered,omitzero"`
	// Error says why a question ended without an answer
	// (QUESTION_TIMEOUT, CANCELLED).
	Error *errcode.Info `json:"error,omitempty"`
}

// Waits reports whether the question's reason waits for an answer.
func (q Question) Waits() bool { return q.Reason != ReasonProgressUpdate }

// ValidReason reports whether r is a reason contact_supervisor takes.
func ValidReason(r string) bool {
	switch r {
	case ReasonNeedDecision, ReasonInterviewRequest, ReasonProgressUpdate:
		return true
	}
	return false
}

// PendingQuestion is the first question of the session that waits for its
// answer, nil when none does.
func (st SessionStatus) PendingQuestion() *Question {
	for i := range st.Questions {
		if st.Questions[i].State == QuestionPending {
			q := st.Questions[i]
			return &q
		}
	}
	return nil
}

// ReplyRequest is the payload of ReplyUpdate and ReplySignal: the answer
// to a child's question.
type ReplyRequest struct {
	// QuestionID names the question answered; empty: the first one
	// pending. Naming it keeps an answer from reaching a later question
	// than the one it was written for, and makes a repeated reply (a
	// parent that restarted before it saw the first one land) harmless.
	QuestionID string `json:"questionId,omitempty"`
	Message    string `json:"message"`
	// By names who answers, for the history (a parent session's ID, an
	// operator).
	By string `json:"by,omitempty"`
}

// Validate checks a reply's own fields.
func (r ReplyRequest) Validate() error {
	if strings.TrimSpace(r.Message) == "" {
		return errcode.New(errcode.InvalidInput, "the answer must not be empty")
	}
	if len(r.Message) > MaxAnswerBytes {
		return errcode.Errorf(errcode.InvalidInput, "the answer is %d bytes, more than the %d an answer may hold: put the rest in a file and name it", len(r.Message), MaxAnswerBytes)
	}
	return nil
}

// AnswersPrompt is the prompt of the child run that follows its questions:
// each one's answer, or why it has none. It is a user message of the
// child's conversation, right after the contact_supervisor call it answers.
func AnswersPrompt(qs []Question) string {
	var b strings.Builder
	for i, q := range qs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		// Sprintf, not Fprintf: the workflow builds this prompt, and
		// workflowcheck counts a write to an io.Writer as a side effect.
		switch q.State {
		case QuestionAnswered:
			b.WriteString(fmt.Sprintf("Your supervisor answered your question (%s, %s):\n\n%s", ContactSupervisorToolName, q.ID, q.Answer))
		default:
			msg := "no answer came"
			if q.Error != nil {
				msg = q.Error.Message
			}
			b.WriteString(fmt.Sprintf("%s: your question (%s, %s) has no answer: %s. Do not ask it again: decide yourself and say in your result what you assumed, "+
				`or call subagent_finalize with status "ERROR" if the task cannot be done without the answer.`, errcode.QuestionTimeout, ContactSupervisorToolName, q.ID, msg))
		}
	}
	b.WriteString("\n\nContinue your task.")
	return b.String()
}
