package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestQuestionAnsweredByANewParentPi: a real parent pi's task asks its
// supervisor; the task tool's call ends with the question; the parent pi
// is killed before it answers; a new pi session in the folder is told the
// question waits, its model answers with the task tool's op reply, and the
// child finishes with the answer. The child's model is asked twice in all
// (the task, then the answer): nothing is asked twice.
func TestQuestionAnsweredByANewParentPi(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	e.model.Script("asks", askingScript()...)
	asker := e.askerProfile()
	e.model.Script("parent-asked", call("task", map[string]any{"subagent_type": asker, "prompt": "[[script:asks]] Set up the database."}))
	first := e.startParent("json", filepath.Join(t.TempDir(), "first.jsonl"), "[[script:parent-asked]] Set up the database.")
	ends := waitToolEnds(t, first, "task", 1)
	if !strings.Contains(ends[0].Text, "Asks you (need_decision): "+childQuestion) || !strings.Contains(ends[0].Text, `op "reply"`) {
		t.Fatalf("the task call did not end with the question:\n%s", ends[0].Text)
	}
	first.kill()
	<-first.done

	// The new pi's model answers what it is told: the task ID is in the
	// message, which the scripted model reads back.
	e.model.Script("parent-answers",
		call("task", map[string]any{"op": "reply", "id": "{{match:task_id: ([0-9a-f-]+)}}", "message": theAnswer}),
		scriptedmodel.Step{Text: "Answered."},
	)
	second := e.startParent("json", filepath.Join(t.TempDir(), "second.jsonl"), "[[script:parent-answers]] Anything waiting for me?")
	second.wait(t)
	reqs := e.model.RequestsFor("parent-answers")
	if len(reqs) == 0 || !strings.Contains(userText(reqs[0]), childQuestion) {
		t.Fatal("the new pi's model was not told the question waits")
	}
	if r := toolEnds(second, "task"); len(r) != 1 || r[0].IsError {
		t.Fatalf("op reply: %+v", r)
	}
	// The child goes on with the answer after the reply (the new pi did not
	// start the task: it does not wait for its result).
	if _, err := e.model.WaitForRequests(e.ctx(), 2, func(r scriptedmodel.Request) bool { return r.Script == "asks" }); err != nil {
		t.Fatalf("the child never went on: %v", err)
	}
	child := e.model.RequestsFor("asks")
	if len(child) != 2 || !strings.Contains(userText(child[1]), theAnswer) {
		t.Fatalf("the child's model was asked %d times; the answer in the last: %v", len(child), len(child) > 1 && strings.Contains(userText(child[len(child)-1]), theAnswer))
	}
}

// TestBackgroundQuestionReachesTheRunningParent: a parent pi starts a task
// in the background (async) whose child asks its supervisor; the running
// parent is told the question as a message that starts a turn, its model
// answers with op reply, the child finishes with the answer, and its
// result comes back into the same run. The parent's model is told the
// question once, and the child's model is asked twice in all.
func TestBackgroundQuestionReachesTheRunningParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	e.model.Script("asks", askingScript()...)
	asker := e.askerProfile()
	e.model.Script("parent-bg",
		call("task", map[string]any{"subagent_type": asker, "prompt": "[[script:asks]] Set up the database.", "async": true}),
		scriptedmodel.Step{Text: "Started it; I will answer what it asks."},
		call("task", map[string]any{"op": "reply", "id": "{{match:task_id: ([0-9a-f-]+)}}", "message": theAnswer}),
		scriptedmodel.Step{Text: "Answered."},
		scriptedmodel.Step{Text: "The database is set up."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-bg]] Set up the database in the background.")
	p.wait(t)

	reqs := e.model.RequestsFor("parent-bg")
	if len(reqs) != 5 || !strings.Contains(userText(reqs[2]), childQuestion) || strings.Contains(userText(reqs[1]), childQuestion) {
		t.Fatalf("the parent's model got %d requests; told the question in the third: %v", len(reqs), len(reqs) > 2 && strings.Contains(userText(reqs[2]), childQuestion))
	}
	// One message, kept in the conversation: the last request holds it once.
	told := 0
	for _, u := range userTexts(reqs[4]) {
		if strings.Contains(u, "waits for your answer") && strings.Contains(u, childQuestion) {
			told++
		}
	}
	if told != 1 {
		t.Fatalf("the question was told %d times, want once", told)
	}
	if r := toolEnds(p, "task"); len(r) != 2 || r[1].IsError {
		t.Fatalf("the task calls (start, reply): %+v", r)
	}
	if last := userText(reqs[4]); !strings.Contains(last, "Set up PostgreSQL, as my supervisor decided.") {
		t.Fatalf("the child's result did not come back into the run: %q", last)
	}
	child := e.model.RequestsFor("asks")
	if len(child) != 2 || !strings.Contains(userText(child[1]), theAnswer) {
		t.Fatalf("the child's model was asked %d times", len(child))
	}
}
