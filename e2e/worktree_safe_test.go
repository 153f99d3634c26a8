package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// A hostile or careless writer in a worktree (docs/worktrees.md, "What
// apply refuses"): real pi children whose bash tool runs git in their
// worktree the way a user would not expect, and the user's apply.

// runWorktreeTask runs one task of the implementer profile in a worktree
// of the work repository, its child driven by script, and returns its
// item after the run exited with wantCode.
func (e *env) runWorktreeTask(wantCode int, script string) client.Item {
	e.t.Helper()
	// The command is built once, outside the run's own time limit: on a
	// busy machine the build alone can take most of it.
	subagentsBinary(e.t)
	req := fmt.Sprintf(`{"tasks":[{"name":"w","prompt":"[[script:%s]] Work.","profile":"implementer","worktree":true,"cwd":%q,"model":%q}]}`,
		script, e.workDir, scriptedmodel.ModelRef)
	ran, out := e.cli().json(wantCode, req, "run", "--input", "-")
	if len(ran.Items) != 1 {
		e.t.Fatalf("run: %s", out)
	}
	return ran.Items[0]
}

// hostileCommitScript is bash for a child that commits, on its HEAD, a
// tree naming ../pwn-outside.txt and .git/hooks/post-merge (mode 755, a
// hook that touches mark): git's own commands refuse such paths, git
// mktree does not.
func hostileCommitScript(mark string) string {
	return `set -e; g="git -c user.name=child -c user.email=child@example.com"
b=$(printf 'pwned\n' | $g hash-object -w --stdin)
h=$(printf '#!/bin/sh\ntouch ` + mark + `\n' | $g hash-object -w --stdin)
out=$(printf '100644 blob %s\tpwn-outside.txt\n' $b | $g mktree)
hooks=$(printf '100755 blob %s\tpost-merge\n' $h | $g mktree)
dotgit=$(printf '040000 tree %s\thooks\n' $hooks | $g mktree)
tree=$( ($g ls-tree HEAD; printf '040000 tree %s\t..\n040000 tree %s\t.git\n' $out $dotgit) | $g mktree)
$g update-ref HEAD $($g commit-tree $tree -p HEAD -m 'the child commits paths outside')
echo notes > notes.txt`
}

