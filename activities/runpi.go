package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// RunPi is the activity of one child pi turn. This file is its frame: the
// input checked, the session file found, locked and recovered from an
// interrupted attempt, the prompt chosen, and the ended run reported and
// observed. The child itself runs in childrun.go with the command line of
// childargs.go, and its result is made in result.go.

// Limits of the delegate contract, with their defaults and ranges.
const (
	maxExtendDebounceSeconds = 300
	maxLoopingToolCount      = 50
)

// ContinuationPrompt is sent when an attempt resumes a session file that an
// interrupted attempt (a worker crash) left behind.
const ContinuationPrompt = "Your previous run of this task was interrupted before it finished (the process running it stopped). " +
	"Continue the same task from where you left off; do not start over. When you are done, call subagent_finalize with your result."

// ContinuationPromptNoFinalize is the same for a profile without finalize.
const ContinuationPromptNoFinalize = "Your previous run of this task was interrupted before it finished (the process running it stopped). " +
	"Continue the same task from where you left off; do not start over, and end with your complete answer."

// SessionFile is where a session's pi transcript lives: the sessions contract's layout,
// <data dir>/sessions/<cwd-hash>/<agent>_<sessionId>.jsonl.
func SessionFile(dataDir, cwd, agent, sessionID string) string {
	sum := sha256.Sum256([]byte(cwd))
	return filepath.Join(dataDir, "sessions", hex.EncodeToString(sum[:8]), api.AgentName(agent)+"_"+sessionID+".jsonl")
}

// validateInput checks a run's input on the worker that runs it: its cwd must
// be a folder here.
func validateInput(in api.RunPiInput) error {
	if err := api.ValidateName("session ID", in.SessionID); err != nil {
		return err
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return errcode.New(errcode.InvalidInput, "prompt must not be empty")
	}
	if in.Agent != "" {
		if err := api.ValidateName("agent", in.Agent); err != nil {
			return err
		}
	}
	if err := api.ValidateCwd(in.Cwd); err != nil {
		return err
	}
	if info, err := os.Stat(in.Cwd); err != nil || !info.IsDir() {
		return errcode.Errorf(errcode.InvalidInput, "cwd %s is not a folder on this worker", in.Cwd)
	}
	for _, f := range in.Files {
		if err := f.Validate(); err != nil {
			return err
		}
	}
	return validateFallbacks(in.FallbackModels)
}

func clampInt(v *int, def, lo, hi int) int {
	if v == nil {
		return def
	}
	return min(max(*v, lo), hi)
}

