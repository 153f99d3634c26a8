package workflows

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// asking is a child run that ended at its questions (RunPi reads them
// from the session file).
func asking(qs ...api.Question) api.RunPiResult {
	for i := range qs {
		qs[i].State = api.QuestionPending
		if !qs[i].Waits() {
			qs[i].State = api.QuestionSent
		}
	}
	return api.RunPiResult{Questions: qs, Usage: usage(3), ToolCalls: len(qs)}
}

func decision(id, msg string) api.Question {
	return api.Question{ID: id, Reason: api.ReasonNeedDecision, Message: msg}
}

// reply sends a reply update; done gets what it returned, or its rejection.
func reply(env *testsuite.TestWorkflowEnvironment, id string, req api.ReplyRequest, done func(api.Question, error)) {
	env.UpdateWorkflow(api.ReplyUpdate, id, &testsuite.TestUpdateCallback{
		OnReject:   func(err error) { done(api.Question{}, err) },
		OnComplete: func(v any, err error) { q, _ := v.(api.Question); done(q, err) },
	}, req)
}

// TestSessionQuestionAnswered: a child run that ends at a question pauses
// the turn with nothing running; status shows the question and a wait with
// Questions ends at it; the reply goes to the child as its next run's
// prompt, which is no corrective feedback; a repeated reply is harmless,
// another one refused.
func TestSessionQuestionAnswered(t *testing.T) {
	child := &fakeChild{results: []api.RunPiResult{asking(decision("call_1", "SQLite or PostgreSQL?")), finalized("Used PostgreSQL.")}}
	env := newTestEnv(t, child.run)
	in := oneTurn("Set up the database.")
	var replies []string
	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		q := st.PendingQuestion()
		if st.State != api.StateRunning || q == nil || q.ID != "call_1" || q.Message != "SQLite or PostgreSQL?" || q.Turn != 1 ||
			!q.Deadline.Equal(q.Asked.Add(api.DefaultQuestionTimeout)) {
			t.Errorf("status while the child waits: %+v", st)
		}
		if len(child.prompts) != 1 {
			t.Errorf("a child ran while its question waited: %q", child.prompts)
		}
		env.UpdateWorkflow(api.WaitUpdate, "wait-q", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("wait rejected: %v", err) },
			OnComplete: func(v any, err error) {
				if st, _ := v.(api.SessionStatus); err != nil || st.PendingQuestion() == nil {
					t.Errorf("wait with questions returned %+v %v", v, err)
				}
			},
		}, api.WaitRequest{Questions: true})
		for _, r := range []struct {
			id  string
			req api.ReplyRequest
		}{
			{"unknown", api.ReplyRequest{QuestionID: "call_9", Message: "yes"}},
			{"empty", api.ReplyRequest{Message: " "}},
			{"answer", api.ReplyRequest{QuestionID: "call_1", Message: "PostgreSQL.", By: "parent-session"}},
			{"again", api.ReplyRequest{QuestionID: "call_1", Message: "PostgreSQL.", By: "parent-session"}},
			{"another", api.ReplyRequest{QuestionID: "call_1", Message: "SQLite."}},
		} {
			reply(env, r.id, r.req, func(q api.Question, err error) {
				got := string(q.State)
				if err != nil {
					got = "refused"
					if !strings.Contains(err.Error(), "question") && !strings.Contains(err.Error(), "answer") {
						t.Errorf("reply %s refused with %v", r.id, err)
					}
				}
				replies = append(replies, r.id+":"+got)
			})
		}
	}, time.Minute)
	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	var res api.SessionResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(replies, " "); got != "unknown:refused empty:refused answer:answered again:answered another:refused" {
		t.Fatalf("replies: %s", got)
	}
	if res.State != api.StateCompleted || res.LastTurn.ChildRuns != 2 || res.LastTurn.Result.Output != "Used PostgreSQL." {
		t.Fatalf("result %+v", res.LastTurn)
	}
	if len(child.prompts) != 2 || !strings.Contains(child.prompts[1], "Your supervisor answered your question (contact_supervisor, call_1):\n\nPostgreSQL.") ||
		strings.Contains(child.prompts[1], "subagent_finalize") {
		t.Fatalf("prompts %q", child.prompts)
	}
	if res.Usage != usage(3).Add(usage(10)) {
		t.Fatalf("usage %+v", res.Usage)
	}
	st := queryStatus(t, env)
	if len(st.Questions) != 1 || st.Questions[0].State != api.QuestionAnswered || st.Questions[0].By != "parent-session" || st.Questions[0].Answer != "PostgreSQL." {
		t.Fatalf("questions after the turn: %+v", st.Questions)
	}
}

