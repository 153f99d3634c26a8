package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What a hostile child can do to a capture and an apply: paths git
// refuses, index tricks, its own commits, and the repository's own code.

func TestUnsafePath(t *testing.T) {
	tests := []struct {
		path string
		link bool
		// want is part of the reason, "" for a path that may be written.
		want string
	}{
		{path: "a.txt"},
		{path: "dir/sub/a.txt"},
		{path: ".gitignore"},
		{path: ".gitattributes"},
		{path: ".github/workflows/ci.yml"},
		{path: "a/.gitkeep"},
		{path: "git~2"},
		{path: "x.git"},
		{path: ".gitx"},
		{path: "..a"},
		{path: "a..b"},
		{path: ".pi/state"},
		{path: `a\b.txt`},
		{path: ".gitmodules"},
		{path: "dir/.gitmodules"},
		{path: ".gitmodules", link: true, want: ".gitmodules"},
		{path: "d/.GITMODULES", link: true, want: ".gitmodules"},
		{path: "GITMOD~1", link: true, want: ".gitmodules"},
		{path: ".gitmodules ", link: true, want: ".gitmodules"},
		{path: "", want: "empty path"},
		{path: "/etc/passwd", want: "absolute"},
		{path: "../pwn-outside.txt", want: "a .. part"},
		{path: "a/../../b", want: "a .. part"},
		{path: "..", want: "a .. part"},
		{path: "./a", want: "a . part"},
		{path: "a//b", want: "empty part"},
		{path: "a/", want: "empty part"},
		{path: ".git", want: ".git part"},
		{path: ".git/hooks/post-merge", want: ".git part"},
		{path: "sub/.git/config", want: ".git part"},
		{path: ".GIT/config", want: ".git part"},
		{path: ".Git/config", want: ".git part"},
		{path: ".gIt", want: ".git part"},
		// NTFS drops trailing dots and spaces, reads an 8.3 short name
		// and a stream after a colon.
		{path: "git~1/config", want: ".git part"},
		{path: "GIT~1", want: ".git part"},
		{path: ".git./hooks/x", want: ".git part"},
		{path: ".git /config", want: ".git part"},
		{path: ".git. . /config", want: ".git part"},
		{path: ".git::$INDEX_ALLOCATION/config", want: ".git part"},
		{path: "git~1 ./x", want: ".git part"},
		{path: `a\.git\config`, want: ".git part"},
		{path: `.git\config`, want: ".git part"},
		// HFS+ ignores these code points in a name.
		{path: ".g\u200cit/config", want: ".git part"},
		{path: "\u200d.git/hooks/x", want: ".git part"},
		{path: ".gi\u200et", want: ".git part"},
		{path: ".GIT\ufeff/x", want: ".git part"},
		{path: ".g\u202ait\u206f", want: ".git part"},
		{path: ".g\u00e9it"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q link=%v", tt.path, tt.link), func(t *testing.T) {
			got := UnsafePath(tt.path, tt.link)
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("UnsafePath(%q, %v) = %q, want %q", tt.path, tt.link, got, tt.want)
			}
		})
	}
}

// hostileCommit makes, in the worktree wt, a commit on HEAD whose tree
// adds the file name (with mode) to HEAD's tree by hand, as git's own
// commands refuse to: git mktree takes any name.
func hostileCommit(t *testing.T, wt, name, mode string) {
	t.Helper()
	blob := gitIn(t, wt, "pwned\n", "hash-object", "-w", "--stdin")
	parts := strings.Split(name, "/")
	entry := fmt.Sprintf("%s blob %s\t%s\n", mode, blob, parts[len(parts)-1])
	for i := len(parts) - 2; i >= 0; i-- {
		tree := gitIn(t, wt, entry, "mktree")
		entry = fmt.Sprintf("040000 tree %s\t%s\n", tree, parts[i])
	}
	head := gitIn(t, wt, "", "ls-tree", "HEAD")
	tree := gitIn(t, wt, head+"\n"+entry, "mktree")
	commit := gitIn(t, wt, "the child's own commit", "commit-tree", tree, "-p", "HEAD")
	git(t, wt, "update-ref", "HEAD", commit)
}

