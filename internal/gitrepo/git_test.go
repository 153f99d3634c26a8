package gitrepo

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newRepo makes a git repository in a temporary folder with files
// committed, and returns its top folder (links resolved, as git names it).
func newRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	writeFiles(t, dir, files)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// git runs a git command of the test's own (with an identity) and returns
// its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestToplevel(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, map[string]string{"sub/a.txt": "a\n"})
	got, err := Toplevel(ctx, filepath.Join(top, "sub"))
	if err != nil || got != top {
		t.Fatalf("Toplevel(sub) = %q, %v; want %q", got, err, top)
	}
	if _, err := Toplevel(ctx, t.TempDir()); !errors.Is(err, ErrNotRepo) {
		t.Fatalf("Toplevel of a plain folder: %v, want ErrNotRepo", err)
	}
}

// TestGitLocationVarsIgnored: a worker started with GIT_DIR set (from a
// git hook) still works on the repository it names with -C.
func TestGitLocationVarsIgnored(t *testing.T) {
	top := newRepo(t, map[string]string{"a": "a\n"})
	other := newRepo(t, map[string]string{"b": "b\n"})
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	got, err := Toplevel(context.Background(), top)
	if err != nil || got != top {
		t.Fatalf("Toplevel with GIT_DIR of another repository = %q, %v", got, err)
	}
}

func TestDirty(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, top string)
		want  []string
	}{
		{"clean", func(*testing.T, string) {}, nil},
		{"changed", func(t *testing.T, top string) { writeFiles(t, top, map[string]string{"a.txt": "changed\n"}) }, []string{"a.txt"}},
		{"staged", func(t *testing.T, top string) {
			writeFiles(t, top, map[string]string{"a.txt": "staged\n"})
			git(t, top, "add", "a.txt")
		}, []string{"a.txt"}},
		{"untracked", func(t *testing.T, top string) { writeFiles(t, top, map[string]string{"new/b.txt": "b\n"}) }, []string{"new/b.txt"}},
		{"pi runtime state is not dirt", func(t *testing.T, top string) {
			writeFiles(t, top, map[string]string{".pi/subagents/state.json": "{}", "sub/.pi/x": "x"})
		}, nil},
		{"ignored is not dirt", func(t *testing.T, top string) {
			writeFiles(t, top, map[string]string{".git/info/exclude": "build/\n", "build/out.o": "o"})
		}, nil},
		{"deleted", func(t *testing.T, top string) { _ = os.Remove(filepath.Join(top, "a.txt")) }, []string{"a.txt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := newRepo(t, map[string]string{"a.txt": "a\n"})
			tt.setup(t, top)
			got, err := Dirty(context.Background(), top)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Dirty = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResolveCommit(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, map[string]string{"a": "1\n"})
	head := git(t, top, "rev-parse", "HEAD")
	git(t, top, "tag", "v1")
	git(t, top, "branch", "release")
	writeFiles(t, top, map[string]string{"a": "2\n"})
	git(t, top, "commit", "-q", "-am", "second")
	tests := []struct {
		ref, want string
		ok        bool
	}{
		{"HEAD", git(t, top, "rev-parse", "HEAD"), true},
		{"v1", head, true},
		{"refs/heads/release", head, true},
		{"release", head, true},
		{head, head, true},
		{"HEAD~1", head, true},
		{"nope", "", false},
		{"--output=/tmp/x", "", false},
		{"a b", "", false},
		{"main..release", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, err := ResolveCommit(ctx, top, tt.ref)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ResolveCommit(%q) = %q, %v; want %q ok=%v", tt.ref, got, err, tt.want, tt.ok)
		}
	}
}

// TestWorktreeCapture makes a worktree on a new branch, changes files in
// it as a child would (an edit, a new file, a deletion, pi's runtime
// state), commits them, and reads the change back: the branch holds it,
// the patch applies to the base, the runtime state stays out.
func TestWorktreeCapture(t *testing.T) {
	ctx := context.Background()
	top, base, wt := newWorktree(t, "subagents/s1", map[string]string{"a.txt": "a\n", "gone.txt": "bye\n", "dir/c.txt": "c\n"})
	if ok, err := HasWorktree(ctx, top, wt); err != nil || !ok {
		t.Fatalf("HasWorktree = %v, %v", ok, err)
	}
	writeFiles(t, wt, map[string]string{"a.txt": "a changed\n", "new.txt": "new\n", ".pi/state": "runtime"})
	if err := os.Remove(filepath.Join(wt, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	captured, err := Capture(ctx, wt, "subagents/s1", "subagents: s1", base, "s1", Identity{Name: "subagents", Email: "subagents@localhost"})
	if err != nil || !captured.Committed {
		t.Fatalf("Capture = %+v, %v", captured, err)
	}
	tip, err := BranchTip(ctx, top, "subagents/s1")
	if err != nil || tip == base || tip == "" {
		t.Fatalf("branch tip %q, %v", tip, err)
	}
	if got, err := BaseOf(ctx, top, tip); err != nil || got != base {
		t.Fatalf("BaseOf = %q, %v; want %q", got, err, base)
	}
	// A commit the child made itself on top of the capture: the base is
	// still the capture's; before any capture there is none.
	writeFiles(t, wt, map[string]string{"own.txt": "own\n"})
	git(t, wt, "add", "own.txt")
	git(t, wt, "-c", "user.name=child", "-c", "user.email=c@c", "commit", "-q", "-m", "the child's own commit")
	if got, err := BaseOf(ctx, top, git(t, wt, "rev-parse", "HEAD")); err != nil || got != base {
		t.Fatalf("BaseOf above a child's own commit = %q, %v; want %q", got, err, base)
	}
	if got, err := BaseOf(ctx, top, base); err != nil || got != "" {
		t.Fatalf("BaseOf before any capture = %q, %v", got, err)
	}
	git(t, wt, "reset", "-q", "--hard", "HEAD~1")
	files, err := ChangedFiles(ctx, top, base, tip)
	if err != nil || !slices.Equal(files, []string{"a.txt", "gone.txt", "new.txt"}) {
		t.Fatalf("ChangedFiles = %q, %v", files, err)
	}
	patch := filepath.Join(t.TempDir(), "changes", "s1.patch")
	if err := WritePatch(ctx, top, base, tip, patch); err != nil {
		t.Fatal(err)
	}
	// Nothing more to commit: a second capture is a no-op.
	if captured, err := Capture(ctx, wt, "subagents/s1", "again", base, "s1", Identity{Name: "x", Email: "x@y"}); err != nil || captured.Committed {
		t.Fatalf("second Capture = %+v, %v", captured, err)
	}
	if err := RemoveWorktree(ctx, top, wt); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("worktree folder still there: %v", err)
	}
	if dirs, err := Worktrees(ctx, top); err != nil || len(dirs) != 1 {
		t.Fatalf("worktrees after removal: %q, %v", dirs, err)
	}
	// The patch is what `git apply` takes, on the base.
	git(t, top, "apply", "--check", patch)
	// The branch survives its worktree; a second worktree continues it.
	if err := AddWorktree(ctx, top, wt, "subagents/s1", base); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "a.txt")); err != nil || string(b) != "a changed\n" {
		t.Fatalf("continued worktree's a.txt = %q, %v", b, err)
	}
	if err := RemoveWorktree(ctx, top, wt); err != nil {
		t.Fatal(err)
	}
	if err := DeleteBranch(ctx, top, "subagents/s1"); err != nil {
		t.Fatal(err)
	}
	if tip, err := BranchTip(ctx, top, "subagents/s1"); err != nil || tip != "" {
		t.Fatalf("deleted branch tip %q, %v", tip, err)
	}
	if err := DeleteBranch(ctx, top, "subagents/s1"); err != nil {
		t.Fatalf("deleting a missing branch: %v", err)
	}
}

// TestRemoveWorktreeOfAFolderGitForgot: a folder left where git no longer
// knows a worktree (its .git file broken) is removed all the same.
func TestRemoveWorktreeOfAFolderGitForgot(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, map[string]string{"a": "a\n"})
	wt := filepath.Join(t.TempDir(), "wt")
	writeFiles(t, wt, map[string]string{"stray.txt": "x"})
	if ok, _ := HasWorktree(ctx, top, wt); ok {
		t.Fatal("a plain folder is no worktree")
	}
	if err := RemoveWorktree(ctx, top, wt); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("folder still there: %v", err)
	}
}

