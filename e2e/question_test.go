package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// The question a scripted child asks, and the answer the tests give.
const (
	childQuestion = "Which database: SQLite or PostgreSQL?"
	theAnswer     = "PostgreSQL, with the schema in db/schema.sql."
)

// askingScript is a child whose first step asks its supervisor and whose
// second, once the answer came, finalizes.
func askingScript() []scriptedmodel.Step {
	args, _ := json.Marshal(map[string]string{"reason": api.ReasonNeedDecision, "message": childQuestion})
	return []scriptedmodel.Step{
		{ToolCalls: []scriptedmodel.ToolCall{{Name: api.ContactSupervisorToolName, Arguments: string(args)}}},
		finalizeStep("Set up PostgreSQL, as my supervisor decided."),
	}
}

// waitForQuestion polls `subagents status` until the task's child waits
// for an answer, and returns what status shows.
func (c *cli) waitForQuestion(id string) client.Item {
	c.e.t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		env, _ := c.json(0, "", "status", id)
		if len(env.Items) == 1 && env.Items[0].Question != nil {
			return env.Items[0]
		}
		if time.Now().After(deadline) {
			c.e.t.Fatalf("no question in the status of %s: %+v", id, env)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkAskedOnce checks what the child's model was asked: the task, then
// the answer in the next request after the question, nothing twice.
func checkAskedOnce(t *testing.T, reqs []scriptedmodel.Request) {
	t.Helper()
	if len(reqs) != 2 {
		t.Fatalf("the child's model got %d requests, want 2 (the task, then the answer)", len(reqs))
	}
	msgs := reqs[1].Parsed.Messages
	var roles []string
	asked, tasks := 0, 0
	for _, m := range msgs {
		roles = append(roles, m.Role)
		for _, tc := range m.ToolCalls {
			if tc.Function.Name == api.ContactSupervisorToolName {
				asked++
			}
		}
		if m.Role == "user" && strings.Contains(m.Text(), "[[script:") {
			tasks++
		}
	}
	last := msgs[len(msgs)-1]
	if asked != 1 || tasks != 1 || last.Role != "user" || !strings.Contains(last.Text(), theAnswer) ||
		!strings.Contains(last.Text(), "Your supervisor answered your question (contact_supervisor, call_0_0)") {
		t.Fatalf("second request: roles %v, questions %d, tasks %d, last message %q", roles, asked, tasks, last.Text())
	}
	if roles[len(roles)-3] != "assistant" || roles[len(roles)-2] != "tool" {
		t.Fatalf("the answer does not follow the question and its tool result: %v", roles)
	}
}

// TestQuestionAnsweredByReply: a child whose first step asks its
// supervisor waits with nothing running; status and `subagents questions`
// show the question; `subagents reply` answers it, and the child finishes
// with its result, the answer in its next model request, nothing asked of
// its model twice.
func TestQuestionAnsweredByReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("asks", askingScript()...)
	e.startWorker(shared.client)
	c := e.cli()
	in := e.askerInput("[[script:asks]] Set up the database.")
	in.Version = api.CurrentVersion
	run := e.startSession(shared.client, in)

	it := c.waitForQuestion(in.SessionID)
	q := it.Question
	if q.ID != "call_0_0" || q.Reason != api.ReasonNeedDecision || q.Message != childQuestion || q.State != api.QuestionPending ||
		it.Status != string(api.StateRunning) || it.Done || q.Deadline.Sub(q.Asked) != api.DefaultQuestionTimeout {
		t.Fatalf("status while the child waits: %+v, question %+v", it, q)
	}
	// The text shows the question's own wait, not the turn's timeout
	// (issue 42: "61s/30s"), and the reply that answers it.
	if code, text, _ := c.run("", "status", in.SessionID); code != 0 || !strings.Contains(text, "Waits for an answer: "+childQuestion+" (asked ") ||
		!strings.Contains(text, ", times out in ") || strings.Contains(text, "s/") ||
		!strings.Contains(text, `answer it: subagents reply --question call_0_0 `+in.SessionID+` "ANSWER"`) {
		t.Fatalf("status of a task whose child asks, as text: exit %d\n%s", code, text)
	}
	// Nothing runs while the question waits: no pi, no RunPi.
	if n := len(e.model.RequestsFor("asks")); n != 1 {
		t.Fatalf("the child's model got %d requests while its question waited", n)
	}
	if pending := pendingRunPi(t, in.SessionID); pending != 0 {
		t.Fatalf("%d RunPi activities run while the question waits", pending)
	}
	// A new pi in the folder learns of it from the memo.
	listed := c.waitForListedQuestion(in.SessionID)
	if text := client.QuestionText(listed); !strings.Contains(text, childQuestion) || !strings.Contains(text, "subagents reply --question call_0_0 "+in.SessionID) {
		t.Fatalf("question text: %s", text)
	}

	if _, out := c.json(2, "", "reply", "--question", "call_9", in.SessionID, "no"); !strings.Contains(out, "has no question call_9") {
		t.Fatalf("reply to an unknown question: %s", out)
	}
	env, _ := c.json(0, "", "reply", "--by", "e2e-operator", in.SessionID, theAnswer)
	if got := env.Items[0].Question; got == nil || got.State != api.QuestionAnswered || got.Answer != theAnswer || got.By != "e2e-operator" {
		t.Fatalf("reply answered %+v", env.Items)
	}
	var res api.SessionResult
	if err := run.Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	if res.State != api.StateCompleted || res.LastTurn.Result.Output != "Set up PostgreSQL, as my supervisor decided." || res.LastTurn.ChildRuns != 2 {
		t.Fatalf("result %s %q after %d child runs", res.State, res.LastTurn.Result.Output, res.LastTurn.ChildRuns)
	}
	checkAskedOnce(t, e.model.RequestsFor("asks"))
	// The question and its answer are in the session's own file too.
	file := activities.SessionFile(e.dataDir, in.Cwd, in.Agent, in.SessionID)
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), childQuestion) || !strings.Contains(string(b), theAnswer) {
		t.Fatalf("session file: %v", err)
	}
	recordHistory(t, shared.client, in.SessionID, "question-answered-v4")
}

