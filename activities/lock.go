package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// lockPoll is how often a waiting attempt tries the session lock: the other
// attempt ends within its kill grace, so a tenth of a second is prompt
// without spinning.
const lockPoll = 100 * time.Millisecond

// maxRecordBytes bounds what is read back from a lock file: a record is a
// few dozen bytes; anything longer is not ours.
const maxRecordBytes = 4 << 10

// sessionLock is an exclusive lock on a session's lock file. The file also
// holds the record of the run that holds (or last held) it.
type sessionLock struct{ f *os.File }

// runRecord is what a child run writes into the session's lock file before
// it starts pi: which run it is, and how many messages the session file held
// then. A retry of the same run, on any worker that sees the file, reads it
// to know which part of the session file the interrupted attempts wrote,
// even when they died before their first heartbeat.
type runRecord struct {
	Run            string `json:"run"`
	MessagesBefore int    `json:"messagesBefore"`
	// Pgid is the process group of the pi the run started: what a retry
	// kills if the attempt died and left its tools running.
	Pgid int `json:"pgid,omitempty"`
	// Mark is the ProcMarkEnv value of that pi: what a retry kills,
	// wherever pi's tools went (see killLeftovers).
	Mark string `json:"mark,omitempty"`
}

// lockSession takes an exclusive lock on the session's lock file, so that
// two attempts of a turn (one the server gave up on after missed heartbeats,
// one that retries it) never run pi on one session file at once. It waits
// for the other attempt to end, calling beat so that this attempt does not
// time out while it waits. The kernel drops the lock when its holder dies.
func lockSession(ctx context.Context, sessionFile string, beat func()) (*sessionLock, error) {
	path := sessionFile + ".lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session lock: %w", err)
	}
	lastBeat := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if current(f, path) {
				return &sessionLock{f: f}, nil
			}
			// A sweep removed the file between its open and this lock:
			// lock the one at the path, or two attempts could each hold
			// a file of their own.
			_ = f.Close()
			if f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600); err != nil {
				return nil, fmt.Errorf("session lock: %w", err)
			}
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("session lock: %w", err)
		}
		if time.Since(lastBeat) >= time.Second {
			beat()
			lastBeat = time.Now()
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}

// current is whether f is still the file at path.
func current(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// unlock lets the next attempt in.
func (l *sessionLock) unlock() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}

// last is the record as the last attempt of any run left it (empty when
// there is none, or it cannot be read).
func (l *sessionLock) last() runRecord {
	var r runRecord
	b, err := io.ReadAll(io.NewSectionReader(l.f, 0, maxRecordBytes))
	if err != nil || json.Unmarshal(b, &r) != nil {
		return runRecord{}
	}
	return r
}

// record reads the run record the file holds, if it is run's.
func (l *sessionLock) record(run string) (runRecord, bool) {
	r := l.last()
	if r.Run != run || r.MessagesBefore < 0 {
		return runRecord{}, false
	}
	return r, true
}

// write replaces the file's record. The page cache keeps it across a
// worker's death; a machine crash may lose it, and a retry then falls back
// to the heartbeat.
func (l *sessionLock) write(r runRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err = l.f.WriteAt(b, 0)
	return err
}