// RunPi runs one child pi turn to its end and reports what it produced.
//
// Retry policy: what the child did is a result, never an activity failure:
// a provider error, a finalize with status ERROR, an unknown model (pi
// exits non-zero), a timeout, a loop or an output over the limits all come
// back as a result with an error code, so Temporal does not run them again.
// Bad input fails without retry. Only the worker's own trouble is retried:
// the worker stopped or crashed (heartbeat timeout), the session folder could
// not be written. A retry continues the session file when the interrupted
// attempt left one (ContinuationPrompt) and runs the original prompt again
// when it did not.
//
// A run with in.Worktree runs its child in the session's git worktree
// (worktree.go): made before anything of the run, its change captured and
// the worktree removed however the run ends. A checkout that cannot have
// one (no repository, uncommitted changes, a bad base ref) is a result
// with the error's code, not retried.
func (a *Activities) RunPi(ctx context.Context, in api.RunPiInput) (res api.RunPiResult, err error) {
	if err := validateInput(in); err != nil {
		return api.RunPiResult{}, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.CodeOf(err)), err)
	}
	var admission profiles.Admission
	if a.cfg.Admit != nil {
		var err error
		if admission, err = a.cfg.Admit(in); err != nil {
			activity.GetLogger(ctx).Warn("child run refused", "session", in.SessionID, "agent", api.AgentName(in.Agent),
				"profile", in.Profile, "error", err)
			return api.RunPiResult{}, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.CodeOf(err)), err)
		}
		if admission.Context != nil {
			activity.GetLogger(ctx).Warn("context files another user owns are left out of the child's prompt", "session", in.SessionID,
				"files", admission.Context.LeftOut)
			in = admission.Context.Apply(in)
		}
	}
	info := activity.GetInfo(ctx)
	res = api.RunPiResult{
		SessionFile: SessionFile(a.cfg.DataDir, in.Cwd, in.Agent, in.SessionID),
		Attempt:     info.Attempt,
	}
	if err := os.MkdirAll(filepath.Dir(res.SessionFile), 0o700); err != nil {
		return res, fmt.Errorf("session folder: %w", err)
	}

	var prior api.Progress
	hasPrior := info.Attempt > 1 && activity.HasHeartbeatDetails(ctx)
	if hasPrior {
		_ = activity.GetHeartbeatDetails(ctx, &prior)
	}
	lock, err := lockSession(ctx, res.SessionFile, func() { a.recordHeartbeat(ctx, prior) })
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, err
	}
	// The lock is the session's until its pi has exited: a run that
	// settled returns before that (see outcome.exiting).
	unlock := lock.unlock
	defer func() { unlock() }()

	// Where this run begins in the session file: recorded by its first
	// attempt, so that a retry knows which messages the interrupted
	// attempts wrote, even if they died before their first heartbeat.
	key := runKey(info)
	if info.Attempt > 1 {
		// This attempt holds the session's lock: an earlier one has ended,
		// and if its worker died, its pi's tools may run on. End them.
		if n := killLeftovers(lock.last()); n > 0 {
			activity.GetLogger(ctx).Warn("ended what a dead attempt left running", "session", in.SessionID, "processes", n)
		}
	}
	// A warm child's link to its slot, left by a worker that died while the
	// child ran (and its child with it, or ended just above): the file goes
	// in place. Not while this worker keeps a child for the session, which
	// writes its slot still.
	if a.pool == nil || !a.pool.holdsKept(res.SessionFile) {
		if err := a.settleStaleSlot(res.SessionFile); err != nil {
			return res, fmt.Errorf("session file: %w", err)
		}
	}
	// The task's own folder: the child's cwd may become a worktree's.
	userCwd := in.Cwd
	// What the run heartbeats while it is busy with git: the interrupted
	// attempt's progress until this one has its own.
	beat := func() { a.recordHeartbeat(ctx, prior) }
	// Where a child whose run settled is still exiting: its worktree is
	// captured once it has.
	var exiting <-chan struct{}
	if in.Worktree != nil {
		stop := beatEvery(ctx, a.cfg.HeartbeatInterval, beat)
		wt, werr := a.enterWorktree(ctx, in, res.SessionFile)
		stop()
		if werr != nil {
			if cat := errcode.CodeOf(werr).Category(); cat == errcode.CategoryInvalidInput {
				// The checkout is the caller's to fix: a result, not run
				// again.
				activity.GetLogger(ctx).Warn("worktree refused", "session", in.SessionID, "error", werr)
				res.Error = errcode.NewInfo(errcode.CodeOf(werr), a.sanitizer.Sanitize(werr.Error()))
				return res, nil
			}
			return res, fmt.Errorf("worktree: %w", werr)
		}
		in.Cwd = wt.cwd()
		defer func() {
			if exiting != nil {
				// pi has settled its turn and is exiting: its tools are
				// done, and what it changed is on disk once it has.
				<-exiting
			}
			res, err = a.leaveWorktree(ctx, wt, in, res, err, beat)
		}()
	}
	if from, err := importLegacySession(a.cfg.LegacySessionsDir, userCwd, in.Agent, in.SessionID, res.SessionFile); err != nil {
		activity.GetLogger(ctx).Warn("could not import a session file of the sessions contract's extension", "session", in.SessionID, "error", err)
	} else if from != "" {
		activity.GetLogger(ctx).Info("imported a session file", "session", in.SessionID, "from", from)
	}
	if in.ForkFrom != "" {
		if forked, err := a.fork(ctx, in, res.SessionFile); err != nil {
			if !errcode.Is(err, errcode.InvalidInput) {
				return res, fmt.Errorf("session file: %w", err)
			}
			// The parent's file is the caller's mistake, not the worker's:
			// a result, not run again.
			res.Error = errcode.NewInfo(errcode.InvalidInput, a.sanitizer.Sanitize(err.Error()))
			return res, nil
		} else if forked {
			activity.GetLogger(ctx).Info("child session forked from its parent's", "session", in.SessionID, "parent", a.sanitizer.Sanitize(in.ForkFrom))
		}
	}
	if err := a.pointSession(res.SessionFile, in.Cwd, in.Worktree != nil); err != nil {
		return res, fmt.Errorf("session file: %w", err)
	}
	msgs, _ := readMessages(res.SessionFile)
	res.MessagesBefore = -1
	if info.Attempt > 1 {
		if rec, ok := lock.record(key); ok {
			res.MessagesBefore = rec.MessagesBefore
		} else if hasPrior {
			res.MessagesBefore = prior.MessagesBefore
		}
	}
	if hasPrior {
		// The models an interrupted attempt gave up on stay given up on,
		// and named in the result.
		res.Fallbacks = prior.Fallbacks
	}
	if res.MessagesBefore < 0 || res.MessagesBefore > len(msgs) {
		res.MessagesBefore = len(msgs)
	}
	rec := runRecord{Run: key, MessagesBefore: res.MessagesBefore}
	if err := lock.write(rec); err != nil {
		return res, fmt.Errorf("session lock: %w", err)
	}
	earlier := replayRun(msgs[res.MessagesBefore:], a.sanitizer)
	// A run whose finalize is optional ended with either.
	earlierEnded := runEnded(earlier, in.NoFinalize) || in.FinalizeOptional && runEnded(earlier, true)
	if info.Attempt > 1 && (earlierEnded || askedQuestion(msgs[res.MessagesBefore:])) {
		return a.recovered(ctx, in, res, earlier, admission.OutputMaxChars), nil
	}
	// The turn's time runs from its first attempt: a retry (the worker died,
	// or hung past Temporal's own timeout) after the ceiling ends the turn
	// with SUBAGENT_TIMEOUT instead of starting the model again.
	left := in.Ceiling() - time.Since(info.ScheduledTime)
	if info.Attempt > 1 && left <= 0 {
		return a.expired(ctx, in, res, earlier, admission.OutputMaxChars), nil
	}

	prompt := in.Prompt
	if len(msgs) > res.MessagesBefore {
		// An interrupted attempt got the prompt to the model: continue its
		// conversation instead of starting the task over.
		res.Continued = true
		prompt = ContinuationPrompt
		if in.NoFinalize {
			prompt = ContinuationPromptNoFinalize
		}
	} else if ctxFiles := FileContext(in.Cwd, in.Files); ctxFiles != "" {
		prompt = ctxFiles + prompt
	}

	run := &childRun{
		a:          a,
		in:         in,
		timeout:    in.Timeout(),
		debounce:   time.Duration(clampInt(in.ExtendDebounceSeconds, api.DefaultExtendDebounceSeconds, 0, maxExtendDebounceSeconds)) * time.Second,
		loopMax:    clampInt(in.LoopingToolCount, api.DefaultLoopingToolCount, 0, maxLoopingToolCount),
		prior:      earlier.Usage,
		priorCalls: earlier.WorkCalls(),
		attempt:    info.Attempt,
		before:     res.MessagesBefore,
		ceiling:    left,
		// The task's own cap, where its settings give one.
		outputMax: admission.OutputMaxChars,
		// Where a retry finds this run's process group, should the worker
		// die with it.
		started: func(p *proc) {
			rec.Pgid, rec.Mark = p.pid, p.mark
			_ = lock.write(rec)
		},
	}
	run.stream.MaxTimeline = clampInt(in.MaxEvents, api.DefaultMaxEvents, 0, api.MaxEventsCeiling)
	run.stream.Sanitizer = a.sanitizer
	start := time.Now()
	beat = func() { a.recordHeartbeat(ctx, run.progress(time.Since(start))) }
	log := activity.GetLogger(ctx)
	log.Info("child run started", "session", in.SessionID, "agent", api.AgentName(in.Agent), "turn", in.Turn,
		"attempt", info.Attempt, "continued", res.Continued, "model", in.Model)
	outcome := a.runModels(ctx, run, &res, admission, prompt)
	exiting = outcome.exiting
	if outcome.exiting != nil {
		unlock = func() {
			go func() {
				<-outcome.exiting
				lock.unlock()
			}()
		}
	}
	res.Warm, res.Early = outcome.warm && !outcome.early, outcome.early
	a.fill(&res, run, outcome)
	if res.Model == "" && len(res.Fallbacks) > 0 {
		// The last fallback model never answered (pi did not start it):
		// it is still the one that ran last.
		res.Model = run.in.Model
	}
	a.observe(in, res, outcome, run.stream.Usage)
	ended := []any{"session", in.SessionID, "agent", api.AgentName(in.Agent), "turn", in.Turn, "attempt", info.Attempt,
		"exitCode", res.ExitCode, "elapsedMs", res.DurationMS, "warm", res.Warm, "early", res.Early, "toolCalls", res.ToolCalls,
		"inputTokens", run.stream.Usage.Input, "outputTokens", run.stream.Usage.Output, "finalized", res.Finalize != nil}
	if res.Error != nil {
		ended = append(ended, "error", res.Error.Code)
	}
	if len(res.Fallbacks) > 0 {
		ended = append(ended, "fallbacks", len(res.Fallbacks), "model", res.Model)
	}
	log.Info("child run ended", ended...)

	switch outcome.stop {
	case stopCancelled:
		if errors.Is(ctx.Err(), context.Canceled) {
			res.Error = errcode.NewInfo(errcode.Cancelled, "Cancelled while running")
			return res, temporal.NewCanceledError(res)
		}
		return res, ctx.Err()
	case stopWorker:
		// The next attempt, on this worker or another, continues the session.
		return res, temporal.NewApplicationError("the worker stopped while the child ran; the next attempt continues its session", "WORKER_STOPPED")
	}
	return res, nil
}

