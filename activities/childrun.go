package activities

import (
	"context"
	"io"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/durable-pi/subagents/api"
)

// One child pi run to its end (childRun.run): a warm child of the pool or
// pi started now, its events read as they come, and pi stopped once the
// run's timeout, loop limit, budget or output limit is reached, the attempt
// is cancelled or the worker stops.

type stopReason int

const (
	stopNone      stopReason = iota
	stopTimeout              // the timeout and its extension ran out
	stopLoop                 // the same tool call repeated
	stopBudget               // the run's budget is spent
	stopOverflow             // stdout and stderr passed MaxStreamBytes
	stopCancelled            // the activity was cancelled
	stopWorker               // the worker is stopping
)

// outcome is how a child process ended.
type outcome struct {
	stop     stopReason
	warm     bool // a child of the pool (in RPC mode) ran it
	early    bool // ... started for this task as its delegation was resolved
	spawnErr error
	readErr  error
	waitErr  error
	exitCode int
	stderr   string
	elapsed  time.Duration
	// exiting, when set, closes once pi has exited: the run settled and
	// returned without waiting for it (see childRun.run).
	exiting <-chan struct{}
	// budget says what of the run's budget was spent (stopBudget).
	budget string
}

// childRun is one pi process and what was read from it.
type childRun struct {
	a        *Activities
	in       api.RunPiInput
	timeout  time.Duration
	debounce time.Duration
	loopMax  int
	// ceiling is what is left of the turn's hard limit (Ceiling).
	ceiling time.Duration
	// spent is how long the attempt's earlier runs on other models took
	// (runModels): the timeout and the ceiling count them.
	spent time.Duration
	// started, when set, is told pi's process once it runs.
	started func(p *proc)
	prior   api.Usage
	// priorCalls are the tool calls of the interrupted attempts that a
	// budget counts (Stream.WorkCalls).
	priorCalls int
	attempt    int32
	before     int
	env        []string
	stream     Stream
	// outputMax caps the output in the result (the task's settings); 0:
	// the worker's Config.OutputMaxChars.
	outputMax int
	// fallbacks are the models the turn gave up on so far (runModels),
	// heartbeated so that a retry keeps them.
	fallbacks []api.Fallback
}

