package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	opts, err := guards(ctx, dir)
	if err != nil {
		return nil, err
	}
	out, err := run(ctx, dir, nil, append(opts, "status", "--porcelain=v1", "-z", "--untracked-files=all")...)
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
	opts, err := guards(ctx, top)
	if err != nil {
		return err
	}
	args := append(opts, "worktree", "add", "--quiet")
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
	return worktreeAt(ctx, top, path, 0)
}

// LinkedWorktree reports whether path is a worktree of the repository at
// top other than its main checkout, and is there: one that may be removed.
func LinkedWorktree(ctx context.Context, top, path string) (bool, error) {
	return worktreeAt(ctx, top, path, 1)
}

// worktreeAt reports whether path is there and one of the repository's
// worktrees after the first skip (the main checkout is the first).
func worktreeAt(ctx context.Context, top, path string, skip int) (bool, error) {
	if _, err := os.Stat(filepath.Join(path, ".git")); err != nil {
		return false, nil
	}
	dirs, err := Worktrees(ctx, top)
	if err != nil {
		return false, err
	}
	want := realPath(path)
	for _, d := range dirs[min(skip, len(dirs)):] {
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

// CaptureIdentity is who every capture is by (docs/worktrees.md): the
// branch is the worker's, and a commit must not fail for want of a
// user.email.
var CaptureIdentity = Identity{Name: "subagents", Email: "subagents@localhost"}

// BaseTrailer and SessionTrailer are the trailers of a capture's commit:
// the commit the change is made on, and the session it is from. A later
// run of the session reads its base from the branch's tip (BaseOf).
const (
	BaseTrailer    = "Subagents-Base"
	SessionTrailer = "Subagents-Session"
)

// Captured is what Capture did.
type Captured struct {
	// Commit is the branch's tip after the capture.
	Commit string
	// Committed is true when the capture made a commit.
	Committed bool
	// Refused are the paths left out of the capture (UnsafePath).
	Refused []Refusal
}

// Refusal is a path left out of a change, and why.
type Refusal struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

func (r Refusal) String() string { return r.Path + " (" + r.Why + ")" }

// Capture commits the worktree at dir (its top folder) as its files are
// onto branch, with message and the trailers that name base and session,
// by who whatever the environment's GIT_AUTHOR_* and GIT_COMMITTER_* say.
//
// The child that worked there controls the worktree's index, HEAD and
// commits, so none of them is trusted as it is: the commit's tree is
// built in an index of its own, from HEAD's tree with every path git
// refuses (UnsafePath) left out, then the files of the worktree over it:
// what the child deleted, renamed, staged or not, made executable, and
// every untracked file but pi's runtime state (an untracked file in a .pi
// folder) and names git refuses, a link named .gitmodules among them (a
// tracked file the child made one stays as HEAD has it). Its parent is
// HEAD's commit, so the child's own commits are part of the change; the
// branch is set to it even when the child moved HEAD elsewhere, and HEAD
// back to the branch.
// Nothing to commit (but the child's commits, which then get an empty
// capture on top: a later run reads the base from the branch, BaseOf)
// makes no commit.
func Capture(ctx context.Context, dir, branch, message, base, session string, who Identity) (Captured, error) {
	var c Captured
	opts, err := guards(ctx, dir)
	if err != nil {
		return c, err
	}
	head, err := revParse(ctx, dir, "HEAD^{commit}")
	if err != nil {
		return c, err
	}
	old, err := BranchTip(ctx, dir, branch)
	if err != nil {
		return c, err
	}
	index, err := gitPath(ctx, dir, "index")
	if err != nil {
		return c, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(index), "index.subagents-*")
	if err != nil {
		return c, err
	}
	// Git writes the index itself: an empty file would read as a broken one.
	_ = tmp.Close()
	_ = os.Remove(tmp.Name())
	defer func() { _ = os.Remove(tmp.Name()) }()
	inIndex := append([]string{"GIT_INDEX_FILE=" + tmp.Name()}, who.env()...)
	// Every command that reads the index may run a filter (a file whose
	// stat changed is cleaned to compare it).
	git := func(stdin io.Reader, w io.Writer, args ...string) error {
		return runEnv(ctx, dir, inIndex, stdin, w, append(slices.Clone(opts), args...)...)
	}
	if c.Refused, err = readTreeSafely(ctx, dir, git, head); err != nil {
		return c, err
	}
	var others, tracked bytes.Buffer
	if err := git(nil, &others, "ls-files", "-z", "--others", "--exclude-standard"); err != nil {
		return c, err
	}
	if err := git(nil, &tracked, "ls-files", "-z", "--cached"); err != nil {
		return c, err
	}
	specs := bytes.NewBufferString(":/\x00")
	exclude := func(path string) { specs.WriteString(":(exclude,top,literal)" + path + "\x00") }
	for _, f := range bytes.Split(others.Bytes(), []byte{0}) {
		path := string(f)
		if path == "" {
			continue
		}
		why := unsafeFile(dir, path)
		if why != "" {
			c.Refused = append(c.Refused, Refusal{Path: path, Why: why})
		}
		if why != "" || (Entry{State: "??", Path: path}).Runtime() {
			exclude(path)
		}
	}
	// A tracked file the child made a link (a .gitmodules one) is left as
	// HEAD has it: `git add` would take the link.
	for _, f := range bytes.Split(tracked.Bytes(), []byte{0}) {
		if path := string(f); path != "" {
			if why := unsafeFile(dir, path); why != "" {
				c.Refused = append(c.Refused, Refusal{Path: path, Why: why})
				exclude(path)
			}
		}
	}
	if err := git(specs, io.Discard, "add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
		return c, err
	}
	var out bytes.Buffer
	if err := git(nil, &out, "write-tree"); err != nil {
		return c, err
	}
	tree := strings.TrimSpace(out.String())
	headTree, err := revParse(ctx, dir, head+"^{tree}")
	if err != nil {
		return c, err
	}
	c.Commit = head
	if tree != headTree || head != base {
		// Nothing changed since the child's own commits, if any: those
		// get a capture on top unless one is there already.
		named := base
		if tree == headTree {
			if named, err = BaseOf(ctx, dir, head); err != nil {
				return c, err
			}
		}
		if tree != headTree || named != base {
			msg := fmt.Sprintf("%s\n\n%s: %s\n%s: %s\n", message, BaseTrailer, base, SessionTrailer, session)
			out.Reset()
			if err := git(strings.NewReader(msg), &out, "commit-tree", tree, "-p", head, "-F", "-"); err != nil {
				return c, err
			}
			c.Commit, c.Committed = strings.TrimSpace(out.String()), true
		}
	}
	if c.Commit != old {
		// Only from the tip it had: a settle and an apply that capture at
		// once do not lose each other's commit.
		if err := git(nil, io.Discard, "update-ref", "-m", "subagents: capture", "refs/heads/"+branch, c.Commit, old); err != nil {
			return c, err
		}
	}
	if at, err := run(ctx, dir, nil, "symbolic-ref", "-q", "HEAD"); err != nil || strings.TrimSpace(string(at)) != "refs/heads/"+branch {
		if _, err := run(ctx, dir, nil, "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
			return c, err
		}
	}
	// The worktree's own index becomes the capture's: a retry that goes
	// on in the worktree sees its files as committed.
	if err := os.Rename(tmp.Name(), index); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return c, err
	}
	return c, nil
}

// unsafeFile is UnsafePath for the file path of the worktree at dir, as
// `git add` would take it: a link when lstat says so.
func unsafeFile(dir, path string) string {
	if why := UnsafePath(path, false); why != "" {
		return why
	}
	if UnsafePath(path, true) == "" {
		// Only a name a link may not have needs the lstat.
		return ""
	}
	info, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil || info.Mode()&fs.ModeSymlink == 0 {
		return ""
	}
	return UnsafePath(path, true)
}

// env is the environment that makes a commit by who.
func (who Identity) env() []string {
	return []string{"GIT_AUTHOR_NAME=" + who.Name, "GIT_AUTHOR_EMAIL=" + who.Email,
		"GIT_COMMITTER_NAME=" + who.Name, "GIT_COMMITTER_EMAIL=" + who.Email}
}

// readTreeSafely reads the tree of commit into the index git (a command
// runner) works on, every path UnsafePath refuses left out, and returns
// those.
func readTreeSafely(ctx context.Context, dir string, git func(io.Reader, io.Writer, ...string) error, commit string) ([]Refusal, error) {
	out, err := run(ctx, dir, nil, "ls-tree", "-r", "-z", "--full-tree", commit)
	if err != nil {
		return nil, err
	}
	var refused []Refusal
	var entries bytes.Buffer
	for _, rec := range bytes.Split(out, []byte{0}) {
		// "<mode> <type> <object>\t<path>", as update-index reads it.
		meta, path, ok := strings.Cut(string(rec), "\t")
		if !ok {
			continue
		}
		if why := UnsafePath(path, strings.HasPrefix(meta, modeLink+" ")); why != "" {
			refused = append(refused, Refusal{Path: path, Why: why})
			continue
		}
		entries.Write(rec)
		entries.WriteByte(0)
	}
	if err := git(&entries, io.Discard, "update-index", "-z", "--index-info"); err != nil {
		return nil, err
	}
	return refused, nil
}

// revParse is the object rev names.
func revParse(ctx context.Context, dir, rev string) (string, error) {
	out, err := run(ctx, dir, nil, "rev-parse", "--verify", "--quiet", rev)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// gitPath is the file name of the repository's (or worktree's) file
// inside its git folder, as `git rev-parse --git-path` names it.
func gitPath(ctx context.Context, dir, name string) (string, error) {
	out, err := run(ctx, dir, nil, "rev-parse", "--git-path", name)
	if err != nil {
		return "", err
	}
	p := strings.TrimSpace(string(out))
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return p, nil
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
	out, err := run(ctx, top, nil, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", base, tip, "--")
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
	err = runTo(ctx, top, nil, tmp, "diff", "--binary", "--full-index", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv", base, tip, "--")
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
