// Package gates runs a plan step's verification command (its `gate`) on
// the worker, in the step's folder: the check that decides whether a
// child's work is accepted (docs/plans.md, "Gates").
package gates

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Activities holds the gate activity. Shell is the shell that runs a
// command (default /bin/sh): a gate is a line a person would type.
// AgentDir and Getenv are where the worker reads the user's settings
// (trustedProjects), as profiles.Activities does. Procs are the worker's
// activities, whose reaper starts the command: in the reaper's tree it,
// and all it starts, die with the worker, as a child pi's tools do.
type Activities struct {
	Shell    string
	AgentDir string
	Getenv   func(string) string
	Procs    *activities.Activities
}

// heartbeatEvery is how often a running gate reports: the activity's
// heartbeat timeout (the workflow's) is three times it, so a worker that
// dies mid-command is noticed in seconds, not at the command's timeout.
const heartbeatEvery = 10 * time.Second

// killGrace is how long a command that outlived its timeout has after
// SIGTERM before SIGKILL: a test runner's own clean-up.
const killGrace = 5 * time.Second

// drainWait bounds the wait for the end of the command's output once it
// exited and its group was killed: the reaper has ended what it left, so
// the pipe closes at once; a descriptor passed out of the tree (to a
// process no kill reaches) must not hold the result back.
const drainWait = 2 * time.Second

// keepBytes bounds what of a command's output is held: its end is what
// says why it failed, and api.GateOutputChars of it is reported.
const keepBytes = 64 << 10

// RunGate runs in.Command with `sh -c` in in.Cwd, started by the worker's
// reaper in a process group of its own, stdin from /dev/null; past
// in.TimeoutSeconds the group is ended. A command that fails is a result
// (ExitCode, Output), not an error: only a command that cannot start at
// all is one. Runs counts the times the command started, this attempt's
// predecessors' included (from their heartbeat): a worker that died
// mid-command took the command with it, and this retry runs it again; an
// attempt that never started it (a worker that died first, a start that
// failed) counts none (but one whose worker died between recording the run
// and starting it, a moment, counts it). An error carries that count too
// (api.GateRunCount in its details), so that a gate that fails for good is
// counted as it ran.
func (a *Activities) RunGate(ctx context.Context, in api.GateInput) (api.GateResult, error) {
	// Runs before this attempt: each heartbeat carries the runs started so
	// far, the one recorded just before a start included.
	prevRuns := 0
	if activity.IsActivity(ctx) {
		var prev gateBeat
		if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &prev) == nil {
			// A retry after this gate's worker died: its reaper ended the
			// command with it; should anything of it still run (the reaper
			// was killed first), end it before the command runs again.
			activities.KillMarked(prev.Mark)
			// A beat of a worker from before Runs was kept still says a
			// run started.
			prevRuns = max(prev.Runs, 1)
		}
	}
	runs := prevRuns
	fail := func(err error, nonRetryable bool, code string) error {
		return temporal.NewApplicationErrorWithOptions(err.Error(), code, temporal.ApplicationErrorOptions{
			NonRetryable: nonRetryable, Cause: err, Details: []any{api.GateRunCount{Runs: runs}}})
	}
	if err := a.trusted(in); err != nil {
		return api.GateResult{}, fail(err, true, string(errcode.CodeOf(err)))
	}
	if a.Procs == nil {
		return api.GateResult{}, fail(errcode.New(errcode.Failed, "the worker runs no gate: it has no reaper to start the command under"), false, "")
	}
	shell := a.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	timeout := time.Duration(in.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = api.DefaultGateTimeoutSeconds * time.Second
	}
	// The run is counted where a retry reads it before the command starts:
	// the heartbeat after the start goes out batched, and a worker killed
	// in the moment after it started the command (as under load) left its
	// retry no count of that run.
	if err := a.Procs.RecordHeartbeatNow(ctx, gateBeat{Runs: runs + 1}); err != nil {
		activity.GetLogger(ctx).Warn("could not record the gate's run before it starts; a retry after a crash may count one run less", "step", in.Step, "error", err)
	}
	p, output, err := a.start(shell, in)
	if err != nil {
		// Not run after all: the record says so again.
		_ = a.Procs.RecordHeartbeatNow(ctx, gateBeat{Runs: runs})
		return api.GateResult{}, fail(errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("gate of step %q: cannot run %q in %s: %v", in.Step, in.Command, in.Cwd, err)), false, "")
	}
	runs++
	res := api.GateResult{Runs: runs}
	// The pipe's read end is closed on every way out (again, after the
	// output was read: harmless).
	defer output(0)
	start := time.Now()
	beat := func() {
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, gateBeat{Pgid: p.Pid, Mark: p.Mark, ElapsedMS: time.Since(start).Milliseconds(), Runs: runs})
		}
	}
	// At once: a worker that dies in the command's first seconds leaves
	// its retry the mark.
	beat()
	done := make(chan ended, 1)
	go func() {
		st, err := p.Wait()
		done <- ended{st, err}
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(heartbeatEvery)
	defer ticker.Stop()
	var end ended
	for finished := false; !finished; {
		select {
		case end = <-done:
			finished = true
		case <-ticker.C:
			beat()
		case <-deadline.C:
			res.TimedOut = true
			end = endGroup(p.Pid, done)
			finished = true
		case <-ctx.Done():
			_ = endGroup(p.Pid, done)
			return api.GateResult{}, ctx.Err()
		}
	}
	// No kill of the group here: the reaper has waited for the command, so
	// its pid, and the group's ID, may be another's by now. Its Wait swept
	// what the command left in the reaper's tree, in its group or out.
	res.DurationMS = time.Since(start).Milliseconds()
	if end.err != nil {
		// The reaper died with the command (it ends what is below it): the
		// activity's retry runs the command again.
		return api.GateResult{}, fail(fmt.Errorf("gate of step %q: %w", in.Step, end.err), false, "")
	}
	switch ws := end.status; {
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.ExitCode = 128 + int(ws.Signal())
	default:
		res.ExitCode = -1
	}
	out := output(drainWait)
	if res.TimedOut {
		out += fmt.Sprintf("\n[gate timed out after %s]\n", timeout)
	}
	res.Output = lastChars(out, api.GateOutputChars)
	return res, nil
}

