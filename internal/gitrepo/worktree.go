package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Entry is one path of `git status`: its two-letter state (XY of the
// porcelain format; "??" for an untracked file) and its path from the
// checkout's top (the new one of a rename).
type Entry struct {
	State string
	Path  string
	// From is the old path of a rename or copy.
	From string
}

// Untracked reports whether e is a file git does not track.
func (e Entry) Untracked() bool { return e.State == "??" }

// Runtime reports whether e is pi's runtime state, which a checkout may
// hold untracked without being dirty: an untracked file in a .pi folder
// (pi and its extensions keep per-project state there).
func (e Entry) Runtime() bool {
	return e.Untracked() && (strings.HasPrefix(e.Path, ".pi/") || strings.Contains(e.Path, "/.pi/"))
}

// Status lists what differs in the checkout at dir from its HEAD:
// changed, staged and untracked files (each file of an untracked folder),
// ignored ones left out.
func Status(ctx context.Context, dir string) ([]Entry, error) {
	out, err := run(ctx, dir, nil, "status", "--porcelain=v1", "-z", "--untracked-files=all")
	if err != nil {
		return nil, err
	}
	return parseStatus(out), nil
}

// parseStatus reads `git status --porcelain=v1 -z`: "XY path\0", and for a
// rename or copy "XY new\0old\0".
func parseStatus(out []byte) []Entry {
	var entries []Entry
	fields := bytes.Split(out, []byte{0})
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		e := Entry{State: string(f[:2]), Path: string(f[3:])}
		if (f[0] == 'R' || f[0] == 'C') && i+1 < len(fields) {
			i++
			e.From = string(fields[i])
		}
		entries = append(entries, e)
	}
	return entries
}

// Dirty is what makes the checkout at top unfit as a worktree's source:
// every changed, staged or untracked path but pi's runtime state.
func Dirty(ctx context.Context, top string) ([]string, error) {
	entries, err := Status(ctx, top)
	if err != nil {
		return nil, err
	}
	var dirty []string
	for _, e := range entries {
		if !e.Runtime() {
			dirty = append(dirty, e.Path)
		}
	}
	return dirty, nil
}

// AddWorktree makes a worktree of the repository at top in path, on
// branch: the branch as it is when it exists, else a new branch at base.
func AddWorktree(ctx context.Context, top, path, branch, base string) error {
	tip, err := BranchTip(ctx, top, branch)
	if err != nil {
		return err
	}
	args := append(append([]string(nil), noHooks...), "worktree", "add", "--quiet")
	if tip == "" {
		args = append(args, "-b", branch, "--", path, base)
	} else {
		args = append(args, "--", path, branch)
	}
	_, err = run(ctx, top, nil, args...)
	return err
}

// Worktrees lists the folders of the repository's worktrees, its main
// checkout first.
func Worktrees(ctx context.Context, top string) ([]string, error) {
	out, err := run(ctx, top, nil, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if d, ok := bytes.CutPrefix(f, []byte("worktree ")); ok {
			dirs = append(dirs, string(d))
		}
	}
	return dirs, nil
}

// HasWorktree reports whether path is a worktree of the repository at top
// and is there.
func HasWorktree(ctx context.Context, top, path string) (bool, error) {
	if _, err := os.Stat(filepath.Join(path, ".git")); err != nil {
		return false, nil
	}
	dirs, err := Worktrees(ctx, top)
	if err != nil {
		return false, err
	}
	want := realPath(path)
	for _, d := range dirs {
		if realPath(d) == want {
			return true, nil
		}
	}
	return false, nil
}

