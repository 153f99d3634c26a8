package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/gitrepo"
)

// Worktree isolation (docs/worktrees.md). A run whose input asks for a
// worktree (RunPiInput.Worktree) runs its child in a git worktree of the
// repository that holds the task's cwd, made for the session in the data
// dir's worktrees/<session>, on the branch subagents/<session>: from a
// clean base commit the first time, from the branch after that (a later
// turn, a corrective run, a retry). When the run ends, however it ends,
// everything the child changed is committed onto the branch, the whole
// change from the base is written as a patch (changes/<session>.patch),
// the result carries both (RunPiResult.Change), and the worktree is
// removed. The pi session file stays where the task's own cwd puts it.
//
// A journal (worktrees/<session>.json) is written before the worktree is
// made and removed after it is gone: a worker that dies in between leaves
// it, and whoever holds the session's lock next settles it. The run's
// retry goes on in the worktree the journal names; SettleWorktrees (a
// sweep) captures what a dead run left onto the branch and removes the
// worktree, so that nothing but a branch with a change is left behind.

// worktreeGitTimeout bounds the git work of making, capturing or removing
// a worktree once the attempt's own context has ended (a cancel): a
// checkout or a commit of a large repository takes seconds; a git that
// hangs (a lock held by a dead process) must not hold the worker forever.
const worktreeGitTimeout = 2 * time.Minute

// maxChangeFiles bounds the files a result names (api.Change.Files): the
// result goes into the workflow's history, and the patch names them all.
const maxChangeFiles = 200

// dirtyNamed is how many of a dirty checkout's files its error names.
const dirtyNamed = 5

// BranchPrefix starts the name of every session's branch.
const BranchPrefix = "subagents/"

// worktreeJournal is what a run writes before it makes a session's
// worktree: enough to find it again, capture it and remove it.
type worktreeJournal struct {
	Session string `json:"session"`
	// Repo is the top folder of the user's checkout; Rel the task's cwd
	// within it.
	Repo   string `json:"repo"`
	Rel    string `json:"rel"`
	Base   string `json:"base"`
	Branch string `json:"branch"`
	// Path is the worktree's folder.
	Path string `json:"path"`
	// SessionFile is the pi session file, whose lock guards the worktree.
	SessionFile string `json:"sessionFile"`
	// Patch is where the change's patch goes.
	Patch string `json:"patch"`
	// Partial is true from just before the worktree is made until it is
	// whole: a worker that died while git checked it out leaves a tree
	// with files missing, which must be made again, never captured (its
	// missing files would read as deletions).
	Partial bool `json:"partial,omitempty"`
}

// cwd is where the child runs: the task's cwd within the worktree.
func (j *worktreeJournal) cwd() string { return filepath.Join(j.Path, j.Rel) }

func worktreesDir(dataDir string) string { return filepath.Join(dataDir, "worktrees") }

func journalFile(dataDir, session string) string {
	return filepath.Join(worktreesDir(dataDir), session+".json")
}

// PatchFile is where a session's change is written as a patch.
func PatchFile(dataDir, session string) string {
	return filepath.Join(dataDir, "changes", session+".patch")
}

func readJournal(path string) (*worktreeJournal, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var j worktreeJournal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("worktree journal %s: %w", path, err)
	}
	if j.Repo == "" || j.Path == "" || j.Branch == "" || j.Session == "" {
		return nil, fmt.Errorf("worktree journal %s: incomplete", path)
	}
	return &j, nil
}

// writeJournal writes j through a temporary file renamed into place, synced
// before the rename: the journal must be on disk before the worktree it
// names is.
func writeJournal(path string, j *worktreeJournal) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".journal-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return nil
}