// TestQuestionSurvivesWorkerKill: the worker process is SIGKILLed while
// the child waits for its answer; a new worker takes over, asks the model
// nothing until the answer comes, and the child finishes with it.
func TestQuestionSurvivesWorkerKill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("asks", askingScript()...)
	first := e.startWorkerProcess()
	c := e.cli()
	in := e.askerInput("[[script:asks]] Set up the database.")
	in.Version = api.CurrentVersion
	run := e.startSession(shared.client, in)
	c.waitForQuestion(in.SessionID)

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); first.ProcessState == nil && syscall.Kill(first.Process.Pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not die")
		}
	}
	e.startWorkerProcess()
	// The new worker replays the session to answer this: the question
	// still waits, and the model was asked nothing again.
	if it := c.waitForQuestion(in.SessionID); it.Question.ID != "call_0_0" || it.Question.State != api.QuestionPending {
		t.Fatalf("after the restart: %+v", it.Question)
	}
	if n := len(e.model.RequestsFor("asks")); n != 1 {
		t.Fatalf("the child's model got %d requests before the answer, want 1", n)
	}
	c.json(0, "", "reply", in.SessionID, theAnswer)
	var res api.SessionResult
	if err := run.Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	if res.State != api.StateCompleted || res.LastTurn.Result.Output != "Set up PostgreSQL, as my supervisor decided." {
		t.Fatalf("result %s %q", res.State, res.LastTurn.Result.Output)
	}
	checkAskedOnce(t, e.model.RequestsFor("asks"))
	// Two child runs, each once: the question's and the answer's.
	if n := completedActivities(historyOf(t, shared.client, in.SessionID), api.RunPiActivityName); n != 2 {
		t.Fatalf("%d RunPi activities completed, want 2", n)
	}
	recordHistory(t, shared.client, in.SessionID, "question-worker-killed-v4")
}

