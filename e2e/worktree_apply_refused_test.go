package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/client"
)

// TestWorktreeApplyCaptureRefuses: a writer whose capture failed (its
// branch locked) left, in its worktree, a commit naming
// ../pwn-outside.txt and .git/hooks/post-merge. The apply that captures
// the worktree refuses as the worker's own capture does: PERMISSION_DENIED
// (exit 2) naming both paths, nothing written in the checkout or outside
// it. The rest of the work is then on the branch, and a second apply
// writes it, still nothing outside.
func TestWorktreeApplyCaptureRefuses(t *testing.T) {
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"a.txt": "a\n"})
	mark := filepath.Join(t.TempDir(), "hook-ran")
	e.model.Script("hostile-locker", bashStep(hostileCommitScript(mark)+`
lock="$(git rev-parse --git-common-dir)/refs/heads/$(git symbolic-ref --short HEAD).lock"; : > "$lock"`), finalizeStep("done"))
	e.startWorker(shared.client)
	c := e.cli()

	it := e.runWorktreeTask(1, "hostile-locker")
	if it.Status != "failed" || it.Error == nil || !strings.Contains(it.Error.Message, "could not capture") {
		t.Fatalf("task: %+v", it)
	}
	ch := e.sessionStatus(it.TaskID).LastTurn.Result.Change
	if ch == nil || ch.Worktree == "" {
		t.Fatalf("change: %+v", ch)
	}
	if err := os.Remove(filepath.Join(e.workDir, ".git", "refs", "heads", ch.Branch+".lock")); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(e.workDir), "pwn-outside.txt")
	hook := filepath.Join(e.workDir, ".git", "hooks", "post-merge")
	nothingOutside := func(when string) {
		t.Helper()
		for _, p := range []string{outside, hook} {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("%s: %s was written", when, p)
			}
		}
	}

	refused, out := c.json(2, "", "apply", it.TaskID)
	if r := refused.Items[0]; r.Status != client.ApplyFailed || r.Error == nil || r.Error.Code != "PERMISSION_DENIED" ||
		!strings.Contains(r.Error.Message, "../pwn-outside.txt (a .. part)") || !strings.Contains(r.Error.Message, ".git/hooks/post-merge (a .git part") {
		t.Fatalf("apply of the worktree with refused paths: %s", out)
	}
	nothingOutside("after the refused apply")
	if _, err := os.Stat(filepath.Join(e.workDir, "notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused apply wrote notes.txt: %v", err)
	}

	applied, out := c.json(0, "", "apply", it.TaskID)
	if applied.Items[0].Status != client.ApplyApplied || readFile(t, filepath.Join(e.workDir, "notes.txt")) != "notes\n" {
		t.Fatalf("the second apply: %s", out)
	}
	nothingOutside("after the second apply")
	if wts, _ := worktreesOf(t, e.workDir); len(wts) != 1 {
		t.Fatalf("worktrees left: %q", wts)
	}
}