// TestSessionQuestionEnds: a question that nobody answers times out with
// QUESTION_TIMEOUT, which the child is told; a cancel ends the wait and the
// turn; the Temporal UI's signal answers as the update does; a question
// past the turn's limit times out at once.
func TestSessionQuestionEnds(t *testing.T) {
	var many []api.Question
	for i := range api.MaxQuestionsPerTurn + 1 {
		many = append(many, decision("q"+string(rune('a'+i)), "which?"))
	}
	tests := []struct {
		name    string
		results []api.RunPiResult
		timeout int
		during  func(env *testsuite.TestWorkflowEnvironment)
		state   api.State
		runs    int
		qstate  []api.QuestionState
		prompt  []string // what the second run's prompt says
	}{
		{"timeout", []api.RunPiResult{asking(decision("call_1", "Which?")), finalized("Chose SQLite.")}, 120, nil,
			api.StateCompleted, 2, []api.QuestionState{api.QuestionTimedOut},
			[]string{"QUESTION_TIMEOUT: your question (contact_supervisor, call_1) has no answer: no answer within 2m0s.", "Do not ask it again"}},
		{"cancel", []api.RunPiResult{asking(decision("call_1", "Which?"))}, 0, func(env *testsuite.TestWorkflowEnvironment) {
			env.SignalWorkflow(api.CancelSignal, api.CancelRequest{})
		}, api.StateCancelled, 1, []api.QuestionState{api.QuestionCancelled}, nil},
		{"answered by signal", []api.RunPiResult{asking(decision("call_1", "Which?")), finalized("ok")}, 0, func(env *testsuite.TestWorkflowEnvironment) {
			env.SignalWorkflow(api.ReplySignal, api.ReplyRequest{QuestionID: "nope", Message: "ignored"})
			env.SignalWorkflow(api.ReplySignal, api.ReplyRequest{Message: "From the UI."})
		}, api.StateCompleted, 2, []api.QuestionState{api.QuestionAnswered}, []string{"From the UI."}},
		{"past the limit", []api.RunPiResult{asking(many...), finalized("ok")}, 60, nil, api.StateCompleted, 2,
			append(repeatState(api.QuestionTimedOut, api.MaxQuestionsPerTurn), api.QuestionTimedOut),
			[]string{"not asked: this turn has asked 10 questions"}},
		{"progress updates and a finalized run's question do not wait", []api.RunPiResult{func() api.RunPiResult {
			r := finalized("done")
			r.Questions = []api.Question{{ID: "u1", Reason: api.ReasonProgressUpdate, Message: "half way", State: api.QuestionSent},
				{ID: "q1", Reason: api.ReasonInterviewRequest, Message: "which?", State: api.QuestionPending}}
			return r
		}()}, 0, nil, api.StateCompleted, 1, []api.QuestionState{api.QuestionSent, api.QuestionDropped}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := &fakeChild{results: tt.results}
			env := newTestEnv(t, child.run)
			in := oneTurn("Work.")
			in.QuestionTimeoutSeconds = tt.timeout
			if tt.during != nil {
				env.RegisterDelayedCallback(func() { tt.during(env) }, time.Minute)
			}
			env.ExecuteWorkflow(api.SessionWorkflowName, in)
			var res api.SessionResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.State != tt.state || res.LastTurn.ChildRuns != tt.runs || len(child.prompts) != tt.runs {
				t.Fatalf("state %s child runs %d prompts %q", res.State, res.LastTurn.ChildRuns, child.prompts)
			}
			if tt.state == api.StateCancelled && res.LastTurn.Error.Code != errcode.Cancelled {
				t.Fatalf("error %+v", res.LastTurn.Error)
			}
			st := queryStatus(t, env)
			var states []api.QuestionState
			for _, q := range st.Questions {
				states = append(states, q.State)
				if q.State == api.QuestionTimedOut && q.Error.Code != errcode.QuestionTimeout {
					t.Fatalf("timed out question %+v", q)
				}
			}
			if strings.Join(questionStates(states), " ") != strings.Join(questionStates(tt.qstate), " ") {
				t.Fatalf("question states %v, want %v", states, tt.qstate)
			}
			for _, want := range tt.prompt {
				if !strings.Contains(child.prompts[1], want) {
					t.Fatalf("second prompt %q lacks %q", child.prompts[1], want)
				}
			}
		})
	}
}

