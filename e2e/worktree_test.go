package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// Worktree isolation end to end (docs/worktrees.md): real pi children edit
// files with their bash tool in git worktrees the worker makes, and the
// command applies or discards their changes.

// gitIn runs a git command of the test's own in dir and returns its
// output.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// initWorkRepo makes the test's work folder a git repository with files
// committed.
func (e *env) initWorkRepo(files map[string]string) {
	e.t.Helper()
	gitIn(e.t, e.workDir, "init", "-q", "-b", "main")
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(e.workDir, name), []byte(content), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	gitIn(e.t, e.workDir, "add", "-A")
	gitIn(e.t, e.workDir, "commit", "-q", "-m", "first")
}

// worktreesOf lists the repository's worktrees (its main checkout first)
// and its branches.
func worktreesOf(t *testing.T, dir string) (worktrees, branches []string) {
	t.Helper()
	for _, line := range strings.Split(gitIn(t, dir, "worktree", "list", "--porcelain"), "\n") {
		if w, ok := strings.CutPrefix(line, "worktree "); ok {
			worktrees = append(worktrees, w)
		}
	}
	branches = strings.Split(gitIn(t, dir, "branch", "--format=%(refname:short)"), "\n")
	return worktrees, branches
}

// TestWorktreeParallelWriters: one delegation of two writers, each in a
// worktree of the same checkout (one because its task asks, one because
// its profile says so), run side by side and write the same line of the
// same file differently. Both changes are captured (a branch and a patch
// each, named in the results); the user's checkout is untouched until
// `subagents apply` of the first writes its change, and the apply of the
// second reports its conflict in that file and writes nothing; `apply
// --discard` then deletes its branch and patch.
func TestWorktreeParallelWriters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"shared.txt": "one\ntwo\nthree\n", "other.txt": "other\n"})
	e.writeProfile("isolated-writer", "---\nname: isolated-writer\ndescription: writes in a worktree\ntools: read, bash\nworktree: true\n---\nYou write.\n")
	marks := t.TempDir()
	// Each writer waits until the other has started: the two ran at once,
	// each in its own worktree, where they wrote the same file.
	writer := func(me, other, line string) scriptedmodel.Step {
		return bashStep(fmt.Sprintf("pwd > %[1]s/%[2]s.pwd; touch %[1]s/%[2]s.started; "+
			"for i in $(seq 300); do [ -e %[1]s/%[3]s.started ] && break; sleep 0.1; done; "+
			"[ -e %[1]s/%[3]s.started ] && printf 'one\\n%[4]s\\nthree\\n' > shared.txt && echo '%[2]s' > %[2]s-notes.txt",
			marks, me, other, line))
	}
	e.model.Script("writer-a", writer("a", "b", "two from A"), finalizeStep("A wrote"))
	e.model.Script("writer-b", writer("b", "a", "two from B"), finalizeStep("B wrote"))
	e.startWorker(shared.client)
	c := e.cli()

	req := fmt.Sprintf(`{"tasks":[
		{"name":"a","prompt":"[[script:writer-a]] Change line two.","profile":"implementer","worktree":true,"cwd":%[1]q,"model":%[2]q},
		{"name":"b","prompt":"[[script:writer-b]] Change line two.","profile":"isolated-writer","cwd":%[1]q,"model":%[2]q}
	]}`, e.workDir, scriptedmodel.ModelRef)
	ran, out := c.json(0, req, "run", "--input", "-")
	if ran.Status != "completed" || len(ran.Items) != 2 {
		t.Fatalf("run: %s", out)
	}
	pwdA, pwdB := strings.TrimSpace(readFile(t, marks+"/a.pwd")), strings.TrimSpace(readFile(t, marks+"/b.pwd"))
	if pwdA == pwdB || strings.HasPrefix(pwdA, e.workDir) || strings.HasPrefix(pwdB, e.workDir) {
		t.Fatalf("the writers ran in %s and %s, not in worktrees of their own", pwdA, pwdB)
	}

	// Both changes are captured, and the checkout has neither.
	changes := map[string]*api.Change{}
	for _, it := range ran.Items {
		ch := e.sessionStatus(it.TaskID).LastTurn.Result.Change
		if ch == nil || ch.Empty || ch.Branch != activities.BranchPrefix+it.TaskID || !slices.Equal(ch.Files, []string{it.Name + "-notes.txt", "shared.txt"}) {
			t.Fatalf("change of %s: %+v", it.Name, ch)
		}
		if patch := readFile(t, ch.PatchFile); !strings.Contains(patch, "+two from "+strings.ToUpper(it.Name)) {
			t.Fatalf("patch of %s:\n%s", it.Name, patch)
		}
		changes[it.Name] = ch
	}
	_, branches := worktreesOf(t, e.workDir)
	for _, ch := range changes {
		if !slices.Contains(branches, ch.Branch) {
			t.Fatalf("branch %s missing: %q", ch.Branch, branches)
		}
	}
	if status := gitIn(t, e.workDir, "status", "--porcelain"); status != "" {
		t.Fatalf("the checkout changed before any apply:\n%s", status)
	}

	idA, idB := ran.Items[0].TaskID, ran.Items[1].TaskID
	// The text says that a change waits, and how to apply or discard it
	// (issue 42: it showed only in --json).
	if code, text, _ := c.run("", "status", idA); code != 0 ||
		!strings.Contains(text, "change waiting on branch "+changes["a"].Branch+" (2 files: a-notes.txt, shared.txt)") ||
		!strings.Contains(text, "subagents apply "+idA+" writes it into your checkout; subagents apply --discard "+idA+" deletes it") {
		t.Fatalf("status of a worktree task, as text: exit %d\n%s", code, text)
	}
	applied, out := c.json(0, "", "apply", idA)
	if applied.Status != client.ApplyApplied || applied.Items[0].Status != client.ApplyApplied || applied.Items[0].Error != nil {
		t.Fatalf("apply of the first writer: %s", out)
	}
	if got := readFile(t, filepath.Join(e.workDir, "shared.txt")); got != "one\ntwo from A\nthree\n" {
		t.Fatalf("shared.txt after the first apply: %q", got)
	}
	if got := readFile(t, filepath.Join(e.workDir, "a-notes.txt")); got != "a\n" {
		t.Fatalf("a-notes.txt after the first apply: %q", got)
	}
	before := gitIn(t, e.workDir, "status", "--porcelain")

	conflict, out := c.json(2, "", "apply", idB)
	it := conflict.Items[0]
	if conflict.Status != client.ApplyConflict || it.Status != client.ApplyConflict || it.Error == nil || it.Error.Code != "APPLY_CONFLICT" ||
		!strings.Contains(it.Error.Message, "shared.txt") || strings.Contains(it.Error.Message, "b-notes.txt") {
		t.Fatalf("apply of the second writer: %s", out)
	}
	// Nothing of the second change was written: not its clean file either.
	if got := readFile(t, filepath.Join(e.workDir, "shared.txt")); got != "one\ntwo from A\nthree\n" {
		t.Fatalf("shared.txt after the conflicting apply: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.workDir, "b-notes.txt")); !os.IsNotExist(err) {
		t.Fatalf("b-notes.txt was written by an apply that conflicted: %v", err)
	}
	if after := gitIn(t, e.workDir, "status", "--porcelain"); after != before {
		t.Fatalf("the conflicting apply changed the checkout:\n%s\n--- was:\n%s", after, before)
	}
	// The text says the same to a person, with exit code 2.
	code, text, _ := c.run("", "apply", idB)
	if code != 2 || !strings.Contains(text, "conflicts with") || !strings.Contains(text, "shared.txt") {
		t.Fatalf("apply without --json: exit %d\n%s", code, text)
	}

	discarded, out := c.json(0, "", "apply", "--discard", idB)
	if discarded.Status != client.ApplyDiscarded || discarded.Items[0].Status != client.ApplyDiscarded {
		t.Fatalf("discard: %s", out)
	}
	if _, branches := worktreesOf(t, e.workDir); slices.Contains(branches, changes["b"].Branch) || !slices.Contains(branches, changes["a"].Branch) {
		t.Fatalf("branches after the discard: %q", branches)
	}
	if _, err := os.Stat(changes["b"].PatchFile); !os.IsNotExist(err) {
		t.Fatalf("the discarded change's patch is still there: %v", err)
	}
	if worktrees, _ := worktreesOf(t, e.workDir); len(worktrees) != 1 {
		t.Fatalf("worktrees left: %q", worktrees)
	}
}