// TestWorktreeHostilePathsRefused: a writer commits ../pwn-outside.txt
// and .git/hooks/post-merge in its worktree. The capture leaves both out
// and the run fails with PERMISSION_DENIED naming them; `apply` writes the
// rest of the change (notes.txt) and nothing outside the checkout or into
// its .git, so the user's next `git merge` runs no hook. The branch set
// back to the child's own commit (as a change captured elsewhere would
// hold it) is refused by `apply` whole.
func TestWorktreeHostilePathsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"a.txt": "a\n"})
	mark := filepath.Join(t.TempDir(), "hook-ran")
	e.model.Script("hostile", bashStep(hostileCommitScript(mark)), finalizeStep("committed"))
	e.startWorker(shared.client)
	c := e.cli()

	it := e.runWorktreeTask(1, "hostile")
	if it.Status != "failed" || it.Error == nil || it.Error.Code != "PERMISSION_DENIED" ||
		!strings.Contains(it.Error.Message, "../pwn-outside.txt") || !strings.Contains(it.Error.Message, ".git/hooks/post-merge") {
		t.Fatalf("the hostile writer's task: %+v", it)
	}
	ch := e.sessionStatus(it.TaskID).LastTurn.Result.Change
	if ch == nil || ch.Empty || !slices.Equal(ch.Files, []string{"notes.txt"}) || len(ch.Refused) != 2 {
		t.Fatalf("change: %+v", ch)
	}
	outside := filepath.Join(filepath.Dir(e.workDir), "pwn-outside.txt")
	hook := filepath.Join(e.workDir, ".git", "hooks", "post-merge")
	nothingWritten := func(when string) {
		t.Helper()
		for _, p := range []string{outside, hook} {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("%s: %s was written", when, p)
			}
		}
	}

	applied, out := c.json(0, "", "apply", it.TaskID)
	if applied.Items[0].Status != client.ApplyApplied || !strings.Contains(applied.Items[0].Output, "notes.txt") {
		t.Fatalf("apply: %s", out)
	}
	nothingWritten("after apply")
	if got := readFile(t, filepath.Join(e.workDir, "notes.txt")); got != "notes\n" {
		t.Fatalf("notes.txt = %q", got)
	}
	// The user's next merge runs no hook of the child's.
	gitIn(t, e.workDir, "add", "-A")
	gitIn(t, e.workDir, "commit", "-q", "-m", "applied")
	gitIn(t, e.workDir, "checkout", "-q", "-b", "side")
	gitIn(t, e.workDir, "commit", "-q", "--allow-empty", "-m", "side")
	gitIn(t, e.workDir, "checkout", "-q", "main")
	gitIn(t, e.workDir, "merge", "-q", "side")
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the child's post-merge hook ran at the user's git merge")
	}

	// The child's own commit is the capture's parent: a branch that holds
	// it at its tip is refused whole.
	gitIn(t, e.workDir, "update-ref", "refs/heads/"+ch.Branch, ch.Branch+"^")
	gitIn(t, e.workDir, "reset", "-q", "--hard", "HEAD~2")
	refused, out := c.json(2, "", "apply", it.TaskID)
	if r := refused.Items[0]; r.Status != client.ApplyFailed || r.Error == nil || r.Error.Code != "PERMISSION_DENIED" ||
		!strings.Contains(r.Error.Message, "../pwn-outside.txt (a .. part)") || !strings.Contains(r.Error.Message, ".git/hooks/post-merge (a .git part") {
		t.Fatalf("apply of the child's own commit: %s", out)
	}
	nothingWritten("after the refused apply")
	if _, err := os.Stat(filepath.Join(e.workDir, "notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused apply wrote notes.txt: %v", err)
	}
}

// TestWorktreeCapturesRmMvAndModes: a writer that ran `git rm`, `git mv`
// and `chmod +x` in its worktree (staged deletions, a rename, a mode
// change) and committed a file itself has all of it captured by the
// documented identity, whatever the worker's GIT_AUTHOR_* and
// GIT_COMMITTER_* say; `apply` writes it all, and nothing is left behind.
func TestWorktreeCapturesRmMvAndModes(t *testing.T) {
	// The worker runs in this process: its environment is this one (not
	// parallel).
	for _, v := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(v, "Worker Env")
	}
	for _, v := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(v, "worker-env@example.com")
	}
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"old.txt": "old\n", "x.txt": "x\n", "run.sh": "echo run\n"})
	// Its own commit first: what it did after is staged or changed, not
	// committed.
	e.model.Script("mover", bashStep(`set -e; echo own > own.txt; git add own.txt; git -c user.name=child -c user.email=child@example.com commit -q -m own
git rm -q old.txt; git mv x.txt y.txt; chmod +x run.sh`), finalizeStep("moved"))
	e.startWorker(shared.client)

	it := e.runWorktreeTask(0, "mover")
	if it.Status != "completed" || it.Error != nil {
		t.Fatalf("the writer's task: %+v", it)
	}
	ch := e.sessionStatus(it.TaskID).LastTurn.Result.Change
	if ch == nil || !slices.Equal(ch.Files, []string{"old.txt", "own.txt", "run.sh", "x.txt", "y.txt"}) {
		t.Fatalf("change: %+v", ch)
	}
	if who := gitIn(t, e.workDir, "log", "-1", "--format=%an <%ae> %cn <%ce>", ch.Branch); who != "subagents <subagents@localhost> subagents <subagents@localhost>" {
		t.Fatalf("the capture is by %s", who)
	}
	if wts, _ := worktreesOf(t, e.workDir); len(wts) != 1 {
		t.Fatalf("worktrees left: %q", wts)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "worktrees", it.TaskID+".json")); !os.IsNotExist(err) {
		t.Fatalf("the journal is left: %v", err)
	}
	applied, out := e.cli().json(0, "", "apply", it.TaskID)
	if applied.Items[0].Status != client.ApplyApplied {
		t.Fatalf("apply: %s", out)
	}
	for name, want := range map[string]string{"old.txt": "<gone>", "x.txt": "<gone>", "y.txt": "x\n", "own.txt": "own\n"} {
		got := "<gone>"
		if b, err := os.ReadFile(filepath.Join(e.workDir, name)); err == nil {
			got = string(b)
		}
		if got != want {
			t.Fatalf("%s after apply: %q, want %q", name, got, want)
		}
	}
	if info, err := os.Stat(filepath.Join(e.workDir, "run.sh")); err != nil || info.Mode().Perm()&0o100 == 0 {
		t.Fatalf("run.sh after apply: %v, %v", info.Mode(), err)
	}
}

