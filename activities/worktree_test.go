package activities

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// These tests run RunPi with a worktree on a git repository in the
// harness's cwd: the real pi edits files with its bash tool.

// gitT runs a git command of the test's own in dir and returns its output.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// initRepo makes the harness's cwd a git repository with files committed.
func (h *harness) initRepo(files map[string]string) {
	h.t.Helper()
	gitT(h.t, h.cwd, "init", "-q", "-b", "main")
	h.write(files)
	gitT(h.t, h.cwd, "add", "-A")
	gitT(h.t, h.cwd, "commit", "-q", "-m", "first")
}

func (h *harness) write(files map[string]string) {
	h.t.Helper()
	for name, content := range files {
		p := filepath.Join(h.cwd, name)
		must(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(h.t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// bashStep is a model answer that runs command with the bash tool.
func bashStep(command string) scriptedmodel.Step {
	args, _ := json.Marshal(map[string]string{"command": command})
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: string(args)}}}
}

func finalizeStepT(result string) scriptedmodel.Step {
	args, _ := json.Marshal(map[string]string{"status": "SUCCESS", "result": result})
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(string(args))}}
}

func (h *harness) worktreeInput(prompt string) api.RunPiInput {
	in := h.input(prompt)
	in.Worktree = &api.WorktreeSpec{}
	return in
}