func repeatState(s api.QuestionState, n int) []api.QuestionState {
	out := make([]api.QuestionState, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func questionStates(s []api.QuestionState) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

// TestSessionQuestionIsNoRetry: a run that ended at a question does not
// count against the finalize retries; the runs after the answer do.
func TestSessionQuestionIsNoRetry(t *testing.T) {
	textOnly := api.RunPiResult{Output: "I guess.", Usage: usage(5)}
	zero := 0
	for _, tt := range []struct {
		name    string
		results []api.RunPiResult
		state   api.State
		code    errcode.Code
	}{
		{"answered, then finalized", []api.RunPiResult{asking(decision("c1", "?")), asking(decision("c2", "??")), finalized("ok")}, api.StateCompleted, ""},
		{"answered, then no finalize", []api.RunPiResult{asking(decision("c1", "?")), textOnly}, api.StateFailed, errcode.FinalizeMissing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			child := &fakeChild{results: tt.results}
			env := newTestEnv(t, child.run)
			in := oneTurn("Work.")
			in.MaxFinalizeRetries = &zero
			in.QuestionTimeoutSeconds = 30
			env.ExecuteWorkflow(api.SessionWorkflowName, in)
			var res api.SessionResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.State != tt.state || res.LastTurn.ChildRuns != len(tt.results) {
				t.Fatalf("state %s after %d child runs", res.State, res.LastTurn.ChildRuns)
			}
			if (res.LastTurn.Error == nil) != (tt.code == "") || tt.code != "" && res.LastTurn.Error.Code != tt.code {
				t.Fatalf("error %+v, want %q", res.LastTurn.Error, tt.code)
			}
		})
	}
}

// TestSessionChildThatKeepsAsking: past the turn's questions, a run that
// asks again counts as a finalize retry, so a child that asks after every
// QUESTION_TIMEOUT stops instead of running without end.
func TestSessionChildThatKeepsAsking(t *testing.T) {
	var results []api.RunPiResult
	for i := range 30 {
		results = append(results, asking(decision(fmt.Sprintf("q%d", i), "which?")))
	}
	child := &fakeChild{results: results}
	env := newTestEnv(t, child.run)
	in := oneTurn("Work.")
	in.QuestionTimeoutSeconds = 60
	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	var res api.SessionResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	// The turn's 10 questions, then the default 2 retries and the run that
	// found them spent.
	want := api.MaxQuestionsPerTurn + api.DefaultMaxFinalizeRetries + 1
	if res.State != api.StateFailed || res.LastTurn.Error.Code != errcode.QuestionTimeout || len(child.prompts) != want {
		t.Fatalf("state %s error %+v after %d runs, want failed with QUESTION_TIMEOUT after %d", res.State, res.LastTurn.Error, len(child.prompts), want)
	}
}

// TestSessionQuestionUnderAReusedID: a model that numbers its tool calls
// per request asks a second question under the first one's ID; it is a new
// question that waits, the reply naming that ID answers it, and the child
// gets that answer.
func TestSessionQuestionUnderAReusedID(t *testing.T) {
	child := &fakeChild{results: []api.RunPiResult{
		asking(decision("call_1", "SQLite or PostgreSQL?")),
		asking(decision("call_1", "Which port?")),
		finalized("Used PostgreSQL on 5433."),
	}}
	env := newTestEnv(t, child.run)
	var got []string
	answer := func(msg string) func() {
		return func() {
			reply(env, msg, api.ReplyRequest{QuestionID: "call_1", Message: msg}, func(q api.Question, err error) {
				got = append(got, fmt.Sprintf("%s→%s %v", q.Message, q.Answer, err))
			})
		}
	}
	env.RegisterDelayedCallback(answer("PostgreSQL."), time.Minute)
	env.RegisterDelayedCallback(answer("5433."), 2*time.Minute)
	env.ExecuteWorkflow(api.SessionWorkflowName, oneTurn("Set up the database."))
	var res api.SessionResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "; ") != "SQLite or PostgreSQL?→PostgreSQL. <nil>; Which port?→5433. <nil>" {
		t.Fatalf("replies: %q", got)
	}
	if res.LastTurn.Result.Output != "Used PostgreSQL on 5433." || len(child.prompts) != 3 || !strings.Contains(child.prompts[2], "5433.") {
		t.Fatalf("result %q, prompts %q", res.LastTurn.Result.Output, child.prompts)
	}
}