// enterWorktree finds or makes the session's worktree for a run of in and
// returns its journal. A journal left by an interrupted run names a
// worktree to go on in (made again from its branch if it is gone). Else the
// run's checkout is found from in.Cwd; the session's branch, if it has
// one, is continued; else the checkout must be clean and the base is
// in.Worktree.BaseRef (default HEAD) as a commit now. An error that is the
// caller's (no repository, a dirty checkout, a bad base ref) is coded
// INVALID_INPUT or WORKTREE_DIRTY; any other is the worker's.
func (a *Activities) enterWorktree(ctx context.Context, in api.RunPiInput, sessionFile string) (*worktreeJournal, error) {
	jpath := journalFile(a.cfg.DataDir, in.SessionID)
	if j, err := readJournal(jpath); err == nil {
		has, err := gitrepo.HasWorktree(ctx, j.Repo, j.Path)
		if err != nil {
			return nil, err
		}
		if has && !j.Partial {
			return j, os.MkdirAll(j.cwd(), 0o755)
		}
		return j, makeJournaled(ctx, jpath, j)
	} else if !errors.Is(err, os.ErrNotExist) {
		// A journal that cannot be read names nothing to go on from: it
		// is replaced by the one written below.
		activity.GetLogger(ctx).Warn("unreadable worktree journal replaced", "session", in.SessionID, "error", err)
	}
	top, err := gitrepo.Toplevel(ctx, in.Cwd)
	switch {
	case errors.Is(err, gitrepo.ErrNotRepo):
		return nil, errcode.Errorf(errcode.InvalidInput,
			"cwd %s is not in a git repository: a task with worktree: true runs in a git worktree of its checkout (run it without worktree, or in a git checkout)", in.Cwd)
	case errors.Is(err, gitrepo.ErrNoGit):
		return nil, errcode.Errorf(errcode.InvalidInput, "a task with worktree: true needs git on the worker: %v", err)
	case err != nil:
		return nil, err
	}
	rel, err := relativeCwd(top, in.Cwd)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(worktreesDir(a.cfg.DataDir), in.SessionID)
	if within(realPath(worktreesDir(a.cfg.DataDir)), top) {
		return nil, errcode.Errorf(errcode.InvalidInput,
			"the worker's data dir %s is inside the repository %s: its worktrees would show in the checkout; give the worker a data dir outside it", a.cfg.DataDir, top)
	}
	j := &worktreeJournal{Session: in.SessionID, Repo: top, Rel: rel, Branch: BranchPrefix + in.SessionID, Path: path,
		SessionFile: sessionFile, Patch: PatchFile(a.cfg.DataDir, in.SessionID)}
	tip, err := gitrepo.BranchTip(ctx, top, j.Branch)
	if err != nil {
		return nil, err
	}
	if tip != "" {
		// The session's earlier runs: their base is on the branch's last
		// capture; a branch without one (made, then the worker died) has
		// nothing on its base yet.
		if j.Base, err = gitrepo.BaseOf(ctx, top, tip); err != nil {
			return nil, err
		}
		j.Base = cmp.Or(j.Base, tip)
	} else if in.Worktree.Base != "" {
		// An earlier run of the session started from it and changed
		// nothing: go on from the same commit, whatever the checkout is.
		j.Base = in.Worktree.Base
	} else {
		dirty, err := gitrepo.Dirty(ctx, top)
		if err != nil {
			return nil, err
		}
		if len(dirty) > 0 {
			return nil, dirtyError(top, dirty)
		}
		ref := cmp.Or(in.Worktree.BaseRef, "HEAD")
		if j.Base, err = gitrepo.ResolveCommit(ctx, top, ref); err != nil {
			if errors.Is(err, gitrepo.ErrNoGit) {
				return nil, err
			}
			return nil, errcode.Errorf(errcode.InvalidInput, "baseRef: %v (a branch, a tag, HEAD or a commit of %s)", err, top)
		}
	}
	return j, makeJournaled(ctx, jpath, j)
}