// run runs the child to its end: a warm child of the pool when one
// matches spec, else pi started now with args.
func (r *childRun) run(ctx context.Context, args []string, spec warmSpec, sessionFile, prompt string) outcome {
	// Pdeathsig fires when the thread that started pi ends, not the
	// process: keep this goroutine on its thread until pi has been reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if r.stream.Started.IsZero() {
		r.stream.Started = start
	}
	out := outcome{}
	// What the stream counted before this run: an earlier run on another
	// model (runModels) shares it.
	eventsBefore := r.stream.Events
	var p *proc
	// Until the loop below heartbeats, waiting for a child started early
	// (seconds on a loaded machine: several pis starting at once) or for a
	// warm child to take the task must not pass the heartbeat timeout.
	stopBeat := r.beatMeanwhile(ctx, start)
	pool := r.a.pool
	if pool != nil && spec.key != "" {
		// The corrective run of a child that did not finalize goes on in the
		// same process, which still holds the conversation; any other run
		// takes a warm child and points it at its session file.
		if w := pool.takeKept(spec, sessionFile); w != nil {
			if err := sendPrompt(w, prompt); err != nil {
				w.discard()
			} else {
				p, out.warm = w, true
			}
		}
		if p == nil {
			if w, early := pool.take(ctx, spec); w != nil {
				if err := handOver(w, sessionFile, prompt); err != nil {
					activity.GetLogger(ctx).Warn("warm child refused the task; it runs cold", "error", err)
					w.discard()
				} else {
					p, out.warm, out.early = w, true, early
				}
			}
		}
		defer pool.release(spec)
	}
	if p == nil {
		var err error
		if p, err = startProc(r.a.reaper, r.a.cfg.Pi, args, r.in.Cwd, r.env, r.a.cfg.MaxStreamBytes); err != nil {
			stopBeat()
			return outcome{spawnErr: err, exitCode: -1}
		}
		// The prompt goes in on stdin, which pi in JSON mode takes as its
		// first prompt: as an argument it would be capped by the kernel's
		// 128 KiB per argument (a prompt with files[] reaches MiBs) and
		// shown to every local user by ps.
		go func(w io.WriteCloser) {
			_, _ = io.WriteString(w, prompt)
			_ = w.Close()
		}(p.stdin)
	}
	stopBeat()
	pid := p.pid
	if r.started != nil {
		r.started(p)
	}
	lines := p.lines
	overflow := p.overflow
	kept, settled, thenStarted := false, false, false

	heartbeat := time.NewTicker(r.a.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	deadline := time.NewTimer(r.timeout - r.spent)
	defer deadline.Stop()
	// The extension rules never run past the ceiling.
	var hardC <-chan time.Time
	if r.ceiling > 0 {
		hard := time.NewTimer(r.ceiling - r.spent)
		defer hard.Stop()
		hardC = hard.C
	}
	var idle *time.Timer // runs once the timeout passed while tools are still called
	var idleC <-chan time.Time
	workerStop := activity.GetWorkerStopChannel(ctx)

	stop := func(reason stopReason) {
		if out.stop == stopNone {
			out.stop = reason
			go r.a.terminate(pid, p.exited)
		}
	}
	// A warm child waits for commands after its run: closing stdin ends it.
	endRPC := func() {
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
	}
	done := ctx.Done()
	// detached: the attempt was cancelled because the server could not be
	// reached, and the child runs on.
	detached := false
	lastToolCall := time.Now()

	for lines != nil {
		select {
		case line, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			if out.stop != stopNone {
				// The result is the run as it was stopped: what a child
				// being ended still prints (another tool call of a loop,
				// more of a flood) would make it depend on how fast the
				// signal lands.
				continue
			}
			typ := r.stream.Apply(line)
			if !thenStarted && len(r.in.Then) > 0 && r.done(typ, out) {
				// What this run's end lets start begins now, beside the
				// child's exit and the result's way back.
				thenStarted = true
				r.a.StartEarly(r.in.Then)
			}
			if typ == "agent_settled" && out.warm && r.correctable(out) {
				// Kept for the corrective run the session sends next: the
				// process waits for its prompt, and the run is over.
				pool.keep(spec, sessionFile, p)
				kept = true
				lines = nil
				continue
			}
			if typ == "agent_settled" {
				// The turn is over and in the session file: the result
				// does not wait for pi's exit (tens of milliseconds, more
				// when V8 finishes optimizing code at exit).
				endRPC()
				settled = true
				lines = nil
				continue
			}
			if r.stream.CommandError != "" {
				endRPC()
			}
			if typ == "tool_execution_start" {
				p.toolsRan.Store(true)
				lastToolCall = time.Now()
				if idle != nil {
					idle.Reset(r.debounce)
				}
				if r.loopMax > 0 && r.stream.SameCallRun >= r.loopMax {
					stop(stopLoop)
				}
			}
			if spent := r.budgetStop(typ); spent != "" && out.stop == stopNone {
				out.budget = spent
				stop(stopBudget)
			}
		case <-heartbeat.C:
			if !detached {
				r.a.recordHeartbeat(ctx, r.progress(time.Since(start)))
			} else if r.a.cancelRequested(ctx, r.progress(time.Since(start))) {
				stop(stopCancelled)
			}
		case <-deadline.C:
			// The delegate contract: still calling tools → wait until debounce passes with
			// no tool call; else stop now.
			if r.debounce > 0 && time.Since(lastToolCall) < r.debounce && r.stream.ToolCallCount() > 0 {
				idle = time.NewTimer(r.debounce - time.Since(lastToolCall))
				idleC = idle.C
			} else {
				stop(stopTimeout)
			}
		case <-idleC:
			stop(stopTimeout)
		case <-hardC:
			stop(stopTimeout)
			hardC = nil
		case <-overflow:
			stop(stopOverflow)
			overflow = nil
		case <-workerStop:
			stop(stopWorker)
			workerStop = nil
		case <-done:
			done = nil
			if !serverUnreachable(ctx) {
				stop(stopCancelled)
				continue
			}
			// The SDK cancels the attempt when its heartbeats fail for
			// the heartbeat timeout, but the child never noticed the
			// server was gone: it runs on, so that no model call is paid
			// twice. This attempt reports its result if the server comes
			// back in time; else the retry waits for the session's lock,
			// then reads the result from the session file (recovered).
			detached = true
			activity.GetLogger(ctx).Warn("server unreachable: the child runs on", "session", r.in.SessionID, "cause", context.Cause(ctx))
		}
	}
	if idle != nil {
		idle.Stop()
	}
	out.stderr = p.stderr.String()
	switch {
	case kept:
	case settled:
		out.exiting = r.a.exitInBackground(p)
	default:
		out.waitErr = p.reap()
		out.readErr = p.readErr
		out.exitCode = p.exitCode()
	}
	if out.warm && !kept && out.stop == stopNone && r.stream.Events == eventsBefore && r.stream.CommandError == "" {
		// The warm child died before the task reached it (killed while
		// idle, its death not yet seen when the pool handed it out, so
		// the prompt went into its pipe): nothing of the run happened and
		// its reap has removed the session file's link to its slot. A
		// pool problem never fails a task: it runs cold.
		activity.GetLogger(ctx).Warn("warm child died before its task began; it runs cold", "pid", pid, "stderr", lastLine(out.stderr))
		return r.run(ctx, args, warmSpec{}, sessionFile, prompt)
	}
	out.elapsed = time.Since(start)
	return out
}