// recovered is the result of a run whose interrupted attempt had already
// ended it (see runEnded): read from the session file, not run again.
func (a *Activities) recovered(ctx context.Context, in api.RunPiInput, res api.RunPiResult, earlier Stream, outputMax int) api.RunPiResult {
	res.Recovered = true
	res = a.notRunAgain(in, res, earlier, outcome{}, outputMax)
	activity.GetLogger(ctx).Info("child run recovered from its session file", "session", in.SessionID, "agent", api.AgentName(in.Agent),
		"turn", in.Turn, "attempt", res.Attempt, "finalized", res.Finalize != nil)
	return res
}

// expired is the result of a retry that came after the turn's ceiling:
// what the interrupted attempts wrote, and SUBAGENT_TIMEOUT.
func (a *Activities) expired(ctx context.Context, in api.RunPiInput, res api.RunPiResult, earlier Stream, outputMax int) api.RunPiResult {
	res = a.notRunAgain(in, res, earlier, outcome{stop: stopTimeout}, outputMax)
	activity.GetLogger(ctx).Info("child run past its ceiling: not run again", "session", in.SessionID, "turn", in.Turn, "attempt", res.Attempt)
	return res
}

// notRunAgain fills the result of an attempt that does not start pi from
// what the interrupted attempts wrote in the session file, ended as out
// says, its output cut to outputMax (0: the worker's cap).
func (a *Activities) notRunAgain(in api.RunPiInput, res api.RunPiResult, earlier Stream, out outcome, outputMax int) api.RunPiResult {
	run := &childRun{a: a, in: in, timeout: in.Timeout(), stream: earlier, outputMax: outputMax}
	a.fill(&res, run, out)
	a.observe(in, res, out, earlier.Usage)
	return res
}

// observe reports the run to the metrics, if any, with this attempt's own
// usage (res.Usage also counts interrupted attempts, reported by them).
func (a *Activities) observe(in api.RunPiInput, res api.RunPiResult, out outcome, used api.Usage) {
	if a.cfg.Observer == nil {
		return
	}
	result := "completed"
	switch {
	case out.stop == stopCancelled:
		result = "cancelled"
	case out.stop == stopWorker:
		result = "worker_stopped"
	case res.Error != nil:
		result = strings.ToLower(string(res.Error.Code))
	}
	a.cfg.Observer.ChildRun(api.AgentName(in.Agent), result, out.elapsed, used)
}
