package dev

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/durable-pi/subagents/cli"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// lockDataDir takes the data dir's service lock, or says which process
// holds it. The kernel drops the lock when the process dies, however it
// dies, so a killed service never blocks the next start. What the file says
// while the service runs and after it stopped: cli.ServiceLockPath.
func lockDataDir(dataDir string) (unlock func(), err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("data dir %s: %v", dataDir, err))
	}
	path := cli.ServiceLockPath(dataDir)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("lock %s: %v", path, err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			holder := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(holder); perr != nil {
				holder = "another process"
			} else {
				holder = "pid " + holder
			}
			return nil, errcode.Errorf(errcode.InvalidInput,
				"a subagents service already runs for data dir %s (%s); its clients use %s", dataDir, holder, connection.SocketPath(dataDir))
		}
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("lock %s: %v", path, err))
	}
	pid := os.Getpid()
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0)
	return func() {
		// Before the lock goes: whoever reads the file later learns that
		// this service stopped, and no pid that another process may take.
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(cli.StoppedNote(pid, time.Now())), 0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