// makeJournaled makes j's worktree between two journal writes: partial
// before (the journal exists before anything of the worktree does), whole
// after.
func makeJournaled(ctx context.Context, jpath string, j *worktreeJournal) error {
	j.Partial = true
	if err := writeJournal(jpath, j); err != nil {
		return fmt.Errorf("worktree journal: %w", err)
	}
	if err := makeWorktree(ctx, j); err != nil {
		return err
	}
	j.Partial = false
	if err := writeJournal(jpath, j); err != nil {
		return fmt.Errorf("worktree journal: %w", err)
	}
	return nil
}

// dirtyError is WORKTREE_DIRTY naming some of the checkout's dirt and what
// to do about it.
func dirtyError(top string, dirty []string) error {
	named := dirty[:min(len(dirty), dirtyNamed)]
	list := strings.Join(named, ", ")
	if more := len(dirty) - len(named); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return errcode.Errorf(errcode.WorktreeDirty,
		"the checkout %s has uncommitted changes (%s): a worktree is made from a commit and would not have them. "+
			"Commit or stash them (git stash --include-untracked) and run the task again, or run it without worktree", top, list)
}

// makeWorktree makes j's worktree: on its branch as it is, or a new branch
// at its base. What is left at its path (a folder of a worktree removed
// halfway, a registration whose folder is gone) goes first.
func makeWorktree(ctx context.Context, j *worktreeJournal) error {
	if _, err := os.Lstat(j.Path); err == nil {
		if err := gitrepo.RemoveWorktree(ctx, j.Repo, j.Path); err != nil {
			return fmt.Errorf("worktree: clear %s: %w", j.Path, err)
		}
	} else if err := gitrepo.Prune(ctx, j.Repo); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	if err := gitrepo.AddWorktree(ctx, j.Repo, j.Path, j.Branch, j.Base); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	// The task's cwd may be a folder no commit has (an empty one).
	return os.MkdirAll(j.cwd(), 0o755)
}

// captureWorktree commits what changed in j's worktree onto its branch
// and returns the branch's whole change from the base, its patch written.
// A worktree that is gone (a settle after a crash halfway through its
// removal) has nothing more: the change is the branch's.
func captureWorktree(ctx context.Context, j *worktreeJournal, message string) (api.Change, error) {
	has, err := gitrepo.HasWorktree(ctx, j.Repo, j.Path)
	if err != nil {
		return api.Change{}, err
	}
	change := api.Change{Repo: j.Repo, Base: j.Base, Branch: j.Branch}
	if has {
		captured, err := gitrepo.Capture(ctx, j.Path, j.Branch, message, j.Base, j.Session, gitrepo.CaptureIdentity)
		if err != nil {
			return api.Change{}, err
		}
		for _, r := range captured.Refused {
			change.Refused = append(change.Refused, r.String())
		}
	}
	tip, err := gitrepo.BranchTip(ctx, j.Repo, j.Branch)
	if err != nil {
		return change, err
	}
	var files []string
	if tip != "" {
		if files, err = gitrepo.ChangedFiles(ctx, j.Repo, j.Base, tip); err != nil {
			return change, err
		}
	}
	if len(files) == 0 {
		change.Empty, change.Branch = true, ""
		return change, nil
	}
	if err := gitrepo.WritePatch(ctx, j.Repo, j.Base, tip, j.Patch); err != nil {
		return change, fmt.Errorf("patch: %w", err)
	}
	change.PatchFile = j.Patch
	change.Files = files[:min(len(files), maxChangeFiles)]
	return change, nil
}

