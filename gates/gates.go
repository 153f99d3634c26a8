// Package gates runs a plan step's verification command (its `gate`) on
// the worker, in the step's folder: the check that decides whether a
// child's work is accepted (docs/plans.md, "Gates").
package gates

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Activities holds the gate activity. Shell is the shell that runs a
// command (default /bin/sh): a gate is a line a person would type.
// AgentDir and Getenv are where the worker reads the user's settings
// (trustedProjects), as profiles.Activities does.
type Activities struct {
	Shell    string
	AgentDir string
	Getenv   func(string) string
}

// heartbeatEvery is how often a running gate reports: the activity's
// heartbeat timeout (the workflow's) is three times it, so a worker that
// dies mid-command is noticed in seconds, not at the command's timeout.
const heartbeatEvery = 10 * time.Second

// killGrace is how long a command that outlived its timeout has after
// SIGTERM before SIGKILL: a test runner's own clean-up.
const killGrace = 5 * time.Second

// keepBytes bounds what of a command's output is held: its end is what
// says why it failed, and api.GateOutputChars of it is reported.
const keepBytes = 64 << 10

// RunGate runs in.Command with `sh -c` in in.Cwd, in a process group of
// its own, stdin from /dev/null; past in.TimeoutSeconds the group is
// ended. A command that fails is a result (ExitCode, Output), not an
// error: only a command that cannot start at all is one.
func (a *Activities) RunGate(ctx context.Context, in api.GateInput) (api.GateResult, error) {
	if err := a.trusted(in); err != nil {
		return api.GateResult{}, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.CodeOf(err)), err)
	}
	shell := a.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	timeout := time.Duration(in.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = api.DefaultGateTimeoutSeconds * time.Second
	}
	out := &tailBuffer{max: keepBytes}
	cmd := exec.Command(shell, "-c", in.Command)
	cmd.Dir = in.Cwd
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a timeout ends all of it; and it dies
	// with the worker (Pdeathsig), whose retry runs the gate again.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		// A retry after this gate's worker died: end what the earlier
		// attempt started, if anything of it is left.
		var prev gateBeat
		if activity.GetHeartbeatDetails(ctx, &prev) == nil && prev.Pgid > 0 {
			_ = syscall.Kill(-prev.Pgid, syscall.SIGKILL)
		}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return api.GateResult{}, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("gate of step %q: cannot run %q in %s: %v", in.Step, in.Command, in.Cwd, err))
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	beat := time.NewTicker(heartbeatEvery)
	defer beat.Stop()
	res := api.GateResult{}
	var waitErr error
	for finished := false; !finished; {
		select {
		case waitErr = <-done:
			finished = true
		case <-beat.C:
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, gateBeat{Pgid: cmd.Process.Pid, ElapsedMS: time.Since(start).Milliseconds()})
			}
		case <-deadline.C:
			res.TimedOut = true
			waitErr = endGroup(cmd, done)
			finished = true
		case <-ctx.Done():
			_ = endGroup(cmd, done)
			return api.GateResult{}, ctx.Err()
		}
	}
	res.DurationMS = time.Since(start).Milliseconds()
	var exit *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exit):
		res.ExitCode = exit.ExitCode()
		if res.ExitCode < 0 {
			res.ExitCode = 128 + int(syscall.SIGKILL)
		}
	default:
		res.ExitCode = -1
	}
	if res.TimedOut {
		fmt.Fprintf(out, "\n[gate timed out after %s]\n", timeout)
	}
	res.Output = lastChars(out.String(), api.GateOutputChars)
	return res, nil
}

// trusted checks again, where the command would run, that a project's
// saved plan may run gates (profiles.CheckPlanGates): the client checked
// when it read the plan, but a workflow's input can be written by hand.
func (a *Activities) trusted(in api.GateInput) error {
	if in.Source == nil || in.Source.Scope != string(profiles.ScopeProject) {
		return nil
	}
	getenv := a.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	cfg, err := profiles.LoadConfig(a.AgentDir, "", getenv)
	if err != nil {
		return err
	}
	plan := api.Plan{Steps: []api.Step{{Key: in.Step, Task: "gate", Gate: &api.Gate{Command: in.Command}}}}
	return profiles.CheckPlanGates(cfg, a.AgentDir, plan, in.Source)
}

// gateBeat is a running gate's heartbeat: its process group, which a retry
// ends, and how long it has run.
type gateBeat struct {
	Pgid      int   `json:"pgid"`
	ElapsedMS int64 `json:"elapsedMs"`
}

// endGroup ends the command's process group: SIGTERM, then SIGKILL after
// killGrace; it returns the command's wait error.
func endGroup(cmd *exec.Cmd, done <-chan error) error {
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(killGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-done
	}
}

// lastChars is the end of s, at most n characters, valid UTF-8.
func lastChars(s string, n int) string {
	s = string(bytes.ToValidUTF8([]byte(s), []byte("?")))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return "…" + string(r[len(r)-n:])
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
