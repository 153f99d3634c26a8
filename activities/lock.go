package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockPoll is how often a waiting attempt tries the session lock: the other
// attempt ends within its kill grace, so a tenth of a second is prompt
// without spinning.
const lockPoll = 100 * time.Millisecond

// lockSession takes an exclusive lock on the session's lock file, so that
// two attempts of a turn (one the server gave up on after missed heartbeats,
// one that retries it) never run pi on one session file at once. It waits
// for the other attempt to end, calling beat so that this attempt does not
// time out while it waits. The kernel drops the lock when its holder dies.
func lockSession(ctx context.Context, sessionFile string, beat func()) (unlock func(), err error) {
	path := sessionFile + ".lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session lock: %w", err)
	}
	lastBeat := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
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
