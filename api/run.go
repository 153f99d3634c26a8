package api

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

// A child run's limits and their defaults (docs/settings.md); the ranges
// are checked where the settings are read.
const (
	DefaultTimeoutSeconds        = 600
	DefaultExtendDebounceSeconds = 30
	DefaultLoopingToolCount      = 5
	// DefaultMaxEvents is the task contract's per-task event timeline cap; the
	// ceiling keeps a result's history small (an event is ~40 bytes).
	DefaultMaxEvents = 120
	MaxEventsCeiling = 1000
)

// DefaultTools are pi's own default tools, granted when a task names none.
var DefaultTools = []string{"read", "bash", "edit", "write"}

// RunPiInput is one turn of a child pi run, with its profile already
// resolved into pi arguments.
type RunPiInput struct {
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent"`
	// Turn numbers the turns of a session from 1; it names the artifact.
	Turn   int        `json:"turn,omitempty"`
	Prompt string     `json:"prompt"`
	Cwd    string     `json:"cwd"`
	Files  []FileSpec `json:"files,omitempty"`
	// Model is provider/id; empty uses pi's default. Thinking is a level.
	Model    string `json:"model,omitempty"`
	Thinking string `json:"thinking,omitempty"`
	// Tools is the allowlist (empty: DefaultTools); NoTools grants none.
	// subagent_finalize is always added unless NoFinalize.
	Tools   []string `json:"tools,omitempty"`
	NoTools bool     `json:"noTools,omitempty"`
	// Profile names the resolved profile; the activity reads its apiKey
	// from the profile file itself, so the key never enters a history.
	Profile string `json:"profile,omitempty"`
	// SystemPrompt (a profile's body) is appended to pi's system prompt,
	// or replaces it when ReplaceSystemPrompt (the delegate contract's agent-profiles).
	SystemPrompt        string `json:"systemPrompt,omitempty"`
	ReplaceSystemPrompt bool   `json:"replaceSystemPrompt,omitempty"`
	// AppendSystemPrompt entries are appended after it.
	AppendSystemPrompt []string `json:"appendSystemPrompt,omitempty"`
	Skills             []string `json:"skills,omitempty"`
	NoSkills           bool     `json:"noSkills,omitempty"`
	Extensions         []string `json:"extensions,omitempty"`
	NoContextFiles     bool     `json:"noContextFiles,omitempty"`
	ExtraArgs          []string `json:"extraArgs,omitempty"`
	// NoFinalize runs without subagent_finalize: the final assistant text
	// is the result (a profile's `finalize: false`).
	NoFinalize bool `json:"noFinalize,omitempty"`
	// FinalizeOptional offers subagent_finalize without asking for it:
	// a run that ends in plain text has that text as its result, with no
	// corrective feedback (the delegate contract's delegate_to_subagents,
	// whose result is the child's last assistant text, for a profile that
	// does not ask for finalize itself).
	FinalizeOptional bool `json:"finalizeOptional,omitempty"`
	// Depth is the child's depth: 1 for a child of a top-level pi.
	Depth int `json:"depth,omitempty"`
	// TimeoutSeconds (default 600), ExtendDebounceSeconds (default 30,
	// 0..300) and LoopingToolCount (default 5, 0..50, 0 disables) are the delegate
	// contract's limits; nil means the default.
	TimeoutSeconds        int  `json:"timeoutSeconds,omitempty"`
	ExtendDebounceSeconds *int `json:"extendDebounceSeconds,omitempty"`
	LoopingToolCount      *int `json:"loopingToolCount,omitempty"`
	// MaxEvents caps the run's event timeline (the task contract's task max events,
	// default 120, 0 keeps none); nil means the default.
	MaxEvents *int `json:"maxEvents,omitempty"`
	// OutputMaxChars caps the run's output in its result when the calling
	// pi set it (CallerKnobs); 0: the settings', else the worker's.
	OutputMaxChars int `json:"outputMaxChars,omitempty"`
	// MaxRuntimeSeconds is the turn's hard ceiling (Ceiling); nil: the
	// timeout plus DefaultMaxExtension.
	MaxRuntimeSeconds *int `json:"maxRuntimeSeconds,omitempty"`
	// Budget caps the run's tool calls, tokens and cost: past it the
	// child is stopped and the run ends with BUDGET_EXCEEDED (a plan
	// step's budget).
	Budget *Budget `json:"budget,omitempty"`
	// Then are the runs of the plan steps this step's end lets start:
	// their children start early (the worker's early start, as a plan's
	// first steps do as it is resolved) once this run's child has
	// finalized, while its result makes its way back and the next step is
	// scheduled. The session passes them on its first turn only.
	Then []RunPiInput `json:"then,omitempty"`
	// FallbackModels (a profile's) are tried in order, on the same pi
	// session, when the model fails with a provider error worth another
	// model (rate limit, overload); the result records each.
	FallbackModels []string `json:"fallbackModels,omitempty"`
	// Worktree, when set, runs the child in a git worktree of Cwd made
	// for the session from a clean base; the turn's change is captured as
	// a patch file and a branch (RunPiResult.Change) and the worktree
	// removed.
	Worktree *WorktreeSpec `json:"worktree,omitempty"`
	// ForkFrom is the parent's pi session file: the session's first turn
	// starts from a copy of its conversation (context: fork) instead of an
	// empty session.
	ForkFrom string `json:"forkFrom,omitempty"`
}