func readT(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

// noWorktreeLeft checks that the repository has its main checkout as its
// only worktree and the data dir no journal.
func (h *harness) noWorktreeLeft(session string) {
	h.t.Helper()
	if list := gitT(h.t, h.cwd, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		h.t.Fatalf("worktrees left:\n%s", list)
	}
	if _, err := os.Stat(journalFile(h.acts.cfg.DataDir, session)); !os.IsNotExist(err) {
		h.t.Fatalf("journal left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(worktreesDir(h.acts.cfg.DataDir), session)); !os.IsNotExist(err) {
		h.t.Fatalf("worktree folder left: %v", err)
	}
}

// TestRunPiWorktreeCapture: the child edits, adds and deletes files in the
// worktree; the user's checkout stays as it was, the change is on the
// session's branch and in its patch, the worktree is gone. The next turn
// continues on the branch, and the change grows.
func TestRunPiWorktreeCapture(t *testing.T) {
	h := newHarness(t, nil)
	h.initRepo(map[string]string{"a.txt": "a\n", "gone.txt": "bye\n", "sub/keep.txt": "keep\n"})
	marks := t.TempDir()
	h.model.Script("edit",
		bashStep("pwd > "+marks+"/pwd; echo changed > a.txt; rm gone.txt; mkdir -p new && echo n > new/n.txt"),
		finalizeStepT("edited"))
	in := h.worktreeInput("[[script:edit]] Edit the files.")
	res := h.mustRun(in)
	if res.Error != nil || res.Output != "edited" {
		t.Fatalf("result: %+v", res)
	}
	c := res.Change
	branch := BranchPrefix + in.SessionID
	if c == nil || c.Empty || c.Branch != branch || c.Repo != realPath(h.cwd) || !slices.Equal(c.Files, []string{"a.txt", "gone.txt", "new/n.txt"}) {
		t.Fatalf("change: %+v", c)
	}
	if c.Base != gitT(t, h.cwd, "rev-parse", "HEAD") {
		t.Fatalf("base %s, want HEAD", c.Base)
	}
	// The child ran in the worktree, not in the checkout.
	wantPwd := filepath.Join(realPath(worktreesDir(h.acts.cfg.DataDir)), in.SessionID)
	if got := strings.TrimSpace(readT(t, marks+"/pwd")); got != wantPwd {
		t.Fatalf("the child ran in %q, want %q", got, wantPwd)
	}
	if readT(t, filepath.Join(h.cwd, "a.txt")) != "a\n" || readT(t, filepath.Join(h.cwd, "gone.txt")) != "bye\n" || readT(t, filepath.Join(h.cwd, "new/n.txt")) != "<missing>" {
		t.Fatal("the user's checkout changed")
	}
	if status := gitT(t, h.cwd, "status", "--porcelain"); status != "" {
		t.Fatalf("the user's checkout is not clean: %s", status)
	}
	if got := gitT(t, h.cwd, "show", branch+":a.txt"); got != "changed" {
		t.Fatalf("branch's a.txt = %q", got)
	}
	if c.PatchFile != PatchFile(h.acts.cfg.DataDir, in.SessionID) || !strings.Contains(readT(t, c.PatchFile), "+changed") {
		t.Fatalf("patch %s:\n%s", c.PatchFile, readT(t, c.PatchFile))
	}
	gitT(t, h.cwd, "apply", "--check", c.PatchFile)
	h.noWorktreeLeft(in.SessionID)
	// The session file is where the task's own cwd puts it.
	if res.SessionFile != SessionFile(h.acts.cfg.DataDir, h.cwd, in.Agent, in.SessionID) {
		t.Fatalf("session file %s", res.SessionFile)
	}

	// The next turn continues on the branch, in the same pi session.
	h.model.Script("more", bashStep("cat a.txt > "+marks+"/seen; echo more >> a.txt"), finalizeStepT("more"))
	next := in
	next.Turn, next.Prompt = 2, "[[script:more]] More."
	res2 := h.mustRun(next)
	if got := readT(t, marks+"/seen"); got != "changed\n" {
		t.Fatalf("the second turn saw a.txt = %q, want the first turn's change", got)
	}
	c2 := res2.Change
	if c2 == nil || c2.Base != c.Base || c2.Branch != branch || !slices.Equal(c2.Files, c.Files) {
		t.Fatalf("second change: %+v", c2)
	}
	if got := gitT(t, h.cwd, "show", branch+":a.txt"); got != "changed\nmore" {
		t.Fatalf("branch's a.txt after two turns = %q", got)
	}
	if n := gitT(t, h.cwd, "rev-list", "--count", c.Base+".."+branch); n != "2" {
		t.Fatalf("%s commits on the branch, want one per turn", n)
	}
	h.noWorktreeLeft(in.SessionID)
}

// TestRunPiWorktreeRefused: a checkout that cannot have a worktree is a
// result with the error's code, and nothing is made.
func TestRunPiWorktreeRefused(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(h *harness)
		baseRef string
		want    errcode.Code
		says    string
	}{
		{"dirty checkout", func(h *harness) {
			h.initRepo(map[string]string{"a.txt": "a\n"})
			h.write(map[string]string{"a.txt": "edited\n", "untracked.txt": "u\n"})
		}, "", errcode.WorktreeDirty, "a.txt, untracked.txt"},
		{"not a repository", func(*harness) {}, "", errcode.InvalidInput, "is not in a git repository"},
		{"unknown base ref", func(h *harness) { h.initRepo(map[string]string{"a.txt": "a\n"}) }, "no-such-branch", errcode.InvalidInput, "no-such-branch"},
		{"base ref that is an option", func(h *harness) { h.initRepo(map[string]string{"a.txt": "a\n"}) }, "--output=x", errcode.InvalidInput, "is not a git ref"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			tt.setup(h)
			h.model.Script("never", finalizeStepT("ran"))
			in := h.worktreeInput("[[script:never]] Go.")
			in.Worktree.BaseRef = tt.baseRef
			res := h.mustRun(in)
			if errCode(res) != tt.want || !strings.Contains(res.Error.Message, tt.says) {
				t.Fatalf("error %+v, want %s saying %q", res.Error, tt.want, tt.says)
			}
			if tt.want == errcode.WorktreeDirty && !strings.Contains(res.Error.Message, "stash") {
				t.Fatalf("a dirty checkout's error does not say what to do: %s", res.Error.Message)
			}
			if n := len(h.model.RequestsFor("never")); n != 0 {
				t.Fatalf("the child ran (%d model requests)", n)
			}
			if _, err := os.Stat(worktreesDir(h.acts.cfg.DataDir)); err == nil {
				entries, _ := os.ReadDir(worktreesDir(h.acts.cfg.DataDir))
				if len(entries) > 0 {
					t.Fatalf("worktrees dir holds %v", entries)
				}
			}
		})
	}
}

// TestRunPiWorktreeBaseAndFolder: the worktree starts from the base ref,
// the child runs in the same folder of it as the task's cwd, and pi's
// untracked runtime state in the checkout does not make it dirty. A child
// that changes nothing leaves no branch.
func TestRunPiWorktreeBaseAndFolder(t *testing.T) {
	h := newHarness(t, nil)
	h.initRepo(map[string]string{"sub/v.txt": "v1\n"})
	v1 := gitT(t, h.cwd, "rev-parse", "HEAD")
	gitT(t, h.cwd, "tag", "v1")
	h.write(map[string]string{"sub/v.txt": "v2\n"})
	gitT(t, h.cwd, "commit", "-q", "-am", "second")
	h.write(map[string]string{".pi/subagents/state.json": "{}"})
	h.cwd = filepath.Join(h.cwd, "sub")
	marks := t.TempDir()
	h.model.Script("look", bashStep("pwd > "+marks+"/pwd; cat v.txt > "+marks+"/v"), finalizeStepT("looked"))
	in := h.worktreeInput("[[script:look]] Look.")
	in.Worktree.BaseRef = "v1"
	res := h.mustRun(in)
	if res.Error != nil {
		t.Fatalf("result: %+v", res.Error)
	}
	if got := readT(t, marks+"/v"); got != "v1\n" {
		t.Fatalf("the child saw v.txt = %q, want the base ref's", got)
	}
	if got := strings.TrimSpace(readT(t, marks+"/pwd")); !strings.HasSuffix(got, "/"+in.SessionID+"/sub") {
		t.Fatalf("the child ran in %s, want the worktree's sub", got)
	}
	if c := res.Change; c == nil || !c.Empty || c.Base != v1 || c.Branch != "" || c.PatchFile != "" {
		t.Fatalf("change of a child that changed nothing: %+v", c)
	}
	if branches := gitT(t, h.cwd, "branch", "--list", BranchPrefix+"*"); branches != "" {
		t.Fatalf("branch left for an empty change: %s", branches)
	}
	h.noWorktreeLeft(in.SessionID)
}

