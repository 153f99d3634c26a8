// Package gitrepo runs the git commands of worktree isolation: the worker
// makes a worktree of a task's checkout, captures what the child changed
// onto a branch and a patch, and removes the worktree; the client applies
// such a change to the user's checkout with a three-way merge that writes
// nothing when any file conflicts (docs/worktrees.md).
//
// Every command runs the git on PATH with the repository named explicitly
// (-C), in the C locale, never prompting, without the caller's GIT_DIR and
// friends (a worker started from a git hook must not aim at another
// repository) and without running any of the repository's own code: no
// hook, no fsmonitor, no external diff or textconv, and no filter driver
// the repository's config names (guards). A cloned or a child's repository
// may configure any of them, and the worker and `apply` run git there
// unasked; a hook may also start a build or a server, which a worker that
// captures and removes the worktree right after cannot wait for. The
// user's own filter drivers (the global config's, such as LFS) still run.
package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// ErrNotRepo is what Toplevel wraps for a folder that is in no git
// checkout.
var ErrNotRepo = errors.New("not in a git repository")

// ErrNoGit is what every command wraps when there is no git to run.
var ErrNoGit = errors.New("git is not installed (no git on PATH)")

// locationVars are the variables that aim git at another repository,
// index or work tree than the one -C names.
var locationVars = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
	"GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
}

// env is the environment of every git command.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		// Who a commit is by is the caller's to say (Capture), not the
		// worker's environment's.
		identity := strings.HasPrefix(name, "GIT_AUTHOR_") || strings.HasPrefix(name, "GIT_COMMITTER_")
		if isLocationVar(name) || identity || name == "LC_ALL" || name == "GIT_TERMINAL_PROMPT" {
			continue
		}
		out = append(out, kv)
	}
	// Messages in one language (a caller may show them), and a git that
	// asks for a password fails instead of waiting for a terminal.
	return append(out, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0")
}

func isLocationVar(name string) bool {
	for _, v := range locationVars {
		if name == v {
			return true
		}
	}
	return false
}

// safeOptions go before every command: no hook runs, nor the
// repository's fsmonitor (git runs it to speed up status), and no signing
// key is asked for (see the package comment).
var safeOptions = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "commit.gpgsign=false"}

// guards are the options that turn off the filter drivers the repository
// at dir configures itself (its local and worktree config): git runs a
// driver's command for each file whose attributes name it, on checkout,
// add and status, and a tree's .gitattributes may name any driver. Reading
// the config runs nothing. The global and system config are the user's.
func guards(ctx context.Context, dir string) ([]string, error) {
	out, err := run(ctx, dir, nil, "config", "-z", "--list", "--show-scope")
	if err != nil {
		return nil, err
	}
	var opts []string
	seen := map[string]bool{}
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		scope := string(fields[i])
		key, _, _ := strings.Cut(string(fields[i+1]), "\n")
		if scope != "local" && scope != "worktree" {
			continue
		}
		// filter.<driver>.<what>: the driver's name may hold dots.
		rest, ok := strings.CutPrefix(strings.ToLower(key), "filter.")
		dot := strings.LastIndexByte(rest, '.')
		if !ok || dot < 0 {
			continue
		}
		name := key[len("filter.") : len("filter.")+dot]
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, what := range []string{"clean", "smudge", "process"} {
			opts = append(opts, "-c", "filter."+name+"."+what+"=")
		}
		opts = append(opts, "-c", "filter."+name+".required=false")
	}
	return opts, nil
}

// stderrLines is how much of git's stderr an error quotes: its last lines
// say what went wrong; more would bury it.
const stderrLines = 3

// run runs `git -C dir args...` with stdin and returns its stdout; a
// failure says which command and git's last words.
func run(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := runTo(ctx, dir, stdin, &out, args...)
	return out.Bytes(), err
}

// runTo is run with stdout going to w.
func runTo(ctx context.Context, dir string, stdin io.Reader, w io.Writer, args ...string) error {
	return runEnv(ctx, dir, nil, stdin, w, args...)
}

// runEnv is runTo with extra variables in git's environment.
func runEnv(ctx context.Context, dir string, extra []string, stdin io.Reader, w io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append(append([]string{"-C", dir}, safeOptions...), args...)...)
	cmd.Env = append(env(), extra...)
	cmd.Stdin = stdin
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if errors.Is(err, exec.ErrNotFound) {
		return ErrNoGit
	}
	if err != nil {
		return &Error{Args: args, Stderr: lastLines(stderr.String(), stderrLines), Err: err}
	}
	return nil
}

// Error is a git command that failed.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := "git " + strings.Join(e.Args, " ") + ": " + e.Err.Error()
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// exitCode is the exit status of a git command that ran and failed, or -1.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return -1
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, " "))
}

// Toplevel is the top folder of the checkout that holds dir, as git names
// it (symbolic links resolved); ErrNotRepo when there is none.
func Toplevel(ctx context.Context, dir string) (string, error) {
	out, err := run(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if errors.Is(err, ErrNoGit) {
		return "", err
	}
	top := strings.TrimSpace(string(out))
	if err != nil || top == "" {
		return "", fmt.Errorf("%s: %w", dir, ErrNotRepo)
	}
	return top, nil
}

// maxRefChars bounds a base ref: branch and tag names are short; a longer
// one is a mistake, not a ref.
const maxRefChars = 256

// ValidRef reports whether ref may be handed to git as a revision: no
// option (a leading '-'), no space, control character or revision range.
// Whether it names a commit is for ResolveCommit to say.
func ValidRef(ref string) bool {
	if ref == "" || len(ref) > maxRefChars || strings.HasPrefix(ref, "-") || strings.Contains(ref, "..") {
		return false
	}
	for _, r := range ref {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// ResolveCommit is the commit ref names in the checkout at top (a branch,
// a tag, HEAD, a commit ID).
func ResolveCommit(ctx context.Context, top, ref string) (string, error) {
	if !ValidRef(ref) {
		return "", fmt.Errorf("%q is not a git ref", ref)
	}
	out, err := run(ctx, top, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if errors.Is(err, ErrNoGit) {
		return "", err
	}
	id := strings.TrimSpace(string(out))
	if err != nil || id == "" {
		return "", fmt.Errorf("%q names no commit in %s", ref, top)
	}
	return id, nil
}

// BranchTip is the commit at the tip of branch, or "" when there is no
// such branch.
func BranchTip(ctx context.Context, top, branch string) (string, error) {
	out, err := run(ctx, top, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	if err != nil {
		if exitCode(err) == 1 {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// DeleteBranch deletes branch; one that is not there is no error.
func DeleteBranch(ctx context.Context, top, branch string) error {
	tip, err := BranchTip(ctx, top, branch)
	if err != nil || tip == "" {
		return err
	}
	_, err = run(ctx, top, nil, "branch", "-D", "--", branch)
	return err
}

// SetBranch points branch at commit, making it when it is not there.
func SetBranch(ctx context.Context, top, branch, commit string) error {
	_, err := run(ctx, top, nil, "branch", "-f", "--", branch, commit)
	return err
}