// done is whether the event typ says the run's task is done, with
// nothing stopped: its child finalized with SUCCESS, or settled where no
// finalize is asked for.
func (r *childRun) done(typ string, out outcome) bool {
	if out.stop != stopNone {
		return false
	}
	if f := r.stream.Finalize; f != nil {
		return strings.EqualFold(f.Status, "SUCCESS")
	}
	return typ == "agent_settled" && (r.in.NoFinalize || r.in.FinalizeOptional) && r.stream.CommandError == "" && !r.stream.Failed()
}

// correctable is whether the run ended as one the session answers with
// corrective feedback (no subagent_finalize, nothing stopped or failed):
// its warm child is worth keeping for that next run.
func (r *childRun) correctable(out outcome) bool {
	s := &r.stream
	return !r.in.NoFinalize && !r.in.FinalizeOptional && s.Finalize == nil && out.stop == stopNone && s.CommandError == "" && !s.Failed()
}

// sendPrompt sends a warm or kept child its prompt; its answer and events
// come through the run's loop.
func sendPrompt(w *proc, prompt string) error {
	return writeCommand(w, "prompt", map[string]any{"type": "prompt", "message": prompt})
}

// handOver points a warm child at the run's session file and sends the
// prompt; its events then come as a cold child's do. A new session takes
// the child's own slot as it is (slot.go); an existing one is continued
// through switch_session.
func handOver(w *proc, sessionFile, prompt string) error {
	if !linkSlot(w, sessionFile) {
		if err := command(w, "switch", map[string]any{"type": "switch_session", "sessionPath": sessionFile}); err != nil {
			return err
		}
	}
	if err := sendPrompt(w, prompt); err != nil {
		unlinkSlot(w)
		return err
	}
	return nil
}

// terminate sends SIGTERM to pi, which ends its own tool processes, then
// SIGKILL to its whole process group unless pi exited (exited closed, after
// which its pid may belong to another process) within the grace period.
func (a *Activities) terminate(pid int, exited <-chan struct{}) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	grace := time.NewTimer(a.cfg.KillGrace)
	defer grace.Stop()
	select {
	case <-exited:
	case <-grace.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