// waitForListedQuestion polls `subagents questions` for the folder until
// the session is listed (visibility follows the memo within moments).
func (c *cli) waitForListedQuestion(id string) client.Item {
	c.e.t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		env, _ := c.json(0, "", "questions", "--cwd", c.e.workDir)
		for _, it := range env.Items {
			if it.TaskID == id && it.Question != nil {
				return it
			}
		}
		if time.Now().After(deadline) {
			c.e.t.Fatalf("%s is not among the questions: %+v", id, env.Items)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pendingRunPi counts the RunPi activities the session's workflow has
// running.
func pendingRunPi(t *testing.T, id string) int {
	t.Helper()
	desc, err := shared.client.DescribeWorkflowExecution(e2eCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range desc.GetPendingActivities() {
		if a.GetActivityType().GetName() == api.RunPiActivityName {
			n++
		}
	}
	return n
}

// TestQuestionWhileTheParentWaits: a parent that waits for its delegation
// (client.WaitOrQuestion, as a parent's tool waits) learns of its task's
// question instead of waiting for a child that waits for it; a reply to
// the delegation's own ID reaches the task that asked, and the next wait
// ends with both tasks' results. The same for a one-task delegation,
// answered through `subagents reply` with the delegation's ID.
func TestQuestionWhileTheParentWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("asks", askingScript()...)
	e.model.Script("quiet", finalizeStep("Nothing to ask."))
	e.startWorker(shared.client)
	c := &client.Client{Temporal: shared.client, TaskQueue: e.taskQueue, Address: shared.server.FrontendAddress()}
	ctx := e.ctx()

	two, err := c.Start(ctx, client.StartRequest{Tasks: []api.TaskSpec{
		{Name: "db", Prompt: "[[script:asks]] Set up the database.", Cwd: e.workDir, Profile: e.askerProfile()},
		{Name: "docs", Prompt: "[[script:quiet]] Read the docs.", Cwd: e.workDir},
	}, IdleTTLSeconds: -1})
	if err != nil {
		t.Fatal(err)
	}
	one, err := c.Start(ctx, client.StartRequest{Tasks: []api.TaskSpec{{Name: "db-alone", Prompt: "[[script:asks]] Set up the database.", Cwd: e.workDir, Profile: e.askerProfile()}}, IdleTTLSeconds: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []client.Envelope{two, one} {
		env, err := c.WaitOrQuestion(ctx, d.DelegationID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var asking []client.Item
		for _, it := range env.Items {
			if it.Question != nil {
				asking = append(asking, it)
			}
		}
		if env.WaitStatus != "question" || env.Done || len(asking) != 1 || asking[0].Question.Message != childQuestion {
			t.Fatalf("%s: wait %q done %v, items with questions %+v", d.DelegationID, env.WaitStatus, env.Done, asking)
		}
	}
	// The command's wait stops at the question too, and status shows it.
	waited, _ := e.cli().json(4, "", "wait", "--questions", two.DelegationID)
	if waited.WaitStatus != "question" {
		t.Fatalf("subagents wait --questions: %q", waited.WaitStatus)
	}
	if st, _ := e.cli().json(0, "", "status", two.DelegationID); st.Items[0].Question == nil || st.Items[0].Question.Message != childQuestion {
		t.Fatalf("status of the delegation does not show the question: %+v", st.Items[0])
	}
	if _, err := c.Reply(ctx, client.ReplyRequest{ID: two.DelegationID, Message: theAnswer, By: "parent"}); err != nil {
		t.Fatal(err)
	}
	e.cli().json(0, "", "reply", one.DelegationID, theAnswer)
	for _, d := range []client.Envelope{two, one} {
		env, err := c.WaitOrQuestion(ctx, d.DelegationID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if env.WaitStatus != "completed" || !env.Done || env.Status != string(api.StateCompleted) {
			t.Fatalf("%s after the answer: %q %v %s", d.DelegationID, env.WaitStatus, env.Done, env.Status)
		}
		if out := env.Items[0].Output; out != "Set up PostgreSQL, as my supervisor decided." {
			t.Fatalf("%s: the task that asked answered %q", d.DelegationID, out)
		}
	}
	// Each asking child's model: the task, then the answer, nothing twice.
	reqs := e.model.RequestsFor("asks")
	if len(reqs) != 4 {
		t.Fatalf("the asking children's models got %d requests, want 4", len(reqs))
	}
	for _, r := range reqs {
		if last := r.Parsed.Messages[len(r.Parsed.Messages)-1]; r.StepIdx == 1 && !strings.Contains(last.Text(), theAnswer) {
			t.Fatalf("an answer's request ends with %q", last.Text())
		}
	}
}

// askerProfile writes the profile of a child that may ask its supervisor
// (contact_supervisor among its tools: a profile grants it) and returns
// its name.
func (e *env) askerProfile() string {
	e.t.Helper()
	dir := filepath.Join(e.agentDir, "agents")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	body := "---\nname: asker\ndescription: A child that may ask its supervisor\ntools: read, bash, contact_supervisor\n---\nAsk when a decision is not yours.\n"
	if err := os.WriteFile(filepath.Join(dir, "asker.md"), []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return "asker"
}

// askerInput is sessionInput for the asker profile's child.
func (e *env) askerInput(prompt string) api.SessionInput {
	in := e.sessionInput(prompt)
	in.Agent = e.askerProfile()
	in.Child.Profile = in.Agent
	in.Child.Tools = []string{"read", "bash", api.ContactSupervisorToolName}
	return in
}
