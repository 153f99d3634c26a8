package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The local service's lock file, <data dir>/dev.lock: `subagents dev` holds
// it locked (flock) while it runs, so that one service runs per data dir,
// and writes what stands in it:
//
//	while a service runs:           its pid, e.g. "12345\n"
//	after it stopped (any signal):  "stopped pid=12345 at=2026-11-26T04:10:00Z\n"
//	after it was killed (SIGKILL):  its pid still, but nobody holds the lock
//
// The kernel drops the lock when the process dies, however it dies, so the
// lock, not the text, says whether a service runs; the text says which
// process to stop. A stopped service's line holds no bare number, so that
// `kill $(cat dev.lock)`, an old recipe, kills nothing once it stopped.

// ServiceLockName is the lock file's name in the data dir.
const ServiceLockName = "dev.lock"

// ServiceLockPath is the lock file of dataDir's local service.
func ServiceLockPath(dataDir string) string { return filepath.Join(dataDir, ServiceLockName) }

// StoppedNote is what the lock file says once its service (pid) stopped.
func StoppedNote(pid int, at time.Time) string {
	return fmt.Sprintf("stopped pid=%d at=%s\n", pid, at.UTC().Format(time.RFC3339))
}

// lockedPid is the pid the lock file names as its running holder, or 0.
func lockedPid(text []byte) int {
	pid, err := strconv.Atoi(string(bytes.TrimSpace(text)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// lockHeld reports whether some process holds path's lock: a shared lock
// taken without waiting fails while `subagents dev` holds its exclusive one.
// Taken and given back at once, it keeps a service that starts meanwhile
// from starting only for that instant.
func lockHeld(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	case err != nil:
		return false, err
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}

// procRoot is where Linux describes processes; elsewhere it is missing and
// a lock's holder cannot be proven (holderCheck says so).
const procRoot = "/proc"

// holderCheck is what /proc says of the process a lock file names.
type holderCheck struct {
	// proc: /proc describes processes on this system.
	proc bool
	// alive: the process exists (and is no zombie).
	alive bool
	// holds: it has the lock file open with an exclusive flock on it.
	holds bool
	// uid is its real user; argv its command line.
	uid  int
	argv []string
	// started is its start time in clock ticks since boot: a pid that ends
	// and is taken by another process gets another start time.
	started string
}

// checkHolder reads what /proc says of pid and whether it holds the lock
// on lockPath: one of its open files is lockPath, with an flock the
// kernel lists as WRITE (exclusive) in that file's fdinfo.
func checkHolder(pid int, lockPath string) holderCheck {
	var c holderCheck
	if _, err := os.Stat(filepath.Join(procRoot, "self")); err != nil {
		return c
	}
	c.proc = true
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return c
	}
	// The fields after the command name, which may hold spaces: state is
	// the first, the start time the 20th.
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return c
	}
	c.alive, c.started = true, f[19]
	c.uid = statusUID(filepath.Join(dir, "status"))
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		c.argv = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	lock, err := os.Stat(lockPath)
	if err != nil {
		return c
	}
	// Another user's /proc/PID/fd is closed to this one: holds stays false.
	fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
	for _, fd := range fds {
		info, err := os.Stat(filepath.Join(dir, "fd", fd.Name()))
		if err != nil || !os.SameFile(info, lock) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "fdinfo", fd.Name()))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "lock:") && strings.Contains(line, "FLOCK") && strings.Contains(line, "WRITE") {
				c.holds = true
			}
		}
	}
	return c
}

// statusUID is the real uid in a /proc/PID/status file, or -1.
func statusUID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if uid, err := strconv.Atoi(f[0]); err == nil {
					return uid
				}
			}
		}
	}
	return -1
}

// isServiceCommand is whether argv is `subagents dev`: the light build
// replaces itself with subagents-dev, so argv[0] is that build's path
// (docs/command.md).
func isServiceCommand(argv []string) bool {
	return len(argv) >= 2 && strings.HasPrefix(filepath.Base(argv[0]), "subagents") && argv[1] == "dev"
}
