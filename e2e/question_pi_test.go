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
	e := newEnv(t)
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