// newWorktree makes a repository with files committed and a worktree of
// it on a new branch at its HEAD: the repository's top, the base commit
// and the worktree's folder.
func newWorktree(t *testing.T, branch string, files map[string]string) (top, base, wt string) {
	t.Helper()
	top = newRepo(t, files)
	base = git(t, top, "rev-parse", "HEAD")
	wt = filepath.Join(t.TempDir(), "wt")
	if err := AddWorktree(context.Background(), top, wt, branch, base); err != nil {
		t.Fatal(err)
	}
	return top, base, wt
}

// gitIn runs a git command of the test's with stdin.
func gitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	out, err := run(context.Background(), dir, strings.NewReader(stdin),
		append([]string{"-c", "user.name=child", "-c", "user.email=c@c"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestCaptureWhatTheChildDid: staged deletions (git rm), renames (git mv),
// a mode change, an unstaged edit, the child's own commit and untracked
// files are all captured; pi's untracked runtime state is not.
func TestCaptureWhatTheChildDid(t *testing.T) {
	ctx := context.Background()
	top, base, wt := newWorktree(t, "subagents/s", map[string]string{"old.txt": "old\n", "x.txt": "x\n", "run.sh": "echo\n", "edit.txt": "e\n", ".pi/tracked": "t\n"})
	git(t, wt, "rm", "-q", "old.txt")
	git(t, wt, "mv", "x.txt", "y.txt")
	if err := os.Chmod(filepath.Join(wt, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, wt, map[string]string{"own.txt": "own\n"})
	git(t, wt, "add", "own.txt")
	git(t, wt, "commit", "-q", "-m", "the child's own commit")
	writeFiles(t, wt, map[string]string{"edit.txt": "edited\n", "new/n.txt": "n\n", ".pi/runtime": "r\n", ".pi/tracked": "changed\n"})
	captured, err := Capture(ctx, wt, "subagents/s", "capture", base, "s", CaptureIdentity)
	if err != nil || !captured.Committed || len(captured.Refused) > 0 {
		t.Fatalf("Capture = %+v, %v", captured, err)
	}
	tip, _ := BranchTip(ctx, top, "subagents/s")
	if tip != captured.Commit {
		t.Fatalf("branch at %s, capture %s", tip, captured.Commit)
	}
	files, err := ChangedFiles(ctx, top, base, tip)
	want := []string{".pi/tracked", "edit.txt", "new/n.txt", "old.txt", "own.txt", "run.sh", "x.txt", "y.txt"}
	if err != nil || !slices.Equal(files, want) {
		t.Fatalf("ChangedFiles = %q, %v; want %q", files, err, want)
	}
	if mode := git(t, top, "ls-tree", tip, "run.sh"); !strings.HasPrefix(mode, "100755") {
		t.Fatalf("run.sh on the branch: %s", mode)
	}
	// The worktree's index is the capture's: nothing left to commit.
	if st := git(t, wt, "status", "--porcelain"); st != "?? .pi/runtime" {
		t.Fatalf("status after the capture: %q", st)
	}
}

// captureOnto captures the worktree wt onto the branch subagents/s and
// returns what it did and the paths it refused.
func captureOnto(t *testing.T, wt, base string) (Captured, []string) {
	t.Helper()
	captured, err := Capture(context.Background(), wt, "subagents/s", "capture", base, "s", CaptureIdentity)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, r := range captured.Refused {
		refused = append(refused, r.Path)
	}
	return captured, refused
}

// TestCaptureRefusesPathsGitRefuses: a child's own commit that names
// ../pwn-outside.txt or .git/hooks/post-merge, and untracked files with
// names git refuses, are left out of the capture and named; the rest of
// the change is captured, and the branch's tip holds none of them.
func TestCaptureRefusesPathsGitRefuses(t *testing.T) {
	ctx := context.Background()
	top, base, wt := newWorktree(t, "subagents/s", map[string]string{"a.txt": "a\n"})
	hostileCommit(t, wt, "../pwn-outside.txt", "100644")
	hostileCommit(t, wt, ".git/hooks/post-merge", "100755")
	writeFiles(t, wt, map[string]string{"a.txt": "changed\n", "GIT~1": "x\n", ".git. /y": "y\n"})
	captured, refused := captureOnto(t, wt, base)
	slices.Sort(refused)
	if want := []string{"../pwn-outside.txt", ".git. /y", ".git/hooks/post-merge", "GIT~1"}; !slices.Equal(refused, want) {
		t.Fatalf("refused %q, want %q", refused, want)
	}
	files, err := ChangedFiles(ctx, top, base, captured.Commit)
	if err != nil || !slices.Equal(files, []string{"a.txt"}) {
		t.Fatalf("ChangedFiles = %q, %v", files, err)
	}
}

// TestCaptureIdentity: the capture is by the documented identity whatever
// the worker's GIT_AUTHOR_* and GIT_COMMITTER_* say.
func TestCaptureIdentity(t *testing.T) {
	ctx := context.Background()
	top, base, wt := newWorktree(t, "subagents/s", map[string]string{"a.txt": "a\n"})
	writeFiles(t, wt, map[string]string{"a.txt": "b\n"})
	for _, v := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(v, "Worker Env")
	}
	for _, v := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(v, "env@example.com")
	}
	captured, err := Capture(ctx, wt, "subagents/s", "capture", base, "s", CaptureIdentity)
	if err != nil {
		t.Fatal(err)
	}
	if who := git(t, top, "log", "-1", "--format=%an <%ae> %cn <%ce>", captured.Commit); who != "subagents <subagents@localhost> subagents <subagents@localhost>" {
		t.Fatalf("the capture is by %s", who)
	}
}

// TestCaptureAfterHEADMoved: a child that detached HEAD and committed
// there has its commit on the branch, and HEAD back on the branch.
func TestCaptureAfterHEADMoved(t *testing.T) {
	ctx := context.Background()
	top, base, wt := newWorktree(t, "subagents/s", map[string]string{"a.txt": "a\n"})
	git(t, wt, "checkout", "-q", "--detach")
	writeFiles(t, wt, map[string]string{"d.txt": "detached\n"})
	git(t, wt, "add", "d.txt")
	git(t, wt, "commit", "-q", "-m", "detached")
	captured, err := Capture(ctx, wt, "subagents/s", "capture", base, "s", CaptureIdentity)
	if err != nil || !captured.Committed {
		t.Fatalf("Capture = %+v, %v", captured, err)
	}
	if files, err := ChangedFiles(ctx, top, base, "subagents/s"); err != nil || !slices.Equal(files, []string{"d.txt"}) {
		t.Fatalf("the branch's change: %q, %v", files, err)
	}
	if at := git(t, wt, "symbolic-ref", "HEAD"); at != "refs/heads/subagents/s" {
		t.Fatalf("HEAD is %s", at)
	}
}

// TestApplyChangeRefusesUnsafePaths: a change whose commits name a path
// outside the checkout or in its .git folder is refused whole: nothing is
// written, there or anywhere.
func TestApplyChangeRefusesUnsafePaths(t *testing.T) {
	for _, name := range []string{"../pwn-outside.txt", ".git/hooks/post-merge", ".GIT/x", "git~1/config", "a/.git /config"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			top, base, wt := newWorktree(t, "task", map[string]string{"a.txt": "a\n"})
			writeFiles(t, wt, map[string]string{"a.txt": "changed\n"})
			git(t, wt, "commit", "-q", "-am", "clean")
			hostileCommit(t, wt, name, "100755")
			res, err := ApplyChange(ctx, top, base, git(t, wt, "rev-parse", "HEAD"))
			if err != nil || len(res.Refused) != 1 || res.Refused[0].Path != name || len(res.Files) > 0 {
				t.Fatalf("ApplyChange = %+v, %v", res, err)
			}
			if got := read(t, filepath.Join(top, "a.txt")); got != "a\n" {
				t.Fatalf("a.txt = %q after a refused apply", got)
			}
			for _, p := range []string{filepath.Join(top, "..", "pwn-outside.txt"), filepath.Join(top, ".git", "hooks", "post-merge")} {
				if _, err := os.Lstat(p); err == nil {
					t.Fatalf("%s was written", p)
				}
			}
		})
	}
}

