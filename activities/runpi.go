package activities

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Limits of the delegate contract, with their defaults and ranges.
const (
	maxExtendDebounceSeconds = 300
	maxLoopingToolCount      = 50
)

// resultToolRows is how many tool rows a result keeps (the latest ones);
// heartbeatToolRows the same for progress. Both keep history small.
const (
	resultToolRows    = 20
	heartbeatToolRows = 10
	lastTextChars     = 500
)

// verdictChars bounds a finalize's verdict in a result: it is one word (a
// plan's verdicts are at most 32 characters), and one the model made long
// must not grow a history.
const verdictChars = 64

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
	lock, err := lockSession(ctx, res.SessionFile, func() { activity.RecordHeartbeat(ctx, prior) })
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
	beat := func() { activity.RecordHeartbeat(ctx, prior) }
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
	beat = func() { activity.RecordHeartbeat(ctx, run.progress(time.Since(start))) }
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

// runSpec is a run's child environment and, with a pool, the warm spec a
// child must have been started with to serve it.
func (a *Activities) runSpec(in api.RunPiInput, admission profiles.Admission) ([]string, warmSpec) {
	env := a.childEnv(in.Depth, in.Model, append(apiKeyEnv(in.Model, admission.APIKey), admission.Env...))
	if a.pool == nil || in.Worktree != nil || profiles.Nested(in.Tools) {
		// A worktree is the session's alone and removed after each run:
		// no warm child could have been started in it, and none may be
		// kept in it. A child that delegates has its session ID in its
		// environment (profiles.ParentSessionEnv): no warm child started
		// for another session may serve it.
		return env, warmSpec{}
	}
	return env, a.specFor(a.flags(in), in.Cwd, env, a.loadedFiles(in))
}

// args is the pi command line of a cold child run; its prompt goes in on
// stdin.
func (a *Activities) args(in api.RunPiInput, sessionFile string) []string {
	return append([]string{"--mode", "json", "--session", sessionFile}, a.flags(in)...)
}

// flags are the child's pi flags but its mode, session and prompt: what a
// warm child must have been started with to serve the run.
func (a *Activities) flags(in api.RunPiInput) []string {
	var args []string
	if in.Model != "" {
		args = append(args, "--model", in.Model)
	}
	if in.Thinking != "" {
		args = append(args, "--thinking", in.Thinking)
	}
	var tools []string
	if !in.NoTools {
		tools = in.Tools
		if len(tools) == 0 {
			tools = api.DefaultTools
		}
	}
	if !in.NoFinalize {
		// contact_supervisor is a profile's to grant (its tools list it):
		// a child that asks stops until someone answers, which a parent
		// pi cannot do yet (docs/questions.md).
		tools = append(append([]string(nil), tools...), api.FinalizeToolName)
	}
	if len(tools) > 0 {
		args = append(args, "--tools", strings.Join(tools, ","))
	} else {
		args = append(args, "--no-tools")
	}
	// No discovered extensions: a child gets exactly what its profile names,
	// and never the parent's delegation tools.
	args = append(args, "--no-extensions")
	if !in.NoFinalize {
		args = append(args, "--extension", a.finalize)
	}
	for _, e := range in.Extensions {
		args = append(args, "--extension", e)
	}
	if in.NoSkills {
		args = append(args, "--no-skills")
	}
	for _, s := range in.Skills {
		args = append(args, "--skill", s)
	}
	if in.NoContextFiles {
		args = append(args, "--no-context-files")
	}
	switch {
	case in.SystemPrompt != "" && in.ReplaceSystemPrompt:
		args = append(args, "--system-prompt", in.SystemPrompt)
	case in.SystemPrompt != "":
		args = append(args, "--append-system-prompt", in.SystemPrompt)
	}
	for _, p := range in.AppendSystemPrompt {
		args = append(args, "--append-system-prompt", p)
	}
	return append(args, in.ExtraArgs...)
}