// Fallback is one model a run gave up on for the next of its
// FallbackModels, and why.
type Fallback struct {
	Model string `json:"model"`
	Error string `json:"error"`
}

// RunPiResult is what one child run produced: the raw material of the SingleResult contract's
// SingleResult. Everything in it is sanitized and bounded.
type RunPiResult struct {
	ExitCode int       `json:"exitCode"`
	Finalize *Finalize `json:"finalize"`
	// Output is the finalize result (or error), else the final assistant
	// text, cut to the output cap; ArtifactFile holds all of it.
	Output              string    `json:"output"`
	OutputTruncated     bool      `json:"outputTruncated"`
	OutputTotalChars    int       `json:"outputTotalChars"`
	OutputReturnedChars int       `json:"outputReturnedChars"`
	Usage               Usage     `json:"usage"`
	ToolRows            []ToolRow `json:"toolRows,omitempty"`
	ToolCalls           int       `json:"toolCalls"`
	// EventCount is how many structured events the run captured; Timeline
	// the latest of them (RunPiInput.MaxEvents).
	EventCount int             `json:"eventCount,omitempty"`
	Timeline   []TimelineEvent `json:"timeline,omitempty"`
	StopReason string          `json:"stopReason,omitempty"`
	// Model is the provider/id the child really ran (its last assistant
	// message's), where RunPiInput.Model may be empty for pi's default.
	Model       string `json:"model,omitempty"`
	AutoRetries int    `json:"autoRetries,omitempty"`
	// Change is what a child in a worktree changed (RunPiInput.Worktree).
	Change *Change `json:"change,omitempty"`
	// Questions are the run's contact_supervisor calls, in order: a run
	// that ended at a question waits for its answer (api/question.go).
	Questions []Question `json:"questions,omitempty"`
	// Fallbacks are the models that failed before Model ran (RunPiInput.FallbackModels).
	Fallbacks    []Fallback    `json:"fallbacks,omitempty"`
	Error        *errcode.Info `json:"error,omitempty"`
	SessionFile  string        `json:"sessionFile"`
	ArtifactFile string        `json:"artifactFile,omitempty"`
	Attempt      int32         `json:"attempt"`
	// Continued is true when this attempt continued the session file an
	// interrupted attempt left, instead of running the prompt again.
	Continued bool `json:"continued,omitempty"`
	// Recovered is true when an interrupted attempt had already ended the
	// run (it finalized, then its worker died): the result was read from
	// the session file and pi did not run again.
	Recovered bool `json:"recovered,omitempty"`
	// Warm is true when a pre-started child of the worker's warm pool ran
	// this attempt (same flags, session file and events as a cold one).
	Warm bool `json:"warm,omitempty"`
	// Early is true when the child was started for this task as its
	// delegation was resolved, while the task's session was still on its
	// way to the worker (the worker's early start), not as the run began.
	Early      bool  `json:"early,omitempty"`
	DurationMS int64 `json:"durationMs"`
	// MessagesBefore is how many conversation messages the session file held
	// when the turn's first attempt started: where this turn's run begins in
	// a transcript.
	MessagesBefore int `json:"messagesBefore,omitempty"`
}

