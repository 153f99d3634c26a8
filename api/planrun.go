package api

import "github.com/durable-pi/subagents/internal/errcode"

// PlanVersion is the plan workflow's code version: its input says which
// it was started with, so that a change of behaviour can keep old runs
// replaying as they ran. 2: each attempt numbers its turns apart from the
// earlier attempts'. 3: tasks keep their {args.NAME} until they run, filled
// in with Args in one pass with the step references (ExpandTask); the plan
// is checked for misspelt references and loops' verdicts. 4: a reference
// in another case or with spaces ({Steps.x.output}, {round }) is misspelt
// too; a gate's re-runs are counted from its heartbeat (GateResult.Runs),
// and a gate that failed for good counts the runs it started. 5: its steps'
// sessions are of CurrentVersion 5 (they close after each turn), and a step
// that continues a closed session reopens it with what it carried
// (SendToSession) rather than starting it afresh.
const PlanVersion = 5

// PlanInput starts a plan (or resumes one: Attempt > 1 with Prior).
type PlanInput struct {
	// Plan is the document with its arguments bound (BindPlanArgs); Args
	// are the values it was bound with (a resume binds a changed document
	// with them) and, from PlanVersion 3, those its tasks are filled in with.
	Plan Plan              `json:"plan"`
	Args map[string]string `json:"args,omitempty"`
	// Source says where a saved plan was read from ("" for one given
	// inline); a project file's gates ran only when the project is trusted.
	Source *PlanSource `json:"source,omitempty"`
	// Cwd is the steps' folder when a step names none; Profile their
	// agent when a step names none.
	Cwd     string `json:"cwd"`
	Profile string `json:"profile,omitempty"`
	// ParentSessionID and ParentSessionFile: the pi session that started
	// the plan, and its file (steps with context: fork start from it).
	ParentSessionID   string `json:"parentSessionId,omitempty"`
	ParentSessionFile string `json:"parentSessionFile,omitempty"`
	// Depth is the caller's; Host, Tool, Deliver, AckTTLSeconds and
	// IdleTTLSeconds are a delegation's (DelegationInput).
	Depth          int    `json:"depth,omitempty"`
	Host           string `json:"host,omitempty"`
	Tool           string `json:"tool,omitempty"`
	Deliver        bool   `json:"deliver,omitempty"`
	AckTTLSeconds  int    `json:"ackTtlSeconds,omitempty"`
	IdleTTLSeconds int    `json:"idleTtlSeconds,omitempty"`
	// MaxConcurrency is the caller's bound when the plan names none.
	MaxConcurrency int `json:"maxConcurrency,omitempty"`
	// Knobs are the calling pi's (DelegationInput.Knobs).
	Knobs *CallerKnobs `json:"knobs,omitempty"`
	// Attempt numbers the plan's runs under its ID: 1, then 2 for the
	// first resume (new sessions get an A2 suffix).
	Attempt int `json:"attempt,omitempty"`
	// Prior are the steps an earlier attempt finished, by key: a resumed
	// plan keeps them and runs only the rest.
	Prior []StepState `json:"prior,omitempty"`
	// Version is PlanVersion when the plan started.
	Version int `json:"version,omitempty"`
}

// IsPlanID reports whether id is a plan's workflow ID ("plan-" and a
// UUID), not one of its steps' sessions (which add "-" and a key).
func IsPlanID(id string) bool {
	return len(id) == len(PlanIDPrefix)+36 && id[:len(PlanIDPrefix)] == PlanIDPrefix
}

// PlanSource is where a saved plan came from.
type PlanSource struct {
	Name string `json:"name"`
	File string `json:"file"`
	// Scope is "builtin", "global" or "project".
	Scope string `json:"scope"`
}

// PlanView is a plan's own part of its status (DelegationStatus.Plan): its
// steps as they stand, what it spent, and what stopped it.
type PlanView struct {
	Name    string      `json:"name,omitempty"`
	Attempt int         `json:"attempt"`
	Steps   []StepState `json:"steps"`
	// Budget is the plan's; Spent what its steps spent so far.
	Budget         *Budget `json:"budget,omitempty"`
	SpentToolCalls int     `json:"spentToolCalls"`
	// Stopped is why the plan started no further step (BUDGET_EXCEEDED,
	// CANCELLED), if it did.
	Stopped *errcode.Info `json:"stopped,omitempty"`
}

// StepState is one task step of a plan, as it stands.
type StepState struct {
	Key string `json:"key"`
	// Path is the keys of the groups the step is in (a lane, a loop).
	Path      []string `json:"path,omitempty"`
	Agent     string   `json:"agent,omitempty"`
	State     State    `json:"state"`
	SessionID string   `json:"sessionId,omitempty"`
	// Round is the loop round the step last ran in (0: not in a loop).
	Round int `json:"round,omitempty"`
	// Runs counts the child sessions' turns the step took: its first,
	// and each gate or verdict correction, in every round.
	Runs int `json:"runs"`
	// GateRuns counts its gate command's runs; GateOutput is the last
	// failed run's output (capped).
	GateRuns   int    `json:"gateRuns,omitempty"`
	GateOutput string `json:"gateOutput,omitempty"`
	Verdict    string `json:"verdict,omitempty"`
	// Reused is true when the step's result is an earlier attempt's (a
	// resumed plan ran it no more).
	Reused bool          `json:"reused,omitempty"`
	Turn   *TurnResult   `json:"turn,omitempty"`
	Error  *errcode.Info `json:"error,omitempty"`
}

// GateInput is the RunGate activity's: a plan step's command, in its
// folder.
type GateInput struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
	// TimeoutSeconds bounds the command; its process group is killed past it.
	TimeoutSeconds int `json:"timeoutSeconds"`
	// Step names the step, for logs.
	Step string `json:"step"`
	// Source is where the plan was read from: a project's saved plan runs
	// its gates only in a project the worker's user trusts, checked again
	// where the command runs.
	Source *PlanSource `json:"source,omitempty"`
	// Args are the plan's argument values: the command reads them from its
	// environment (GateArgsEnv), never spliced into its text.
	Args map[string]string `json:"args,omitempty"`
}

// GateRunCount is how many times a gate's command started, as its error's
// details say (and its heartbeat, under the same field): a gate that failed
// for good counts the runs it made, none for one refused before it ran.
type GateRunCount struct {
	Runs int `json:"runs"`
}

// GateResult is how the command ended: Output is the end of its combined
// output, cut to GateOutputChars.
type GateResult struct {
	ExitCode int    `json:"exitCode"`
	TimedOut bool   `json:"timedOut,omitempty"`
	Output   string `json:"output"`
	// DurationMS is the command's wall time.
	DurationMS int64 `json:"durationMs"`
	// Runs is how many times the command was started for this result: more
	// than 1 when a worker died while it ran and the retry ran it again.
	Runs int `json:"runs,omitempty"`
}

// Passed reports a gate that passed.
func (g GateResult) Passed() bool { return g.ExitCode == 0 && !g.TimedOut }