// loadedFiles are the files a child loads at its start besides pi: a warm
// child started before one of them changed must not serve.
func (a *Activities) loadedFiles(in api.RunPiInput) []string {
	files := append([]string(nil), in.Extensions...)
	if !in.NoFinalize {
		files = append(files, a.finalize)
	}
	return files
}

// apiKeyEnv passes a profile's apiKey in the environment, never on the
// command line: as PI_API_KEY (the delegate contract) and as the variable pi reads for the
// model's provider.
func apiKeyEnv(model, key string) []string {
	if key == "" {
		return nil
	}
	env := []string{"PI_API_KEY=" + key}
	if provider, _, ok := strings.Cut(model, "/"); ok && provider != "" {
		name, known := providerKeyVars[provider]
		if !known {
			name = strings.ToUpper(strings.ReplaceAll(provider, "-", "_")) + "_API_KEY"
		}
		env = append(env, name+"="+key)
	}
	return env
}

// providerKeyVars are the providers whose key variable is not simply
// <PROVIDER>_API_KEY (pi-ai's env-api-keys).
var providerKeyVars = map[string]string{
	"google":            "GEMINI_API_KEY",
	"google-vertex":     "GOOGLE_CLOUD_API_KEY",
	"huggingface":       "HF_TOKEN",
	"moonshotai":        "MOONSHOT_API_KEY",
	"vercel-ai-gateway": "AI_GATEWAY_API_KEY",
	"kimi-coding":       "KIMI_API_KEY",
}

// childEnv is the worker's environment, the configured additions, the
// markers that tell our extension it runs in a child and at which depth,
// Node 22 first on PATH, and extra (an apiKey).
func (a *Activities) childEnv(depth int, model string, extra []string) []string {
	// The worker's own environment goes through the policy, for this
	// child's model (a Bedrock child alone gets the static AWS keys); what
	// the worker's configuration names for children (Env) is meant for them.
	env := append(a.cfg.ChildEnvPolicy.FilterFor(model, os.Environ()), a.cfg.Env...)
	env = append(env, extra...)
	env = append(env, "PI_SUBAGENT_CHILD=1", "PI_SUBAGENT_DEPTH="+strconv.Itoa(max(depth, 1)))
	if a.cfg.PathPrefix != "" {
		path := os.Getenv("PATH")
		for _, kv := range a.cfg.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
			}
		}
		env = append(env, "PATH="+a.cfg.PathPrefix+string(os.PathListSeparator)+path)
	}
	return env
}

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
	stopBeat := r.beatWhileStarting(ctx, start)
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
	kept, settled := false, false

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
				activity.RecordHeartbeat(ctx, r.progress(time.Since(start)))
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

func (r *childRun) progress(elapsed time.Duration) api.Progress {
	rows := r.stream.ToolRows
	if len(rows) > heartbeatToolRows {
		rows = rows[len(rows)-heartbeatToolRows:]
	}
	// The rows were sanitized before their previews were cut (Stream);
	// the last text is sanitized whole, then its tail kept.
	clean := append([]api.ToolRow(nil), rows...)
	last := []rune(r.a.sanitizer.Sanitize(r.stream.FinalText))
	if len(last) > lastTextChars {
		last = last[len(last)-lastTextChars:]
	}
	return api.Progress{
		ToolRows:       clean,
		ToolCalls:      r.stream.ToolCallCount(),
		EventCount:     r.stream.Captured,
		Usage:          r.stream.Usage,
		Model:          r.stream.Model,
		LastText:       string(last),
		ElapsedMS:      elapsed.Milliseconds(),
		TimeoutSeconds: int(r.timeout / time.Second),
		Attempt:        r.attempt,
		PriorUsage:     r.prior,
		MessagesBefore: r.before,
	}
}

// serverUnreachable is whether the attempt's context ended because its
// heartbeats could not reach the server (the SDK's cause is then a
// transient gRPC error), not because the workflow cancelled it, the server
// no longer knows the attempt, or its time is up.
func serverUnreachable(ctx context.Context) bool {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
		return false
	}
	switch serviceerror.ToStatus(cause).Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// cancelRequested heartbeats an attempt whose context the SDK already