// ended is how the command ended, as the reaper told.
type ended struct {
	status syscall.WaitStatus
	err    error
}

// start starts the command under the reaper, its stdout and stderr one
// pipe; output waits (at most its argument) for the pipe's end and returns
// the end of what came through it.
func (a *Activities) start(shell string, in api.GateInput) (*activities.ReapedProcess, func(time.Duration) string, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, err
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(shell, "-c", in.Command)
	cmd.Dir = in.Cwd
	// Environ, not os.Environ: it adds PWD for Dir, as a shell started
	// there would have it.
	cmd.Env = append(cmd.Environ(), api.GateArgsEnv(in.Args)...)
	p, err := a.Procs.StartReaped(cmd, [3]*os.File{null, w, w})
	// The command holds its end now (or never will).
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return nil, nil, err
	}
	out := &tailBuffer{max: keepBytes}
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(out, r)
	}()
	output := func(wait time.Duration) string {
		select {
		case <-read:
		case <-time.After(wait):
		}
		_ = r.Close()
		return out.String()
	}
	return p, output, nil
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

// gateBeat is a running gate's heartbeat: its process group, its mark
// (what a retry ends of it, activities.KillMarked), how long it has run,
// and the runs started so far, this one's included (api.GateRunCount's
// field, which the workflow reads of a gate whose last attempt timed out).
type gateBeat struct {
	Pgid      int    `json:"pgid"`
	Mark      string `json:"mark,omitempty"`
	ElapsedMS int64  `json:"elapsedMs"`
	Runs      int    `json:"runs"`
}

// endGroup ends the command's process group: SIGTERM, then SIGKILL after
// killGrace; it returns how the command ended. The reaper keeps the
// command's pid until it is waited for, so the group's ID is still its own.
func endGroup(pgid int, done <-chan ended) ended {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case e := <-done:
		return e
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