// realPath is p with its links resolved, or p when it cannot be.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// RemoveWorktree removes the worktree in path, what git does not track in
// it too, and forgets it; a folder git does not know as a worktree is
// removed all the same.
func RemoveWorktree(ctx context.Context, top, path string) error {
	_, err := run(ctx, top, nil, "worktree", "remove", "--force", "--force", "--", path)
	if err != nil {
		if rerr := os.RemoveAll(path); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return Prune(ctx, top)
}

// Prune forgets the worktrees whose folders are gone.
func Prune(ctx context.Context, top string) error {
	_, err := run(ctx, top, nil, "worktree", "prune")
	return err
}

// Identity is who the commits of a capture are by.
type Identity struct{ Name, Email string }

// BaseTrailer and SessionTrailer are the trailers of a capture's commit:
// the commit the change is made on, and the session it is from. A later
// run of the session reads its base from the branch's tip (BaseOf).
const (
	BaseTrailer    = "Subagents-Base"
	SessionTrailer = "Subagents-Session"
)

// CommitAll commits everything that changed in the worktree at dir (but
// pi's runtime state) onto its branch, with message and the trailers that
// name base and session. It reports whether there was anything to commit.
func CommitAll(ctx context.Context, dir, message, base, session string, who Identity) (bool, error) {
	entries, err := Status(ctx, dir)
	if err != nil {
		return false, err
	}
	var paths bytes.Buffer
	for _, e := range entries {
		if e.Runtime() {
			continue
		}
		paths.WriteString(e.Path)
		paths.WriteByte(0)
		if e.From != "" {
			paths.WriteString(e.From)
			paths.WriteByte(0)
		}
	}
	staged := false
	if paths.Len() > 0 {
		// Literal pathspecs: a file named ":(glob)*" is that file.
		if _, err := run(ctx, dir, &paths, "--literal-pathspecs", "add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return false, err
		}
		if _, err := run(ctx, dir, nil, "diff", "--cached", "--quiet"); err == nil {
			staged = false
		} else if exitCode(err) != 1 {
			return false, err
		} else {
			staged = true
		}
	}
	args := append(append([]string(nil), noHooks...), "-c", "user.name="+who.Name, "-c", "user.email="+who.Email,
		"commit", "--quiet", "--no-verify", "--file=-")
	if !staged {
		// Nothing left to commit; but a child that committed its work
		// itself left commits without the trailers: an empty capture on
		// top keeps the base for the session's next run (BaseOf).
		head, err := run(ctx, dir, nil, "rev-parse", "HEAD")
		if err != nil {
			return false, err
		}
		if h := strings.TrimSpace(string(head)); h == base {
			return false, nil
		}
		if named, err := BaseOf(ctx, dir, "HEAD"); err != nil || named == base {
			return false, err
		}
		args = append(args, "--allow-empty")
	}
	msg := fmt.Sprintf("%s\n\n%s: %s\n%s: %s\n", message, BaseTrailer, base, SessionTrailer, session)
	if _, err := run(ctx, dir, strings.NewReader(msg), args...); err != nil {
		return false, err
	}
	return true, nil
}

// baseSearchDepth bounds how far back BaseOf looks for a capture: a
// session's branch holds a capture per run and the commits its child made
// itself, far fewer than this; a branch that has none within it has none.
const baseSearchDepth = 1000

// BaseOf is the base the latest capture commit at or before rev names
// (BaseTrailer), or "" when there is none: a child that committed on its
// own after its last capture leaves that capture below the branch's tip.
func BaseOf(ctx context.Context, top, rev string) (string, error) {
	out, err := run(ctx, top, nil, "log", fmt.Sprintf("--max-count=%d", baseSearchDepth),
		"--format=%(trailers:key="+BaseTrailer+",valueonly)%x1e", rev, "--")
	if err != nil {
		return "", err
	}
	for _, rec := range strings.Split(string(out), "\x1e") {
		if base := strings.TrimSpace(rec); base != "" {
			if i := strings.IndexByte(base, '\n'); i >= 0 {
				base = base[:i]
			}
			return base, nil
		}
	}
	return "", nil
}

// ChangedFiles are the files that differ between two commits.
func ChangedFiles(ctx context.Context, top, base, tip string) ([]string, error) {
	out, err := run(ctx, top, nil, "diff", "--name-only", "-z", "--no-renames", base, tip, "--")
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files, nil
}

// WritePatch writes the change from base to tip to file as a patch that
// `git apply` takes (binary files included), through a temporary file
// renamed into place: a crash leaves the old patch or the new one.
func WritePatch(ctx context.Context, top, base, tip, file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".patch-*")
	if err != nil {
		return err
	}
	err = runTo(ctx, top, nil, tmp, "diff", "--binary", "--full-index", "--no-renames", "--no-color", "--no-ext-diff", base, tip, "--")
	if err := errors.Join(err, tmp.Sync(), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return nil
}
