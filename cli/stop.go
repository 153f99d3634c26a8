package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// stopWait bounds how long `subagents stop` waits for the service to exit
// after SIGTERM. The service stops its worker first: a running child gets
// SIGTERM and, after the activities' kill grace (5 s), SIGKILL; then the
// socket, the UI and the embedded server (about a second here). Thirty
// seconds is that with room for a loaded machine; past it the service goes
// on stopping and the command says so (exit 4, as a wait that ended first).
const stopWait = 30 * time.Second

// stopPoll is how often the command looks whether the service has exited:
// one read of /proc/PID/stat, often enough to answer within a tenth of a
// second of the exit.
const stopPoll = 50 * time.Millisecond

// deadHolderGrace is how long stop waits for the lock of a service that
// died to be let go by a child it was forking then (a fork's copy of the
// descriptor closes at its exec, within milliseconds; a second covers a
// loaded machine) before it says the lock's holder is not the service.
const deadHolderGrace = time.Second

// stopOptions are `subagents stop`.
type stopOptions struct {
	dataDir string
	wait    time.Duration
}

func (o *stopOptions) register(fs *flag.FlagSet) {
	o.wait = stopWait
	fs.StringVar(&o.dataDir, "data-dir", "", "the local service's data dir (default $SUBAGENTS_DATA_DIR or ~/.pi/subagents)")
	fs.Var(seconds{&o.wait}, "timeout", "how long to wait for it to exit: seconds or a duration like 1m (default 30 s)")
}

// stopMain is `subagents stop`: it stops the local service (`subagents
// dev`) of a data dir, the process that holds the data dir's lock, if it
// is this user's `subagents dev`. Nothing running is no error: it says so.
func stopMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o stopOptions
	fs, err := ParseFlags("stop", args, stderr, o.register)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errcode.Errorf(errcode.InvalidInput, "subagents stop takes no arguments, got %q", fs.Args())
	}
	dir := o.dataDir
	if dir == "" {
		if dir, err = connection.DefaultDataDir(); err != nil {
			return err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "--data-dir: "+err.Error())
	}
	return stopService(ctx, dir, o.wait, stdout)
}

// stopService finds the service that holds dir's lock, proves it is this
// user's `subagents dev`, sends it SIGTERM and waits up to wait for it to
// exit.
func stopService(ctx context.Context, dir string, wait time.Duration, stdout io.Writer) error {
	path := ServiceLockPath(dir)
	text, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, _ = fmt.Fprintf(stdout, "no subagents service runs for data dir %s\n", dir)
		return nil
	}
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("read %s: %v", path, err))
	}
	pid := lockedPid(text)
	var c holderCheck
	if pid > 0 {
		c = checkHolder(pid, path)
	}
	if !c.holds {
		held, err := lockHeld(path)
		// The named service is dead, yet the lock is held: a child it was
		// starting as it died (forked, not yet exec'd) holds a copy of the
		// lock's descriptor until its exec closes it, a moment later.
		for waited := time.Duration(0); err == nil && held && pid > 0 && c.proc && !c.alive && waited < deadHolderGrace; waited += stopPoll {
			time.Sleep(stopPoll)
			held, err = lockHeld(path)
		}
		if err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("lock %s: %v", path, err))
		}
		switch {
		case !held:
			_, _ = fmt.Fprintf(stdout, "no subagents service runs for data dir %s\n", dir)
			return nil
		case pid > 0 && c.alive && c.uid >= 0 && c.uid != os.Getuid():
			return errcode.Errorf(errcode.PermissionDenied, "pid %d, named by %s, runs as uid %d, not as this user: not stopping it", pid, path, c.uid)
		case pid == 0 || c.proc:
			return errcode.Errorf(errcode.InvalidInput,
				"%s is held by a process other than the one it names (%q): a service still starting, or no subagents dev; not stopping it",
				path, strings.TrimSpace(string(text)))
		}
		// No /proc to prove who holds the lock (not Linux): the holder
		// wrote its pid just after taking it.
	} else {
		if c.uid != os.Getuid() {
			return errcode.Errorf(errcode.PermissionDenied, "pid %d holds %s but runs as uid %d, not as this user: not stopping it", pid, path, c.uid)
		}
		if !isServiceCommand(c.argv) {
			return errcode.Errorf(errcode.PermissionDenied, "pid %d holds %s but is %q, not subagents dev: not stopping it", pid, path, strings.Join(c.argv, " "))
		}
	}
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return errcode.Wrap(errcode.PermissionDenied, err, fmt.Sprintf("signal pid %d: %v", pid, err))
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(stopPoll)
	defer tick.Stop()
	for !exited(pid, c) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("the subagents service of data dir %s (pid %d) is still stopping after %s: `subagents stop` again waits for it, `kill -KILL %d` ends it now (its running tasks continue at the next start): %w",
				dir, pid, wait, pid, errcode.ErrPending)
		case <-tick.C:
		}
	}
	_, _ = fmt.Fprintf(stdout, "stopped the subagents service of data dir %s (pid %d) in %s\n", dir, pid, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// exited reports whether the process c described (pid) is gone: no such
// process, a zombie, or another process under its pid.
func exited(pid int, c holderCheck) bool {
	if c.proc {
		now := checkHolder(pid, "")
		return !now.alive || now.started != c.started
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