// Progress is a running child's heartbeat: what `status` and the UI show.
type Progress struct {
	ToolRows   []ToolRow `json:"toolRows,omitempty"`
	ToolCalls  int       `json:"toolCalls"`
	EventCount int       `json:"eventCount,omitempty"`
	Usage      Usage     `json:"usage"`
	// Model is the provider/id the child runs, once it has answered.
	Model          string `json:"model,omitempty"`
	LastText       string `json:"lastText,omitempty"`
	ElapsedMS      int64  `json:"elapsedMs"`
	TimeoutSeconds int    `json:"timeoutSeconds"`
	Attempt        int32  `json:"attempt"`
	// PriorUsage is what earlier, interrupted attempts of this turn spent;
	// it is carried so the turn's total counts every attempt once.
	PriorUsage Usage `json:"priorUsage"`
	// MessagesBefore is carried from the first attempt (RunPiResult).
	MessagesBefore int `json:"messagesBefore,omitempty"`
	// Fallbacks are the models this turn's attempts gave up on so far
	// (RunPiResult.Fallbacks): a retry goes on with the next model, and its
	// result still names them.
	Fallbacks []Fallback `json:"fallbacks,omitempty"`
}

// ValidateCwd checks a task's working directory with the delegate contract's messages.
func ValidateCwd(cwd string) error {
	if !filepath.IsAbs(cwd) {
		return errcode.New(errcode.InvalidInput, "cwd must be an absolute path")
	}
	for _, seg := range strings.Split(filepath.ToSlash(cwd), "/") {
		if seg == ".." {
			return errcode.New(errcode.InvalidInput, "cwd must not contain '..' path segments")
		}
	}
	return nil
}

// Timeout is how long the child may run before the delegate contract's extension rule:
// TimeoutSeconds, else DefaultTimeoutSeconds. The one place the default is
// applied; the session asks it too, for the timeout it shows.
func (in RunPiInput) Timeout() time.Duration {
	if in.TimeoutSeconds > 0 {
		return time.Duration(in.TimeoutSeconds) * time.Second
	}
	return DefaultTimeoutSeconds * time.Second
}

// DefaultMaxExtension is how long past its timeout a child that still calls
// tools may run when max_runtime is not set: the delegate contract extends such a child
// without end; ten minutes of model spend is the most a turn pays for it.
const DefaultMaxExtension = 10 * time.Minute

// Ceiling is the hard limit of a turn, from its first attempt's start,
// whatever the extension rules say: max_runtime (never below the timeout),
// else the timeout plus DefaultMaxExtension.
func (in RunPiInput) Ceiling() time.Duration {
	if in.MaxRuntimeSeconds != nil && *in.MaxRuntimeSeconds > 0 {
		return max(time.Duration(*in.MaxRuntimeSeconds)*time.Second, in.Timeout())
	}
	return in.Timeout() + DefaultMaxExtension
}

// AgentName is how a session's agent is named in its file and its
// SubagentAgent search attribute: "default" for a task without a profile.
func AgentName(agent string) string {
	if agent == "" {
		return "default"
	}
	return agent
}

// PoolStats are the warm pool's counters since the worker started.
type PoolStats struct {
	Warm int `json:"warm"`
	// Kept are the children waiting for their session's corrective run;
	// Resumed counts the corrective runs that went on in one.
	Kept    int   `json:"kept"`
	Resumed int64 `json:"resumed"`
	Hits    int64 `json:"hits"`
	// Waited counts the hits whose child was still starting (a refill
	// under way): the run waited for it rather than start one cold.
	Waited    int64 `json:"waited"`
	Misses    int64 `json:"misses"`
	Evictions int64 `json:"evictions"`
	// EarlyStarted counts the children started for tasks as their
	// delegations were resolved; EarlyTaken those a task's run then took.
	EarlyStarted int64 `json:"earlyStarted"`
	EarlyTaken   int64 `json:"earlyTaken"`
}
