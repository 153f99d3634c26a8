package api

import (
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

func TestReplyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  string
		ok   bool
	}{
		{"an answer", "use the second option", true},
		{"empty", "", false},
		{"blank", " \n\t", false},
		{"at the limit", strings.Repeat("a", MaxAnswerBytes), true},
		{"past the limit", strings.Repeat("a", MaxAnswerBytes+1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ReplyRequest{Message: tc.msg}.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errcode.Is(err, errcode.InvalidInput) {
				t.Fatalf("code %s, want INVALID_INPUT", errcode.CodeOf(err))
			}
		})
	}
}

func TestAnswersPrompt(t *testing.T) {
	answered := Question{ID: "call_1", Reason: ReasonNeedDecision, State: QuestionAnswered, Answer: "Use PostgreSQL."}
	timedOut := Question{ID: "call_2", Reason: ReasonInterviewRequest, State: QuestionTimedOut,
		Error: errcode.NewInfo(errcode.QuestionTimeout, "no answer within 1h0m0s")}
	for _, tc := range []struct {
		name string
		qs   []Question
		want []string
	}{
		{"answered", []Question{answered}, []string{"Your supervisor answered your question (contact_supervisor, call_1):\n\nUse PostgreSQL.", "Continue your task."}},
		{"timed out", []Question{timedOut}, []string{"QUESTION_TIMEOUT: your question (contact_supervisor, call_2) has no answer: no answer within 1h0m0s.", "Do not ask it again", `status "ERROR"`}},
		{"both, in order", []Question{answered, timedOut}, []string{"Use PostgreSQL.\n\nQUESTION_TIMEOUT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AnswersPrompt(tc.qs)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("prompt %q lacks %q", got, w)
				}
			}
		})
	}
}

func TestPendingQuestion(t *testing.T) {
	for _, tc := range []struct {
		name string
		qs   []Question
		want string
	}{
		{"none", nil, ""},
		{"progress only", []Question{{ID: "a", Reason: ReasonProgressUpdate, State: QuestionSent}}, ""},
		{"answered, then pending", []Question{{ID: "a", State: QuestionAnswered}, {ID: "b", State: QuestionPending}, {ID: "c", State: QuestionPending}}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := SessionStatus{Questions: tc.qs}.PendingQuestion()
			got := ""
			if q != nil {
				got = q.ID
			}
			if got != tc.want {
				t.Fatalf("PendingQuestion = %q, want %q", got, tc.want)
			}
		})
	}
}
