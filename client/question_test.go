package client

import (
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
)

func TestQuestionText(t *testing.T) {
	deadline := time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		it   Item
		want []string
		not  []string
	}{
		{"none", Item{TaskID: "s-1"}, nil, []string{"Subagent"}},
		{"a decision that waits", Item{TaskID: "s-1", Agent: "worker", Name: "db", Question: &api.Question{ID: "call_1", Reason: api.ReasonNeedDecision,
			Message: "SQLite or PostgreSQL?", State: api.QuestionPending, Deadline: deadline}},
			[]string{"Subagent worker (db), task s-1, asks (need_decision, question call_1):\n\nSQLite or PostgreSQL?",
				"waits for your answer until 2026-11-26 09:30 UTC: subagents reply --question call_1 s-1 \"ANSWER\""}, nil},
		{"an interview", Item{TaskID: "s-2", Agent: "scout", Question: &api.Question{ID: "c", Reason: api.ReasonInterviewRequest, Message: "Fill in:", State: api.QuestionPending}},
			[]string{"asks for your input (interview_request"}, nil},
		{"answered", Item{TaskID: "s-1", Agent: "worker", Question: &api.Question{ID: "c", Reason: api.ReasonNeedDecision, Message: "?", State: api.QuestionAnswered}},
			[]string{"asks"}, []string{"waits for your answer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := QuestionText(tc.it)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("%q has %q", got, w)
				}
			}
		})
	}
}