// closeWorktree removes j's worktree, then the branch and patch of a
// change that is empty (nothing was captured: nothing to keep), then the
// journal. An error leaves the journal for the next settle.
func closeWorktree(ctx context.Context, dataDir string, j *worktreeJournal, change api.Change) error {
	if err := gitrepo.RemoveWorktree(ctx, j.Repo, j.Path); err != nil {
		return err
	}
	if change.Empty {
		if err := gitrepo.DeleteBranch(ctx, j.Repo, j.Branch); err != nil {
			return err
		}
		if err := os.Remove(j.Patch); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return os.Remove(journalFile(dataDir, j.Session))
}

// leaveWorktree ends a run in j's worktree: it captures the change into
// res and removes the worktree, then returns the run's result and error
// as they were, with the change. A change with paths left out (refused)
// fails the run with PERMISSION_DENIED. A capture that fails leaves the
// worktree and journal and fails the run with the change as far as it is
// known (its worktree named): running the child again would not help the
// capture, and an apply, a discard or the sweep settles it.
func (a *Activities) leaveWorktree(ctx context.Context, j *worktreeJournal, in api.RunPiInput, res api.RunPiResult, runErr error, beat func()) (api.RunPiResult, error) {
	gctx, cancel := gitContext(ctx)
	defer cancel()
	stop := beatEvery(ctx, a.cfg.HeartbeatInterval, beat)
	defer stop()
	msg := fmt.Sprintf("subagents: %s, session %s, turn %d", api.AgentName(in.Agent), in.SessionID, max(in.Turn, 1))
	change, err := captureWorktree(gctx, j, msg)
	log := activity.GetLogger(ctx)
	switch {
	case err != nil:
		log.Error("could not capture the worktree's change; it stays in the worktree", "session", in.SessionID, "worktree", j.Path, "error", err)
		change = api.Change{Repo: j.Repo, Base: j.Base, Branch: j.Branch, Worktree: j.Path}
		a.failRun(&res, errcode.Failed, fmt.Sprintf("could not capture the child's change: %v. Its work stays in the worktree %s: "+
			"`subagents apply %s` captures and applies it, `subagents apply --discard %s` deletes it, and the worker's sweep captures it at its next start",
			err, j.Path, in.SessionID, in.SessionID))
	case len(change.Refused) > 0:
		a.failRun(&res, errcode.PermissionDenied, fmt.Sprintf("the child's change names paths git refuses to write (outside the checkout, or in its .git folder): %s; "+
			"they were left out of the change", strings.Join(change.Refused[:min(len(change.Refused), dirtyNamed)], ", ")))
	}
	res.Change = &change
	if err == nil {
		if err := closeWorktree(gctx, a.cfg.DataDir, j, change); err != nil {
			// The change is on its branch: a settle removes what is left.
			log.Warn("could not remove the worktree; the next settle will", "session", in.SessionID, "worktree", j.Path, "error", err)
		}
	}
	var cancelled *temporal.CanceledError
	if errors.As(runErr, &cancelled) {
		// The cancel's details are the result: with the change.
		runErr = temporal.NewCanceledError(res)
	}
	return res, runErr
}

// failRun makes res a failed run with code and msg, after the error it
// has already, if any.
func (a *Activities) failRun(res *api.RunPiResult, code errcode.Code, msg string) {
	msg = a.sanitizer.Sanitize(msg)
	if res.Error != nil {
		res.Error.Message += "; and " + msg
		return
	}
	res.Error = errcode.NewInfo(code, msg)
}

// gitContext is ctx for git work, or, when ctx has ended (a cancel), one
// that still lets the worktree be captured and removed.
func gitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), worktreeGitTimeout)
}

// relativeCwd is cwd relative to the checkout's top, both with their links
// resolved (git names the top so).
func relativeCwd(top, cwd string) (string, error) {
	rel, err := filepath.Rel(realPath(top), realPath(cwd))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errcode.Errorf(errcode.InvalidInput, "cwd %s is not inside its checkout %s", cwd, top)
	}
	return rel, nil
}

// within reports whether path is top or inside it.
func within(path, top string) bool {
	rel, err := filepath.Rel(realPath(top), path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// realPath is p with its links resolved as far as they exist.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Split(filepath.Clean(p))
	if dir == "" || dir == p {
		return filepath.Clean(p)
	}
	return filepath.Join(realPath(filepath.Clean(dir)), base)
}