// TestApplyChangeNamesLinksOutside: links the change writes that point
// outside the checkout or into .git are named; one inside is not.
func TestApplyChangeNamesLinksOutside(t *testing.T) {
	top := newRepo(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	base, tip := change(t, top, func(wt string) {
		for link, target := range map[string]string{"in": "a.txt", "d/up": "../a.txt", "abs": "/etc/passwd", "d/out": "../../x", "cfg": ".git/config"} {
			if err := os.Symlink(target, filepath.Join(wt, link)); err != nil {
				t.Fatal(err)
			}
		}
	})
	res, err := ApplyChange(context.Background(), top, base, tip)
	if err != nil || len(res.Files) != 5 {
		t.Fatalf("ApplyChange = %+v, %v", res, err)
	}
	var named []string
	for _, l := range res.OutsideLinks {
		named = append(named, l.String())
	}
	if want := []string{"abs -> /etc/passwd", "cfg -> .git/config", "d/out -> ../../x"}; !slices.Equal(named, want) {
		t.Fatalf("outside links %q, want %q", named, want)
	}
}

// TestNoRepositoryCode: the repository's fsmonitor, hooks and filter
// drivers do not run for the git commands of a worktree's life: the
// dirty check, making it, capturing, writing the patch, applying.
func TestNoRepositoryCode(t *testing.T) {
	ctx := context.Background()
	top := newRepo(t, map[string]string{"a.txt": "a\n", ".gitattributes": "*.txt filter=evil diff=evil\n"})
	marks := t.TempDir()
	script := filepath.Join(marks, "run.sh")
	writeFiles(t, marks, map[string]string{"run.sh": "#!/bin/sh\ntouch " + marks + "/ran-$1\ncat\n"})
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	for key, what := range map[string]string{"core.fsmonitor": "fsmonitor", "filter.evil.clean": "clean", "filter.evil.smudge": "smudge",
		"diff.evil.textconv": "textconv", "diff.evil.command": "diffcommand", "core.hooksPath": "hooks"} {
		git(t, top, "config", key, script+" "+what)
	}
	writeFiles(t, top, map[string]string{".git/hooks/post-checkout": "#!/bin/sh\ntouch " + marks + "/ran-hook\n"})
	if err := os.Chmod(filepath.Join(top, ".git/hooks/post-checkout"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Dirty(ctx, top); err != nil {
		t.Fatal(err)
	}
	base := git(t, top, "rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "wt")
	if err := AddWorktree(ctx, top, wt, "subagents/s", base); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, wt, map[string]string{"a.txt": "changed\n"})
	captured, err := Capture(ctx, wt, "subagents/s", "capture", base, "s", CaptureIdentity)
	if err != nil {
		t.Fatal(err)
	}
	if err := WritePatch(ctx, top, base, captured.Commit, filepath.Join(marks, "p", "s.patch")); err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyChange(ctx, top, base, captured.Commit); err != nil {
		t.Fatal(err)
	}
	ran, _ := filepath.Glob(filepath.Join(marks, "ran-*"))
	if len(ran) > 0 {
		t.Fatalf("the repository's code ran: %q", ran)
	}
}

// handMadeTree commits on top's HEAD, by hand (git mktree takes a name
// twice, git's own commands do not), HEAD's tree with entries added:
// lines "<mode> <type> <object>\t<name>" of the top folder.
func handMadeTree(t *testing.T, top string, entries ...string) string {
	t.Helper()
	head := gitIn(t, top, "", "ls-tree", "HEAD")
	tree := gitIn(t, top, head+"\n"+strings.Join(entries, "\n")+"\n", "mktree")
	return gitIn(t, top, "hand-made", "commit-tree", tree, "-p", "HEAD")
}

// TestApplyChangeNeverWritesThroughItsOwnLinks: a change that writes a
// link (or a file) and a path below it, as only a hand-made tree holds,
// is refused whole; nothing is written through the link, outside the
// checkout. A change that turns a file into a folder still applies.
func TestApplyChangeNeverWritesThroughItsOwnLinks(t *testing.T) {
	tests := []struct {
		name string
		// entries are the tree's added lines, given the blob of the
		// link's target and the tree holding authorized_keys.
		entries func(target, sub string) []string
		refused string
	}{
		{name: "a link and a folder of the same name", refused: "d/authorized_keys",
			entries: func(target, sub string) []string {
				return []string{"120000 blob " + target + "\td", "040000 tree " + sub + "\td"}
			}},
		{name: "a file and a folder of the same name", refused: "d/authorized_keys",
			entries: func(target, sub string) []string {
				return []string{"100644 blob " + target + "\td", "040000 tree " + sub + "\td"}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := newRepo(t, map[string]string{"a.txt": "a\n"})
			base := git(t, top, "rev-parse", "HEAD")
			outside := t.TempDir()
			target := gitIn(t, top, outside, "hash-object", "-w", "--stdin")
			key := gitIn(t, top, "ssh-ed25519 AAAA child\n", "hash-object", "-w", "--stdin")
			sub := gitIn(t, top, "100644 blob "+key+"\tauthorized_keys\n", "mktree")
			tip := handMadeTree(t, top, tt.entries(target, sub)...)
			res, err := ApplyChange(context.Background(), top, base, tip)
			if err != nil || len(res.Refused) != 1 || res.Refused[0].Path != tt.refused || len(res.Files) > 0 {
				t.Fatalf("ApplyChange = %+v, %v", res, err)
			}
			if _, err := os.Lstat(filepath.Join(outside, "authorized_keys")); err == nil {
				t.Fatal("authorized_keys was written outside the checkout")
			}
			if _, err := os.Lstat(filepath.Join(top, "d")); err == nil {
				t.Fatal("d was written by a refused change")
			}
		})
	}
	t.Run("a file becomes a folder", func(t *testing.T) {
		top := newRepo(t, map[string]string{"d": "file\n"})
		base, tip := change(t, top, func(wt string) {
			if err := os.Remove(filepath.Join(wt, "d")); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, wt, map[string]string{"d/k": "k\n"})
		})
		res, err := ApplyChange(context.Background(), top, base, tip)
		if err != nil || len(res.Refused) > 0 || len(res.Conflicts) > 0 || read(t, filepath.Join(top, "d", "k")) != "k\n" {
			t.Fatalf("ApplyChange = %+v, %v", res, err)
		}
	})
}

// TestWriteChecksItsWayAgain: a folder on a write's way that became a
// link (or a file) after the change was planned fails the write; nothing
// is written or deleted through it.
func TestWriteChecksItsWayAgain(t *testing.T) {
	tests := []struct {
		name string
		op   fileOp
		way  string
	}{
		{name: "a file written", op: fileOp{path: "d/k", content: []byte("k\n"), mode: 0o644}, way: "d on its way is a symbolic link"},
		{name: "a link written", op: fileOp{path: "d/e/k", content: []byte("/etc"), link: true}, way: "d on its way is a symbolic link"},
		{name: "a file removed", op: fileOp{path: "d/k", remove: true}, way: "d on its way is a symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top, outside := t.TempDir(), t.TempDir()
			writeFiles(t, outside, map[string]string{"k": "theirs\n", "e/k": "theirs\n"})
			if err := os.Symlink(outside, filepath.Join(top, "d")); err != nil {
				t.Fatal(err)
			}
			err := write(top, tt.op)
			if err == nil || !strings.Contains(err.Error(), tt.way) {
				t.Fatalf("write = %v, want %q", err, tt.way)
			}
			if got := read(t, filepath.Join(outside, "k")); got != "theirs\n" {
				t.Fatalf("the file outside the checkout is %q", got)
			}
			if target, err := os.Readlink(filepath.Join(outside, "e", "k")); err == nil {
				t.Fatalf("a link was written outside the checkout, to %s", target)
			}
		})
	}
}

// TestPointsOutsideFollowsTheCheckoutsLinks: a link is judged where the
// system takes it: through the checkout's own links (vendor -> /opt/x
// makes "vendor/.." the folder above /opt/x) and from the checkout's real
// folder when the checkout is reached through a link.
func TestPointsOutsideFollowsTheCheckoutsLinks(t *testing.T) {
	real := t.TempDir()
	opt := filepath.Join(t.TempDir(), "x")
	writeFiles(t, real, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n", "inner/c.txt": "c\n"})
	writeFiles(t, opt, map[string]string{"lib.txt": "l\n"})
	if err := os.Symlink(opt, filepath.Join(real, "vendor")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("inner", filepath.Join(real, "in")); err != nil {
		t.Fatal(err)
	}
	// The checkout reached through a link of its own.
	top := filepath.Join(t.TempDir(), "top")
	if err := os.Symlink(real, top); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path, target string
		outside      bool
	}{
		{path: "v", target: "vendor/..", outside: true},
		{path: "v", target: "vendor/../../etc", outside: true},
		{path: "v", target: "vendor", outside: true},
		{path: "sub/v", target: "../vendor/lib.txt", outside: true},
		{path: "v", target: "in/../a.txt"},
		{path: "sub/v", target: "../in/c.txt"},
		{path: "v", target: "a.txt"},
		{path: "v", target: "not-there-yet/x"},
		{path: "v", target: real + "/a.txt"},
		{path: "v", target: top + "/a.txt"},
		{path: "v", target: "../escape", outside: true},
		{path: "v", target: "in/../.git/config", outside: true},
	}
	for _, tt := range tests {
		t.Run(tt.path+" -> "+tt.target, func(t *testing.T) {
			if got := pointsOutside(top, tt.path, tt.target); got != tt.outside {
				t.Fatalf("pointsOutside(%s -> %s) = %v, want %v", tt.path, tt.target, got, tt.outside)
			}
		})
	}
}

// TestCaptureLeavesOutGitmodulesLinks: a link named .gitmodules (in any
// of git's spellings), new or made of a tracked file, is left out of the
// capture and named, and the rest is captured: the branch applies, so one
// bad link does not block the child's other work. A plain .gitmodules
// file is captured as any file.
func TestCaptureLeavesOutGitmodulesLinks(t *testing.T) {
	tests := []struct {
		name    string
		tracked map[string]string
		// links are the links the child makes (path: target), files the
		// files it writes.
		links   map[string]string
		files   map[string]string
		refused []string
		changed []string
	}{
		{name: "a new link", links: map[string]string{".gitmodules": "/etc/passwd"},
			refused: []string{".gitmodules"}, changed: []string{"work.txt"}},
		{name: "a new link in a folder, another spelling", links: map[string]string{"sub/.GITMODULES": "../a.txt"},
			refused: []string{"sub/.GITMODULES"}, changed: []string{"work.txt"}},
		{name: "a tracked file made a link", tracked: map[string]string{".gitmodules": "[submodule]\n"},
			links: map[string]string{".gitmodules": "a.txt"}, refused: []string{".gitmodules"}, changed: []string{"work.txt"}},
		{name: "a plain file", files: map[string]string{".gitmodules": "[submodule]\n"},
			changed: []string{".gitmodules", "work.txt"}},
		{name: "a link of another name", links: map[string]string{"gitmodules": "a.txt"},
			changed: []string{"gitmodules", "work.txt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			files := map[string]string{"a.txt": "a\n"}
			for p, c := range tt.tracked {
				files[p] = c
			}
			top, base, wt := newWorktree(t, "subagents/s", files)
			writeFiles(t, wt, map[string]string{"work.txt": "work\n"})
			writeFiles(t, wt, tt.files)
			for link, target := range tt.links {
				p := filepath.Join(wt, link)
				_ = os.Remove(p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			captured, refused := captureOnto(t, wt, base)
			if !slices.Equal(refused, tt.refused) {
				t.Fatalf("refused %q, want %q", refused, tt.refused)
			}
			changed, err := ChangedFiles(ctx, top, base, captured.Commit)
			if err != nil || !slices.Equal(changed, tt.changed) {
				t.Fatalf("ChangedFiles = %q, %v; want %q", changed, err, tt.changed)
			}
			res, err := ApplyChange(ctx, top, base, captured.Commit)
			if err != nil || len(res.Refused) > 0 || len(res.Conflicts) > 0 || read(t, filepath.Join(top, "work.txt")) != "work\n" {
				t.Fatalf("ApplyChange = %+v, %v", res, err)
			}
		})
	}
}
