package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestWorktreeFromPi: a real parent pi asks for a writer in a worktree
// (task, worktree: true): the checkout is untouched while its change waits
// on a branch; the parent's task op "apply" puts it into the checkout.
func TestWorktreeFromPi(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"greeting.txt": "hi\n"})
	e.startWorker(shared.client)
	e.model.Script("wt-writer", bashStep("echo hello > greeting.txt"), finalizeStep("greeting changed"))
	e.model.Script("parent-wt",
		call("task", map[string]any{"subagent_type": "implementer", "prompt": "[[script:wt-writer]] Say hello.", "worktree": true}),
		call("task", map[string]any{"op": "apply", "id": "{{match:task_id: ([0-9a-f-]+)}}"}),
		scriptedmodel.Step{Text: "Applied."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-wt]] Change the greeting in a worktree.")
	p.wait(t)
	ends := toolEnds(p, "task")
	if len(ends) != 2 || ends[0].IsError || !strings.Contains(ends[0].Text, "change on branch subagents/") {
		t.Fatalf("the writer's result does not offer its change: %+v", ends)
	}
	if ends[1].IsError || !strings.Contains(ends[1].Text, "applied") {
		t.Fatalf("apply: %+v", ends[1])
	}
	if got := readFile(t, filepath.Join(e.workDir, "greeting.txt")); got != "hello\n" {
		t.Fatalf("the checkout's greeting.txt is %q after apply", got)
	}
	wts, _ := worktreesOf(t, e.workDir)
	if len(wts) != 1 {
		t.Fatalf("worktrees left: %v", wts)
	}
}
