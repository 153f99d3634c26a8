package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestStickySessionsAsTheContractNamesThem: through a real parent pi, the
// `subagent` tool's sessionId names a session by folder, agent and ID (the
// sessions contract): an ID nobody used starts that session, the same ID
// with the same agent continues it with its context, the same ID with
// another agent is another session, and a session the contract's own
// extension kept under ~/.pi/subagent-sessions is resumed from there.
func TestStickySessionsAsTheContractNamesThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	legacy := t.TempDir()
	cfg := e.workerConfig()
	cfg.LegacySessionsDir = legacy
	e.startWorkerWith(shared.client, cfg)

	e.model.Script("st-a", finalizeStep("noted"))
	e.model.Script("st-b", finalizeStep("it was 7"))
	e.model.Script("st-c", finalizeStep("no number here"))
	e.model.Script("st-old", finalizeStep("it was 42"))
	e.model.Script("parent-sticky",
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:st-a]] Note the number 7.", "sessionId": "notes-1"}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:st-b]] Which number was it?", "sessionId": "notes-1"}),
		call("subagent", map[string]string{"agent": "explorer", "task": "[[script:st-c]] Which number was it?", "sessionId": "notes-1"}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:st-old]] Which number was it?", "sessionId": "old-1"}),
		scriptedmodel.Step{Text: "All done."},
	)
	// The contract's extension left session old-1 of scout in this folder:
	// a pi session whose first prompt named the number 42 (made here by a
	// session of our own, copied where that extension keeps its files).
	seed := e.sessionInput("[[script:st-seed]] Note the number 42.")
	e.model.Script("st-seed", finalizeStep("noted 42"))
	seed.Agent = "scout"
	run := e.startSession(shared.client, seed)
	if err := run.Get(e.ctx(), nil); err != nil {
		t.Fatal(err)
	}
	src := activities.SessionFile(e.dataDir, e.workDir, "scout", seed.SessionID)
	old := filepath.Join(legacy, "0123abcd", "scout_old-1.jsonl")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(old), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, b, 0o600); err != nil {
		t.Fatal(err)
	}

	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", sessionFile, "[[script:parent-sticky]] Use sticky sessions.")
	p.wait(t)
	reqs := e.model.RequestsFor("parent-sticky")
	idOf := regexp.MustCompile("\\*\\*Session ID:\\*\\* `([^`]+)`")
	ids := make([]string, 4)
	for step := range ids {
		text := toolResultText(t, reqs, step+1)
		m := idOf.FindStringSubmatch(text)
		if !strings.Contains(text, "**Status:** SUCCESS") || m == nil {
			t.Fatalf("step %d:\n%s", step, text)
		}
		ids[step] = m[1]
	}
	if ids[0] != "notes-1" || ids[1] != "notes-1" || ids[3] != "old-1" {
		t.Fatalf("session IDs %v: want the caller's own", ids)
	}
	if !strings.HasPrefix(ids[2], "notes-1-") {
		t.Fatalf("another agent's session with the same ID is %q, want another session", ids[2])
	}
	saw := func(script, text string) bool {
		r := e.model.RequestsFor(script)
		return len(r) > 0 && strings.Contains(fmt.Sprint(userTexts(r[0])), text)
	}
	if !saw("st-b", "Note the number 7.") {
		t.Fatal("the same ID with the same agent did not continue the session")
	}
	if saw("st-c", "Note the number 7.") {
		t.Fatal("another agent's session saw the scout's context")
	}
	if !saw("st-old", "Note the number 42.") {
		t.Fatal("the contract's session file was not resumed")
	}
	// Imported once: the original stays, the copy is this project's.
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("the original was moved: %v", err)
	}
	if _, err := os.Stat(activities.SessionFile(e.dataDir, e.workDir, "scout", "old-1")); err != nil {
		t.Fatalf("no session file of old-1 here: %v", err)
	}
}

// TestSubagentToolContinuesOnlyReadOnlyAgents: a writing agent's session
// that the task tool started cannot be continued through the subagent
// tool, which runs read-only agents unless allowWrite is set (the
// SingleResult contract): its rules hold for a session it continues as for
// one it starts.
func TestSubagentToolContinuesOnlyReadOnlyAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("w-1", finalizeStep("wrote it"))
	e.model.Script("w-2", finalizeStep("wrote more"))
	e.model.Script("parent-write",
		call("task", map[string]string{"op": "start", "subagent_type": "implementer", "description": "write", "prompt": "[[script:w-1]] Write it."}),
		call("subagent", map[string]string{"agent": "implementer", "task": "[[script:w-2]] Write more.", "sessionId": "{{match:task_id: ([0-9a-f-]+)}}"}),
		scriptedmodel.Step{Text: "Done."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-write]] Write.")
	p.wait(t)
	ends := toolEnds(p, "subagent")
	if len(ends) != 1 {
		t.Fatalf("%d subagent results, want 1", len(ends))
	}
	if code, unified := detailErr(t, ends[0].Details); code != "SUBAGENT_DISABLED" || unified != "PERMISSION_DENIED" {
		t.Fatalf("continuing a writing agent through subagent: details.error %q/%q, want SUBAGENT_DISABLED/PERMISSION_DENIED:\n%s", code, unified, ends[0].Text)
	}
	if r := e.model.RequestsFor("w-2"); len(r) != 0 {
		t.Fatal("the writing agent ran again through the subagent tool")
	}
}