// TestWorktreeRunsNoRepositoryCode: the checkout's core.fsmonitor, hooks
// and filter drivers do not run when a task's worktree is checked for
// dirt, made, captured, and applied.
func TestWorktreeRunsNoRepositoryCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"a.txt": "a\n", ".gitattributes": "*.txt filter=repo\n"})
	marks := t.TempDir()
	script := filepath.Join(marks, "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marks+"/ran-$1\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for key, what := range map[string]string{"core.fsmonitor": "fsmonitor", "core.hooksPath": "hooks", "filter.repo.clean": "clean", "filter.repo.smudge": "smudge"} {
		gitIn(t, e.workDir, "config", key, script+" "+what)
	}
	e.model.Script("plain", bashStep("echo b > a.txt"), finalizeStep("wrote"))
	e.startWorker(shared.client)
	it := e.runWorktreeTask(0, "plain")
	if it.Status != "completed" {
		t.Fatalf("task: %+v", it)
	}
	if applied, out := e.cli().json(0, "", "apply", it.TaskID); applied.Items[0].Status != client.ApplyApplied {
		t.Fatalf("apply: %s", out)
	}
	if ran, _ := filepath.Glob(filepath.Join(marks, "ran-*")); len(ran) > 0 {
		t.Fatalf("the repository's code ran: %q", ran)
	}
}