// TestWorktreeDirtyCheckoutRefused: a task of a profile with worktree:
// true in a checkout with uncommitted changes fails with WORKTREE_DIRTY,
// which says what to do, before any child runs.
func TestWorktreeDirtyCheckoutRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"a.txt": "a\n"})
	if err := os.WriteFile(filepath.Join(e.workDir, "a.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeProfile("isolated-writer", "---\nname: isolated-writer\ndescription: writes in a worktree\ntools: read, bash\nworktree: true\n---\nYou write.\n")
	e.model.Script("never", finalizeStep("ran"))
	e.startWorker(shared.client)
	req := fmt.Sprintf(`{"tasks":[{"name":"w","prompt":"[[script:never]] Go.","profile":"isolated-writer","cwd":%q,"model":%q}]}`,
		e.workDir, scriptedmodel.ModelRef)
	ran, out := e.cli().json(1, req, "run", "--input", "-")
	if it := ran.Items[0]; it.Status != "failed" || it.Error == nil || it.Error.Code != "WORKTREE_DIRTY" ||
		!strings.Contains(it.Error.Message, "a.txt") || !strings.Contains(it.Error.Message, "stash") {
		t.Fatalf("run in a dirty checkout: %s", out)
	}
	if n := len(e.model.RequestsFor("never")); n != 0 {
		t.Fatalf("the child ran: %d model requests", n)
	}
	if worktrees, branches := worktreesOf(t, e.workDir); len(worktrees) != 1 || len(branches) != 1 {
		t.Fatalf("worktrees %q branches %q", worktrees, branches)
	}
}

// TestWorktreeWorkerKilledMidRun: a worker process is SIGKILLed while its
// child works in a worktree. The journal and the worktree it names are
// there when it dies; a new worker's retry goes on in that worktree (the
// dead run's edit is kept), and once it has finished the repository has
// its main checkout as its only worktree and, besides main, only the
// task's branch, holding the change of both runs.
func TestWorktreeWorkerKilledMidRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"work.txt": "start\n"})
	marks := t.TempDir()
	e.model.Script("killed-in-worktree",
		bashStep("echo before-crash >> work.txt; echo $PPID > "+marks+"/started; sleep 120"),
		bashStep("echo after-crash >> work.txt"),
		finalizeStep("finished in the worktree"),
	)
	first := e.startWorkerProcess()
	in := e.sessionInput("[[script:killed-in-worktree]] Work on work.txt.")
	in.Child.Worktree = &api.WorktreeSpec{}
	run := e.startSession(shared.client, in)
	waitForFile(t, marks+"/started")

	journal := filepath.Join(e.dataDir, "worktrees", in.SessionID+".json")
	worktree := filepath.Join(e.dataDir, "worktrees", in.SessionID)
	if _, err := os.Stat(journal); err != nil {
		t.Fatalf("no journal while the child runs: %v", err)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()
	// What the dead worker left: its journal, and the worktree it names
	// with the child's edit in it.
	if _, err := os.Stat(journal); err != nil {
		t.Fatalf("the journal is gone after the crash: %v", err)
	}
	if got := readFile(t, filepath.Join(worktree, "work.txt")); got != "start\nbefore-crash\n" {
		t.Fatalf("the dead run's worktree holds work.txt = %q", got)
	}

	e.startWorkerProcess()
	var res api.SessionResult
	if err := run.Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	turn := res.LastTurn.Result
	if res.LastTurn.State != api.StateCompleted || turn.Output != "finished in the worktree" || !turn.Continued || turn.Attempt != 2 {
		t.Fatalf("turn %s: output %q continued %v attempt %d", res.LastTurn.State, turn.Output, turn.Continued, turn.Attempt)
	}
	ch := turn.Change
	branch := activities.BranchPrefix + in.SessionID
	if ch == nil || ch.Empty || ch.Branch != branch || !slices.Equal(ch.Files, []string{"work.txt"}) {
		t.Fatalf("change: %+v", ch)
	}
	if got := gitIn(t, e.workDir, "show", branch+":work.txt"); got != "start\nbefore-crash\nafter-crash" {
		t.Fatalf("the branch's work.txt = %q, want both runs' edits", got)
	}
	if _, err := os.Stat(ch.PatchFile); err != nil {
		t.Fatalf("patch: %v", err)
	}
	worktrees, branches := worktreesOf(t, e.workDir)
	if len(worktrees) != 1 || worktrees[0] != realPathOf(t, e.workDir) {
		t.Fatalf("worktrees after the retry: %q", worktrees)
	}
	slices.Sort(branches)
	if !slices.Equal(branches, []string{"main", branch}) {
		t.Fatalf("branches after the retry: %q, want main and %s", branches, branch)
	}
	for _, p := range []string{journal, worktree} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s left after the retry: %v", p, err)
		}
	}
	if got := readFile(t, filepath.Join(e.workDir, "work.txt")); got != "start\n" {
		t.Fatalf("the user's checkout changed: work.txt = %q", got)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func realPathOf(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestWorktreeSettingIsolatesWriters: the project's worktree setting puts
// a profile that can write files in a worktree of its own (its change
// captured, the checkout untouched), and leaves a read-only profile in the
// checkout.
func TestWorktreeSettingIsolatesWriters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.initWorkRepo(map[string]string{"a.txt": "a\n"})
	e.writeSettings(false, `{"subagents":{"worktree":true}}`)
	// The settings file is the project's own and ignored by git, so the
	// checkout stays clean for the worktree.
	if err := os.WriteFile(filepath.Join(e.workDir, ".git", "info", "exclude"), []byte(".pi/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeProfile("plain-writer", "---\nname: plain-writer\ndescription: writes\ntools: read, bash, write\n---\nYou write.\n")
	e.writeProfile("plain-reader", "---\nname: plain-reader\ndescription: reads\ntools: read, bash\n---\nYou read.\n")
	e.model.Script("w", bashStep("pwd > where.txt"), finalizeStep("wrote"))
	e.model.Script("r", bashStep("pwd"), finalizeStep("read"))
	e.startWorker(shared.client)
	req := fmt.Sprintf(`{"tasks":[
		{"name":"w","prompt":"[[script:w]] Write.","profile":"plain-writer","cwd":%[1]q,"model":%[2]q},
		{"name":"r","prompt":"[[script:r]] Read.","profile":"plain-reader","cwd":%[1]q,"model":%[2]q}
	]}`, e.workDir, scriptedmodel.ModelRef)
	ran, out := e.cli().json(0, req, "run", "--input", "-")
	if ran.Status != "completed" || len(ran.Items) != 2 {
		t.Fatalf("run: %s", out)
	}
	w := e.sessionStatus(ran.Items[0].TaskID).LastTurn.Result.Change
	if w == nil || w.Empty || !slices.Equal(w.Files, []string{"where.txt"}) {
		t.Fatalf("the writer's change: %+v", w)
	}
	if patch := readFile(t, w.PatchFile); strings.Contains(patch, "+"+e.workDir+"\n") {
		t.Fatalf("the writer ran in the checkout:\n%s", patch)
	}
	if r := e.sessionStatus(ran.Items[1].TaskID).LastTurn.Result.Change; r != nil {
		t.Fatalf("the reader ran in a worktree: %+v", r)
	}
	if status := gitIn(t, e.workDir, "status", "--porcelain"); status != "" {
		t.Fatalf("the checkout changed:\n%s", status)
	}
}