// TestCaptureAfterTheChildsOwnCommit: a child that committed its work
// itself leaves nothing to commit; the capture is then an empty commit with
// the trailers, so the branch still names its base, and the change holds
// the child's commit. With nothing new since a capture, there is none.
func TestCaptureAfterTheChildsOwnCommit(t *testing.T) {
	ctx := context.Background()
	top, base, wt := newWorktree(t, "subagents/s2", map[string]string{"a.txt": "a\n"})
	writeFiles(t, wt, map[string]string{"own.txt": "own\n"})
	git(t, wt, "add", "own.txt")
	git(t, wt, "-c", "user.name=child", "-c", "user.email=c@c", "commit", "-q", "-m", "the child's own commit")
	who := Identity{Name: "subagents", Email: "subagents@localhost"}
	if captured, err := Capture(ctx, wt, "subagents/s2", "subagents: s2", base, "s2", who); err != nil || !captured.Committed {
		t.Fatalf("Capture = %+v, %v", captured, err)
	}
	tip := git(t, wt, "rev-parse", "HEAD")
	if got, err := BaseOf(ctx, top, tip); err != nil || got != base {
		t.Fatalf("BaseOf = %q, %v; want %q", got, err, base)
	}
	if files, err := ChangedFiles(ctx, top, base, tip); err != nil || !slices.Equal(files, []string{"own.txt"}) {
		t.Fatalf("ChangedFiles = %q, %v", files, err)
	}
	if captured, err := Capture(ctx, wt, "subagents/s2", "subagents: s2", base, "s2", who); err != nil || captured.Committed {
		t.Fatalf("a second capture = %+v, %v", captured, err)
	}
}