// TestWorktreeFailedCaptureSettles: a writer that left its branch locked
// (a ref lock, as a git killed midway leaves one) cannot be captured. The
// run fails at once, naming the worktree that still holds the work, and
// the change stays recoverable: `apply` says why it cannot capture it
// while the lock is there, and captures and applies it once it is gone;
// `apply --discard` removes another such task's worktree and branch; the
// sweep then settles both journals without a warning.
func TestWorktreeFailedCaptureSettles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"a.txt": "a\n"})
	lockBranch := func(file string) scriptedmodel.Step {
		return bashStep(`set -e; echo work > ` + file + `; lock="$(git rev-parse --git-common-dir)/refs/heads/$(git symbolic-ref --short HEAD).lock"; : > "$lock"`)
	}
	e.model.Script("locker-a", lockBranch("a-work.txt"), finalizeStep("done"))
	e.model.Script("locker-b", lockBranch("b-work.txt"), finalizeStep("done"))
	e.startWorker(shared.client)
	c := e.cli()

	var ids []string
	var changes []*api.Change
	for _, script := range []string{"locker-a", "locker-b"} {
		it := e.runWorktreeTask(1, script)
		if it.Status != "failed" || it.Error == nil || it.Error.Code != "SUBAGENT_FAILED" ||
			!strings.Contains(it.Error.Message, "could not capture") || !strings.Contains(it.Error.Message, "apply --discard") {
			t.Fatalf("task %s: %+v", script, it)
		}
		ch := e.sessionStatus(it.TaskID).LastTurn.Result.Change
		if ch == nil || ch.Worktree == "" || ch.Branch != activities.BranchPrefix+it.TaskID {
			t.Fatalf("change of %s: %+v", script, ch)
		}
		if got := readFile(t, filepath.Join(ch.Worktree, strings.TrimPrefix(script, "locker-")+"-work.txt")); got != "work\n" {
			t.Fatalf("the worktree of %s lost its work: %q", script, got)
		}
		ids, changes = append(ids, it.TaskID), append(changes, ch)
	}
	lock := func(i int) string {
		return filepath.Join(e.workDir, ".git", "refs", "heads", changes[i].Branch+".lock")
	}

	failed, out := c.json(1, "", "apply", ids[0])
	if f := failed.Items[0]; f.Status != client.ApplyFailed || f.Error == nil || !strings.Contains(f.Error.Message, changes[0].Worktree) {
		t.Fatalf("apply while the branch is locked: %s", out)
	}
	if err := os.Remove(lock(0)); err != nil {
		t.Fatal(err)
	}
	applied, out := c.json(0, "", "apply", ids[0])
	if applied.Items[0].Status != client.ApplyApplied || readFile(t, filepath.Join(e.workDir, "a-work.txt")) != "work\n" {
		t.Fatalf("apply once the lock is gone: %s", out)
	}

	if err := os.Remove(lock(1)); err != nil {
		t.Fatal(err)
	}
	discarded, out := c.json(0, "", "apply", "--discard", ids[1])
	if discarded.Items[0].Status != client.ApplyDiscarded {
		t.Fatalf("discard: %s", out)
	}
	if _, branches := worktreesOf(t, e.workDir); slices.Contains(branches, changes[1].Branch) {
		t.Fatalf("the discarded branch is left: %q", branches)
	}
	if wts, _ := worktreesOf(t, e.workDir); len(wts) != 1 {
		t.Fatalf("worktrees left: %q", wts)
	}
	settled, err := activities.SettleWorktrees(e.ctx(), e.dataDir, nil)
	if err != nil || settled != 2 {
		t.Fatalf("the sweep settled %d: %v", settled, err)
	}
	if left, _ := filepath.Glob(filepath.Join(e.dataDir, "worktrees", "*.json")); len(left) > 0 {
		t.Fatalf("journals left after the sweep: %q", left)
	}
	if _, err := os.Stat(filepath.Join(e.workDir, "b-work.txt")); !os.IsNotExist(err) {
		t.Fatalf("the discarded change reached the checkout: %v", err)
	}
}

// TestWorktreeApplyNamesLinksOutside: a writer that made links pointing
// outside the checkout and into its .git has them applied, as git would
// write them, and apply's answer names both; a link inside is not named.
func TestWorktreeApplyNamesLinksOutside(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"a.txt": "a\n"})
	e.model.Script("linker", bashStep("ln -s /etc/hostname host; ln -s .git/config cfg; ln -s a.txt inside"), finalizeStep("linked"))
	e.startWorker(shared.client)
	it := e.runWorktreeTask(0, "linker")
	if it.Status != "completed" {
		t.Fatalf("task: %+v", it)
	}
	applied, out := e.cli().json(0, "", "apply", it.TaskID)
	got := applied.Items[0].Output
	if applied.Items[0].Status != client.ApplyApplied || !strings.Contains(got, "host -> /etc/hostname") ||
		!strings.Contains(got, "cfg -> .git/config") || strings.Contains(got, "inside ->") {
		t.Fatalf("apply: %s", out)
	}
	if target, err := os.Readlink(filepath.Join(e.workDir, "host")); err != nil || target != "/etc/hostname" {
		t.Fatalf("host -> %q, %v", target, err)
	}
}

// TestWorktreeApplyCaptureRefuses: a writer whose capture failed (its
// branch locked) left, in its worktree, a commit naming
// ../pwn-outside.txt and .git/hooks/post-merge. The apply that captures
// the worktree refuses as the worker's own capture does: PERMISSION_DENIED
// (exit 2) naming both paths, nothing written in the checkout or outside
// it. The rest of the work is then on the branch, and a second apply
// writes it, still nothing outside.
func TestWorktreeApplyCaptureRefuses(t *testing.T) {
	t.Parallel()
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