// cancelled (see serverUnreachable) through the client, the one way left to
// learn that the workflow asked to cancel it since. Any other answer (the
// server still away, or the attempt timed out and retried) lets the child
// run on: its retry reads the result from the session file.
func (a *Activities) cancelRequested(ctx context.Context, details api.Progress) bool {
	if a.cfg.Heartbeat == nil {
		return false
	}
	// One heartbeat interval: the next tick tries again.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.HeartbeatInterval)
	defer cancel()
	err := a.cfg.Heartbeat(hctx, activity.GetInfo(ctx).TaskToken, details)
	var cancelled *temporal.CanceledError
	return errors.As(err, &cancelled)
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

// fill turns what the run produced into the result: sanitized, capped, with
// the full output in the artifact file.
func (a *Activities) fill(res *api.RunPiResult, r *childRun, out outcome) {
	st := &r.stream
	z := a.sanitizer
	res.ExitCode = out.exitCode
	res.StopReason = st.StopReason
	res.Model = st.Model
	res.AutoRetries = st.AutoRetries
	res.Usage = r.prior.Add(st.Usage)
	res.ToolCalls = st.ToolCallCount()
	res.EventCount, res.Timeline = st.Captured, st.Timeline
	res.DurationMS = out.elapsed.Milliseconds()
	rows := st.ToolRows
	if len(rows) > resultToolRows {
		rows = rows[len(rows)-resultToolRows:]
	}
	// Sanitized before their previews were cut (Stream).
	res.ToolRows = append(res.ToolRows, rows...)

	full := z.Sanitize(st.FinalText)
	if f := st.Finalize; f != nil {
		res.Finalize = &api.Finalize{Status: f.Status, Result: z.Sanitize(f.Result), Error: z.Sanitize(f.Error),
			Verdict: clip(z.Sanitize(f.Verdict), verdictChars)}
		full = res.Finalize.Result
		if f.Status == "ERROR" {
			full = res.Finalize.Error
			if res.Finalize.Result != "" {
				full += "\n\n" + res.Finalize.Result
			}
		}
	}
	outputMax := a.cfg.OutputMaxChars
	if r.outputMax > 0 {
		outputMax = r.outputMax
	}
	// Cut once sanitized (above): a cut token would keep its tail.
	cut := Truncate(full, outputMax)
	res.Output = cut.Text
	res.OutputTruncated, res.OutputTotalChars, res.OutputReturnedChars = cut.Truncated, cut.TotalChars, cut.ReturnedChars
	if res.Finalize != nil {
		res.Finalize.Result = Truncate(res.Finalize.Result, outputMax).Text
		res.Finalize.Error = Truncate(res.Finalize.Error, outputMax).Text
	}
	if full != "" {
		res.ArtifactFile = artifactFile(res.SessionFile, r.in.Turn)
		if err := os.WriteFile(res.ArtifactFile, []byte(full), 0o600); err != nil {
			res.ArtifactFile = ""
		}
	}

	timeoutMsg := fmt.Sprintf("Timed out after %ds. Consider resuming with a longer timeout.", int(r.timeout/time.Second))
	switch {
	case out.spawnErr != nil:
		res.Error = errcode.NewInfo(errcode.Failed, "Failed to spawn sub-agent process: "+out.spawnErr.Error())
	case out.stop == stopTimeout:
		res.Error = errcode.NewInfo(errcode.Timeout, timeoutMsg)
	case out.stop == stopLoop:
		res.Error = errcode.NewInfo(errcode.LoopDetected, "Loop detected: sub-agent is repeating the same tool calls")
	case out.stop == stopBudget:
		res.Error = budgetError(out.budget)
	case errors.Is(out.readErr, errLineTooLong):
		res.Error = errcode.NewInfo(errcode.OutputTruncated, fmt.Sprintf(
			"A line of sub-agent output exceeded the %s limit; the child was stopped", sizeText(min(a.cfg.MaxStreamBytes, maxLineBytes))))
	case out.stop == stopOverflow:
		res.Error = errcode.NewInfo(errcode.OutputTruncated, fmt.Sprintf(
			"Sub-agent output exceeded the %s limit; the child was stopped", sizeText(a.cfg.MaxStreamBytes)))
	case out.stop != stopNone:
		// Cancelled or worker stop: RunPi decides what to return.
	case out.readErr != nil:
		res.Error = errcode.NewInfo(errcode.Failed, "reading pi's output: "+out.readErr.Error())
	case st.CommandError != "":
		// A warm child refused its prompt: nothing ran, and pi said why.
		res.Error = errcode.NewInfo(errcode.Failed, z.Sanitize("pi refused the run: "+st.CommandError))
	case st.Failed():
		msg := st.ErrorMessage
		if msg == "" {
			msg = "the model's response ended with stop reason " + st.StopReason
		}
		res.Error = errcode.NewInfo(errcode.Failed, z.Sanitize(msg))
	case out.waitErr != nil:
		msg := fmt.Sprintf("pi exited with code %d", out.exitCode)
		if tail := lastLine(out.stderr); tail != "" {
			msg += ": " + tail
		}
		res.Error = errcode.NewInfo(errcode.Failed, z.Sanitize(msg))
	case res.Finalize == nil && res.Output == "" && res.ToolCalls == 0 && !st.Settled:
		res.Error = errcode.NewInfo(errcode.Failed, "pi ended without an answer")
	case cut.Truncated:
		res.Error = errcode.NewInfo(errcode.OutputTruncated, fmt.Sprintf(
			"Output truncated to %d of %d characters; the full output is in %s", cut.ReturnedChars, cut.TotalChars, z.Sanitize(res.ArtifactFile)))
	}
	a.fillQuestions(res, st.ToolRows)
}

// artifactFile sits next to the session file: the full output of a turn.
func artifactFile(sessionFile string, turn int) string {
	return strings.TrimSuffix(sessionFile, ".jsonl") + fmt.Sprintf(".turn-%d.output.md", max(turn, 1))
}

// maxLineBytes bounds one line of pi's output or session file: pi cuts
// what a tool returns to the model at 50 KB, so even an event that repeats a
// large file write stays far below it, while a child printing without a
// newline is stopped before it holds the worker's memory.
const maxLineBytes = 64 << 20

// sizeText says n bytes in MiB, or KiB below one MiB.
func sizeText(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// errLineTooLong ends a reading whose line passed its bound.
var errLineTooLong = errors.New("a line is longer than the limit")

// readLines calls fn with each line of r (fn may keep it), holding at most
// maxLine bytes of a line: a longer one ends the reading at once with
// errLineTooLong (the caller decides what becomes of the rest of r).
func readLines(r io.Reader, maxLine int, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return errLineTooLong
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			fn(line)
			line = nil
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, br)
			return err
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// stderrTailBytes keeps the end of pi's stderr for error messages; pi writes
// its diagnostics there and the last lines say what went wrong.
const stderrTailBytes = 8 << 10

// tailBuffer keeps the last stderrTailBytes written to it.
type tailBuffer struct {
	buf []byte
	cut bool // bytes before buf were dropped
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

// String is what the buffer kept, from its first whole word: the word the
// cut went through may be the end of a token, which without its start has
// no shape the sanitizer knows.
func (t *tailBuffer) String() string {
	if !t.cut {
		return string(t.buf)
	}
	if i := bytes.IndexAny(t.buf, " \t\r\n"); i >= 0 {
		return string(t.buf[i:])
	}
	return ""
}

// beatWhileStarting heartbeats every interval until stop is called (it
// waits for the last heartbeat to be done, so the run's stream is the
// caller's again) or ctx ends: the heartbeats of a run whose child is not
// yet reading its events. stop may be called more than once.
func (r *childRun) beatWhileStarting(ctx context.Context, start time.Time) (stop func()) {
	stopBeats := beatEvery(ctx, r.a.cfg.HeartbeatInterval, func() {
		activity.RecordHeartbeat(ctx, r.progress(time.Since(start)))
	})
	var once sync.Once
	return func() { once.Do(stopBeats) }
}
