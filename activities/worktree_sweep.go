package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/gitrepo"
)

// SettleWorktrees settles the worktree journals that runs left in the data
// dir when their worker died (worktree.go): for each one whose session no
// attempt holds now, it ends what the dead attempt's tools left running,
// commits what is in the worktree onto the session's branch and writes its
// patch, removes the worktree, deletes the branch if it holds no change,
// and removes the journal. Nothing is lost: a retry of the run that comes
// later goes on from the branch. A journal an attempt holds is its own
// business. It returns how many journals it settled; logger (nil: slog's)
// hears of each and of any it could not.
func SettleWorktrees(ctx context.Context, dataDir string, logger *slog.Logger) (int, error) {
	if logger == nil {
		logger = slog.Default()
	}
	paths, err := journalPaths(dataDir)
	if err != nil {
		return 0, err
	}
	settled := 0
	var errs []error
	for _, path := range paths {
		j, err := readJournal(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done, err := settleJournal(ctx, dataDir, j)
		if err != nil {
			logger.Warn("could not settle a worktree a dead run left", "session", j.Session, "worktree", j.Path, "error", err)
			errs = append(errs, fmt.Errorf("session %s: %w", j.Session, err))
			continue
		}
		if done {
			settled++
			logger.Info("settled a worktree a dead run left", "session", j.Session, "branch", j.Branch)
		}
	}
	return settled, errors.Join(errs...)
}

// settleJournal settles j unless an attempt holds its session; done says it
// did.
func settleJournal(ctx context.Context, dataDir string, j *worktreeJournal) (done bool, err error) {
	lock, ok, err := tryLockSession(j.SessionFile)
	if err != nil || !ok {
		return false, err
	}
	defer lock.unlock()
	// The journal may have gone while this waited for nothing: the run
	// that held the lock closed it.
	if _, err := os.Stat(journalFile(dataDir, j.Session)); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	killLeftovers(lock.last())
	if j.Partial {
		// Its making never ended: nothing of the child's is in it.
		if err := gitrepo.RemoveWorktree(ctx, j.Repo, j.Path); err != nil {
			return false, err
		}
		if err := closeWorktree(ctx, dataDir, j, emptyChange(ctx, j)); err != nil {
			return false, err
		}
		return true, nil
	}
	change, err := captureWorktree(ctx, j, fmt.Sprintf("subagents: session %s, settled after its run ended", j.Session))
	if err != nil {
		return false, err
	}
	if err := closeWorktree(ctx, dataDir, j, change); err != nil {
		return false, err
	}
	return true, nil
}

// emptyChange is the change of a worktree whose making never ended: empty
// (its branch is deleted) unless the branch already held a capture of an
// earlier run, which is kept.
func emptyChange(ctx context.Context, j *worktreeJournal) api.Change {
	tip, err := gitrepo.BranchTip(ctx, j.Repo, j.Branch)
	if err == nil && tip != "" && tip != j.Base {
		return api.Change{Repo: j.Repo, Base: j.Base, Branch: j.Branch}
	}
	return api.Change{Repo: j.Repo, Base: j.Base, Empty: true}
}

// tryLockSession takes the session's lock if no attempt holds it; ok is
// false when one does. The lock file is made if it is missing, as an
// attempt would make it.
func tryLockSession(sessionFile string) (lock *sessionLock, ok bool, err error) {
	path := sessionFile + ".lock"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if !current(f, path) {
		// A sweep removed the file between its open and this lock: an
		// attempt may hold the one now at the path.
		_ = f.Close()
		return nil, false, nil
	}
	return &sessionLock{f: f}, true, nil
}

// journalPaths are the worktree journals in dataDir, in name order (none
// when it has no worktrees folder).
func journalPaths(dataDir string) ([]string, error) {
	entries, err := os.ReadDir(worktreesDir(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		paths = append(paths, filepath.Join(worktreesDir(dataDir), e.Name()))
	}
	return paths, nil
}
