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

// LockIdle is how long a session's lock file may go untouched before a
// sweep removes it: a lock matters while attempts of one turn may still
// run, and a turn never outlives its ceiling (hours at most); a later turn
// makes a new one.
const LockIdle = 24 * time.Hour

// SweepSessions removes what the data dir keeps beside session files that
// is of no more use: a lock file whose session file is gone or that has been
// idle for LockIdle, and a turn's full-output file whose session file is
// gone (removed by its user or pi's own clean-up; the session file is never
// removed here). A lock some attempt holds is left alone. It returns how
// many files it removed.
func SweepSessions(dataDir string, now time.Time) (int, error) {
	removed := 0
	root := filepath.Join(dataDir, "sessions")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		name := d.Name()
		switch {
		case strings.HasSuffix(name, ".jsonl.lock"):
			if lockMayGo(path, d, now) && removeUnlocked(path) {
				removed++
			}
		case strings.HasSuffix(name, ".output.md") && strings.Contains(name, ".turn-"):
			session := name[:strings.LastIndex(name, ".turn-")] + ".jsonl"
			if !exists(filepath.Join(filepath.Dir(path), session)) && os.Remove(path) == nil {
				removed++
			}
		}
		return nil
	})
	return removed, err
}

// lockMayGo says whether the session lock file at path may go at now,
// unless an attempt holds it: its session file is gone, or it has been
// idle for LockIdle.
func lockMayGo(path string, d fs.DirEntry, now time.Time) bool {
	info, err := d.Info()
	if err != nil {
		return false
	}
	return !exists(strings.TrimSuffix(path, ".lock")) || now.Sub(info.ModTime()) >= LockIdle
}

// removeUnlocked removes a lock file unless an attempt holds it; it holds
// the lock itself while it does, and lockSession checks that the file it
// locked is still the one at the path.
func removeUnlocked(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	return os.Remove(path) == nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