// TestRunPiWorktreeJournalRecovery: a run finds the journal an interrupted
// one left, and goes on in the worktree it names: what the dead attempt
// changed there is in the change, with this run's own.
func TestRunPiWorktreeJournalRecovery(t *testing.T) {
	h := newHarness(t, nil)
	h.initRepo(map[string]string{"a.txt": "a\n"})
	in := h.worktreeInput("[[script:after]] Go on.")
	sessionFile := SessionFile(h.acts.cfg.DataDir, h.cwd, in.Agent, in.SessionID)
	j, err := h.acts.enterWorktree(context.Background(), in, sessionFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(journalFile(h.acts.cfg.DataDir, in.SessionID)); err != nil {
		t.Fatalf("no journal beside the worktree: %v", err)
	}
	// What the dead attempt's child wrote.
	must(t, os.WriteFile(filepath.Join(j.cwd(), "before-crash.txt"), []byte("half\n"), 0o644))
	// The user commits meanwhile: the retry stays on the journal's base.
	h.write(map[string]string{"a.txt": "user\n"})
	gitT(t, h.cwd, "commit", "-q", "-am", "user's")
	h.model.Script("after", bashStep("ls > seen.txt"), finalizeStepT("done"))
	res := h.mustRun(in)
	c := res.Change
	if c == nil || c.Base != j.Base || !slices.Equal(c.Files, []string{"before-crash.txt", "seen.txt"}) {
		t.Fatalf("change: %+v (journal base %s)", c, j.Base)
	}
	if seen := gitT(t, h.cwd, "show", c.Branch+":seen.txt"); !strings.Contains(seen, "before-crash.txt") {
		t.Fatalf("the run did not go on in the journal's worktree: it saw %q", seen)
	}
	h.noWorktreeLeft(in.SessionID)
}

// TestSettleWorktrees: the sweep settles what dead runs left: a worktree
// with a change is captured onto its branch and removed, one without is
// removed with its branch, one whose session an attempt holds is left.
func TestSettleWorktrees(t *testing.T) {
	h := newHarness(t, nil)
	h.initRepo(map[string]string{"a.txt": "a\n"})
	ctx := context.Background()
	enter := func(session string) *worktreeJournal {
		in := h.worktreeInput("x")
		in.SessionID = session
		j, err := h.acts.enterWorktree(ctx, in, SessionFile(h.acts.cfg.DataDir, h.cwd, in.Agent, session))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	changed, empty, held := enter("changed"), enter("empty"), enter("held")
	must(t, os.WriteFile(filepath.Join(changed.cwd(), "a.txt"), []byte("changed\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(held.cwd(), "a.txt"), []byte("held\n"), 0o644))
	lock, ok, err := tryLockSession(held.SessionFile)
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	n, err := SettleWorktrees(ctx, h.acts.cfg.DataDir, nil)
	if err != nil || n != 2 {
		t.Fatalf("settled %d, %v; want 2", n, err)
	}
	if got := gitT(t, h.cwd, "show", changed.Branch+":a.txt"); got != "changed" {
		t.Fatalf("the settled change's branch has a.txt = %q", got)
	}
	if !strings.Contains(readT(t, changed.Patch), "+changed") {
		t.Fatalf("no patch for the settled change: %s", readT(t, changed.Patch))
	}
	if tip := gitT(t, h.cwd, "branch", "--list", empty.Branch); tip != "" {
		t.Fatalf("the empty change's branch is left: %s", tip)
	}
	for _, j := range []*worktreeJournal{changed, empty} {
		if _, err := os.Stat(j.Path); !os.IsNotExist(err) {
			t.Fatalf("worktree %s left: %v", j.Path, err)
		}
		if _, err := os.Stat(journalFile(h.acts.cfg.DataDir, j.Session)); !os.IsNotExist(err) {
			t.Fatalf("journal of %s left: %v", j.Session, err)
		}
	}
	if _, err := os.Stat(held.Path); err != nil {
		t.Fatalf("the held session's worktree was touched: %v", err)
	}
	lock.unlock()
	if n, err := SettleWorktrees(ctx, h.acts.cfg.DataDir, nil); err != nil || n != 1 {
		t.Fatalf("settled %d, %v once the lock is free; want 1", n, err)
	}
	if list := gitT(t, h.cwd, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Fatalf("worktrees left:\n%s", list)
	}
	if branches := gitT(t, h.cwd, "branch", "--list", BranchPrefix+"*", "--format=%(refname:short)"); branches != "subagents/changed\nsubagents/held" {
		t.Fatalf("branches: %q", branches)
	}
}

// TestPointSession: a session file whose header names another folder than
// a worktree run's cwd is pointed at it (pi runs a session in its header's
// cwd); a run without a worktree takes back a header that names one of
// this worker's worktrees and leaves any other.
func TestPointSession(t *testing.T) {
	h := newHarness(t, nil)
	wt := filepath.Join(worktreesDir(h.acts.cfg.DataDir), "s1")
	must(t, os.MkdirAll(wt, 0o755))
	other := t.TempDir()
	tests := []struct {
		name, header, cwd string
		worktree          bool
		want              string
	}{
		{"worktree run takes its cwd", h.cwd, wt, true, wt},
		{"worktree run already there", wt, wt, true, wt},
		{"plain run takes back a worktree's header", wt, h.cwd, false, h.cwd},
		{"plain run leaves another header", other, h.cwd, false, other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "s.jsonl")
			header := `{"type":"session","version":3,"id":"s1","timestamp":"2026-11-22T10:00:00.000Z","cwd":` + jsonString(tt.header) + `}`
			must(t, os.WriteFile(file, []byte(header+"\n"+lineUser+"\n"), 0o600))
			must(t, h.acts.pointSession(file, tt.cwd, tt.worktree))
			got, err := sessionHeaderCwd(file)
			if err != nil || got != tt.want {
				t.Fatalf("header cwd %q, %v; want %q", got, err, tt.want)
			}
			msgs, err := readMessages(file)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("the conversation changed: %v %v", msgs, err)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRunPiWorktreeGoesOnFromItsBase: a later run of a session whose
// change so far was empty (its branch gone) starts from the base its first
// run had (WorktreeSpec.Base, which the session keeps), not from the
// checkout, which the user has changed meanwhile: no WORKTREE_DIRTY.
func TestRunPiWorktreeGoesOnFromItsBase(t *testing.T) {
	h := newHarness(t, nil)
	h.initRepo(map[string]string{"a.txt": "a\n"})
	base := gitT(t, h.cwd, "rev-parse", "HEAD")
	h.model.Script("later", bashStep("cat a.txt > seen.txt"), finalizeStepT("went on"))
	// The user works on in the checkout while the session waits.
	h.write(map[string]string{"a.txt": "the user's edit\n"})
	in := h.worktreeInput("[[script:later]] Go on.")
	in.Worktree.Base = base
	res := h.mustRun(in)
	if res.Error != nil || res.Output != "went on" || res.Change == nil || res.Change.Base != base {
		t.Fatalf("result %+v change %+v", res.Error, res.Change)
	}
	if got := gitT(t, h.cwd, "show", res.Change.Branch+":seen.txt"); got != "a" {
		t.Fatalf("the child saw a.txt as %q, not as its base has it", got)
	}
}

// TestRunPiWorktreePartialIsMadeAgain: a journal that says its worktree
// was still being made (a worker that died while git checked it out) is
// not gone on from: the worktree is made again from its base, and the
// files git had not yet written are not taken for deletions.
func TestRunPiWorktreePartialIsMadeAgain(t *testing.T) {
	h := newHarness(t, nil)
	h.initRepo(map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	in := h.worktreeInput("[[script:partial]] Go on.")
	sessionFile := SessionFile(h.acts.cfg.DataDir, h.cwd, in.Agent, in.SessionID)
	j, err := h.acts.enterWorktree(context.Background(), in, sessionFile)
	if err != nil {
		t.Fatal(err)
	}
	// As a checkout cut short: a file missing, and the journal still partial.
	must(t, os.Remove(filepath.Join(j.cwd(), "b.txt")))
	j.Partial = true
	must(t, writeJournal(journalFile(h.acts.cfg.DataDir, in.SessionID), j))
	h.model.Script("partial", bashStep("echo c > c.txt"), finalizeStepT("done"))
	res := h.mustRun(in)
	if c := res.Change; c == nil || !slices.Equal(c.Files, []string{"c.txt"}) {
		t.Fatalf("change %+v: b.txt must not read as deleted", res.Change)
	}
	h.noWorktreeLeft(in.SessionID)
}
