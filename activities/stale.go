package activities

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// What `subagents doctor` reports as left behind in a data dir, read
// without changing anything: the worker's own sweeps (SweepSessions,
// SettleWorktrees) tidy the same things when they next run.

// StaleWorktree is a worktree journal whose session no attempt holds: the
// worktree of a run that died, which SettleWorktrees has not settled yet.
type StaleWorktree struct {
	Session string `json:"session"`
	Repo    string `json:"repo,omitempty"`
	Path    string `json:"path,omitempty"`
	Branch  string `json:"branch,omitempty"`
	Journal string `json:"journal"`
	// Error says why the journal cannot be read; such a journal is listed
	// too, as the settle would stumble on it.
	Error string `json:"error,omitempty"`
}

// StaleWorktrees lists dataDir's worktree journals that no running attempt
// holds (by their session's lock), in name order.
func StaleWorktrees(dataDir string) ([]StaleWorktree, error) {
	paths, err := journalPaths(dataDir)
	if err != nil {
		return nil, err
	}
	var out []StaleWorktree
	for _, path := range paths {
		j, err := readJournal(path)
		if err != nil {
			out = append(out, StaleWorktree{Session: strings.TrimSuffix(filepath.Base(path), ".json"), Journal: path, Error: err.Error()})
			continue
		}
		if lockHeldBySomeone(j.SessionFile + ".lock") {
			continue
		}
		out = append(out, StaleWorktree{Session: j.Session, Repo: j.Repo, Path: j.Path, Branch: j.Branch, Journal: path})
	}
	return out, nil
}

// StaleSessionLocks lists the session lock files under dataDir that
// SweepSessions would remove at now: no attempt holds them, and their
// session file is gone or they have been idle for LockIdle.
func StaleSessionLocks(dataDir string, now time.Time) ([]string, error) {
	var out []string
	err := filepath.WalkDir(filepath.Join(dataDir, "sessions"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".jsonl.lock") {
			return nil
		}
		if lockMayGo(path, d, now) && !lockHeldBySomeone(path) {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}

// lockHeldBySomeone reports whether an attempt holds the lock file at path:
// a shared lock taken without waiting fails while an exclusive one is held.
// A missing file is held by nobody; nothing is created.
func lockHeldBySomeone(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
