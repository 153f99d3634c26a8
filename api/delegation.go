package api

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

// Limits of a delegation.
const (
	DefaultMaxConcurrency = 4  // the delegate contract's MAX_CONCURRENCY
	MaxConcurrency        = 16 // as many as a delegation may hold
	MaxTasks              = 16 // the delegate contract's MAX_PARALLEL_TASKS
	DefaultMaxDepth       = 2  // the depth limit's default (profiles.DefaultMaxDepth): a child of a top-level pi may delegate, its children may not
	// DefaultAckTTL is how long a finished delegation started with Deliver
	// waits for its parent to acknowledge the results: as long as `subagents
	// dev` keeps closed workflows, so that a parent pi resumed within a month
	// still receives what it started. A waiting workflow costs nothing.
	DefaultAckTTL = 30 * 24 * time.Hour
)

// TaskSpec is one task of a delegation (the delegate contract's task object; `agent` is
// the sessions contract's name for `profile`).
type TaskSpec struct {
	Name           string `json:"name"`
	Prompt         string `json:"prompt"`
	Profile        string `json:"profile,omitempty"`
	Agent          string `json:"agent,omitempty"`
	Cwd            string `json:"cwd"`
	TimeoutSeconds int    `json:"timeout,omitempty"`
	// QuestionTimeoutSeconds is how long a question of the task's child
	// waits for its answer (0: the profile's, else DefaultQuestionTimeout).
	QuestionTimeoutSeconds int        `json:"questionTimeoutSeconds,omitempty"`
	Files                  []FileSpec `json:"files,omitempty"`
	Model                  string     `json:"model,omitempty"`
	// Resume continues an earlier session (its ID) instead of starting one:
	// the same pi session file, so the child keeps its context.
	Resume string `json:"resume,omitempty"`
	// Description is the task contract's short label of the task, kept in the
	// session's memo for the UI and `list`.
	Description string `json:"description,omitempty"`
	// Context "fork" starts the task from a copy of the parent's
	// conversation (DelegationInput.ParentSessionFile); "" or "fresh" from
	// an empty session.
	Context string `json:"context,omitempty"`
	// Worktree runs the task in a git worktree of Cwd made for it, from a
	// clean BaseRef (default HEAD); its change comes back as a patch and a
	// branch (RunPiResult.Change) instead of edits in Cwd.
	Worktree bool   `json:"worktree,omitempty"`
	BaseRef  string `json:"baseRef,omitempty"`
	// Rejected is why the caller refused this item of a batch on its own
	// (the task contract: the other items run); it never runs.
	Rejected *errcode.Info `json:"rejected,omitempty"`
}

// ProfileOr is the task's profile name, whichever field it used, else def
// (the delegation's default profile).
func (t TaskSpec) ProfileOr(def string) string {
	return cmp.Or(t.Profile, t.Agent, def)
}

// DelegationInput starts a delegation.
type DelegationInput struct {
	Tasks []TaskSpec `json:"tasks"`
	// Profile is the default for tasks that name none.
	Profile string `json:"profile,omitempty"`
	// SessionIDs are chosen by the caller, one per task, so that it knows
	// them before anything runs and the workflow stays deterministic.
	SessionIDs      []string `json:"sessionIds"`
	MaxConcurrency  int      `json:"maxConcurrency,omitempty"`
	ParentSessionID string   `json:"parentSessionId,omitempty"`
	// ParentSessionFile is the parent pi's session file, for tasks whose
	// context is fork.
	ParentSessionFile string `json:"parentSessionFile,omitempty"`
	// Depth is the caller's depth: 0 for a top-level pi.
	Depth    int `json:"depth,omitempty"`
	MaxDepth int `json:"maxDepth,omitempty"`
	// IdleTTLSeconds is handed to every session (0: DefaultIdleTTL).
	IdleTTLSeconds int `json:"idleTtlSeconds,omitempty"`
	// Deliver keeps the finished delegation open until its parent
	// acknowledges the results (AckUpdate), at most AckTTLSeconds (0:
	// DefaultAckTTL): how a parent pi that restarts finds what it has not
	// received yet.
	Deliver       bool `json:"deliver,omitempty"`
	AckTTLSeconds int  `json:"ackTtlSeconds,omitempty"`
	// Host runs the tasks on that host's workers (HostQueue): the caller's
	// machine, where the cwds exist. Empty: any worker.
	Host string `json:"host,omitempty"`
	// Version is the code version the delegation runs (CurrentVersion for
	// new ones; 0 for those started before versions existed).
	Version int `json:"version,omitempty"`
	// Tool is the tool family the delegation came through ("subagent",
	// "task", ...), for the profile policies that depend on it.
	Tool string `json:"tool,omitempty"`
	// Knobs are the calling pi's own settings of its tasks.
	Knobs *CallerKnobs `json:"knobs,omitempty"`
	// Send marks the delegation a `send` started (version 5): its resume
	// target takes the task as its next turn even while a turn runs, as a
	// send to a running session does, where the delegate contract's resume
	// refuses a running session (SESSION_RUNNING). Two sends that race to
	// a finished session both become turns of it.
	Send bool `json:"send,omitempty"`
}

// CallerKnobs are settings of the pi that delegates, per pi process (the
// task contract's OHM_SUBAGENTS_OUTPUT_MAX_CHARS and
// OHM_SUBAGENTS_TASK_MAX_EVENTS): the request carries them, and they apply
// to its tasks only, over the settings files. A service started by one pi
// serves every other, so its own environment says nothing of theirs.
type CallerKnobs struct {
	// OutputMaxChars caps each task's output in its results (0: the
	// settings').
	OutputMaxChars int `json:"outputMaxChars,omitempty"`
	// TaskMaxEvents caps each task's event timeline (nil: the settings').
	TaskMaxEvents *int `json:"taskMaxEvents,omitempty"`
}

// Apply sets what k holds on a task's child run; a nil k sets nothing.
func (k *CallerKnobs) Apply(child *RunPiInput) {
	if k == nil {
		return
	}
	if k.OutputMaxChars > 0 {
		child.OutputMaxChars = k.OutputMaxChars
	}
	if k.TaskMaxEvents != nil {
		n := *k.TaskMaxEvents
		child.MaxEvents = &n
	}
}

// TaskResult is one task of a delegation.
type TaskResult struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	SessionID string `json:"sessionId"`
	Profile   string `json:"profile,omitempty"`
	// Model is the child's provider/id once the profile is resolved.
	Model string        `json:"model,omitempty"`
	State State         `json:"state"`
	Turn  *TurnResult   `json:"turn,omitempty"`
	Error *errcode.Info `json:"error,omitempty"`
}

// DelegationStatus answers StatusQuery and WaitUpdate and is the
// delegation's result; tasks are in input order, with the task contract's batch
// accounting.
type DelegationStatus struct {
	DelegationID  string       `json:"delegationId"`
	State         State        `json:"state"`
	Done          bool         `json:"done"`
	Tasks         []TaskResult `json:"tasks"`
	TotalCount    int          `json:"total_count"`
	AcceptedCount int          `json:"accepted_count"`
	RejectedCount int          `json:"rejected_count"`
	BatchStatus   string       `json:"batch_status"`
	Usage         Usage        `json:"usage"`
	// Deliver and Delivered: the parent acknowledges the results.
	Deliver   bool `json:"deliver,omitempty"`
	Delivered bool `json:"delivered,omitempty"`
	// ParentSessionID is the pi session that started the delegation.
	ParentSessionID string `json:"parentSessionId,omitempty"`
	// Plan is a plan's own part (a plan answers as a delegation whose
	// tasks are its task steps, in document order).
	Plan *PlanView `json:"plan,omitempty"`
}

// Summarize fills in what st's tasks and Done imply: the counts, the
// usage, the batch status and the state (cancelled: the delegation was
// cancelled as a whole).
func (st *DelegationStatus) Summarize(cancelled bool) {
	st.TotalCount = len(st.Tasks)
	st.AcceptedCount, st.RejectedCount, st.Usage = 0, 0, Usage{}
	failed, cancelledTasks := 0, 0
	for _, t := range st.Tasks {
		if t.Turn != nil {
			st.Usage = st.Usage.Add(t.Turn.Usage)
		}
		rejected := t.Turn == nil && t.Error != nil && t.Error.Code != errcode.Cancelled
		if rejected {
			st.RejectedCount++
		} else {
			st.AcceptedCount++
		}
		switch t.State {
		case StateFailed, StateTimedOut:
			failed++
		case StateCancelled:
			cancelledTasks++
		}
	}
	st.BatchStatus = BatchStatus(st.TotalCount, st.RejectedCount, st.Done)
	switch {
	case !st.Done:
		st.State = StateRunning
	case cancelled || cancelledTasks > 0 && failed == 0 && cancelledTasks == len(st.Tasks):
		st.State = StateCancelled
	case failed > 0 || st.RejectedCount > 0:
		st.State = StateFailed
	default:
		st.State = StateCompleted
	}
}

// AckTTL is how long a finished delegation started with Deliver waits for
// its parent's ack: seconds when positive, else DefaultAckTTL.
func AckTTL(seconds int) time.Duration {
	if seconds > 0 {
		return time.Duration(seconds) * time.Second
	}
	return DefaultAckTTL
}

// SessionSummary is a session's one-line summary in the Temporal UI.
func SessionSummary(name, agent string) string { return fmt.Sprintf("%s (%s)", name, agent) }

// NestedUnder is the task a nested run was started by, as the Temporal UI's
// summaries name it: the parent session of a caller at depth 1 or more is
// the task whose child delegated (docs/pi.md#nesting); "" for a top-level
// pi's run.
func NestedUnder(depth int, parentSession string) string {
	if depth <= 0 || parentSession == "" {
		return ""
	}
	return " · under task " + parentSession
}

// DelegationIDPrefix begins every delegation ID.
const DelegationIDPrefix = "delegation-"

// OneTaskDelegationID is the ID of the one-task delegation that session
// sessionID stands for (SessionInput.Delegation).
func OneTaskDelegationID(sessionID string) string { return DelegationIDPrefix + sessionID }

// CheckDepth refuses work started by a caller at depth, when the limit
// is maxDepth (0: DefaultMaxDepth): a caller at the limit starts nothing,
// a delegation, a plan or a resumed plan alike (SUBAGENT_DEPTH_EXCEEDED).
func CheckDepth(depth, maxDepth int) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if depth >= maxDepth {
		return errcode.Errorf(errcode.DepthExceeded, "Subagent depth %d reached the limit of %d: a subagent cannot delegate further", depth, maxDepth)
	}
	return nil
}

// ValidateDelegation checks a request before anything starts; the client
// runs it too, so that bad input never becomes a workflow.
func ValidateDelegation(in DelegationInput) error {
	if err := CheckDepth(in.Depth, in.MaxDepth); err != nil {
		return err
	}
	switch {
	case len(in.Tasks) == 0:
		return errcode.New(errcode.InvalidInput, "tasks must hold 1 to 16 tasks, got none")
	case len(in.Tasks) > MaxTasks:
		return errcode.Errorf(errcode.InvalidInput, "tasks must hold 1 to 16 tasks, got %d", len(in.Tasks))
	case len(in.SessionIDs) != len(in.Tasks):
		return errcode.Errorf(errcode.InvalidInput, "one session ID per task: %d IDs for %d tasks", len(in.SessionIDs), len(in.Tasks))
	case in.MaxConcurrency < 0 || in.MaxConcurrency > MaxConcurrency:
		return errcode.Errorf(errcode.InvalidInput, "maxConcurrency must be 1 to %d", MaxConcurrency)
	case !ValidHost(in.Host):
		return errcode.Errorf(errcode.InvalidInput, "host %q cannot name a task queue (no '@', '/' or spaces)", in.Host)
	}
	if err := validateOptionalNames([2]string{"profile", in.Profile}); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, t := range in.Tasks {
		if t.Rejected != nil {
			continue
		}
		if err := ValidateTask(i, t); err != nil {
			return err
		}
		if err := ValidateName("session ID", in.SessionIDs[i]); err != nil {
			return err
		}
		switch {
		case seen[in.SessionIDs[i]]:
			return errcode.Errorf(errcode.InvalidInput, "session ID %s is given twice", in.SessionIDs[i])
		case t.Resume != "" && seen["resume:"+t.Resume]:
			return errcode.Errorf(errcode.InvalidInput, "session %q is resumed by two tasks", t.Resume)
		}
		seen[in.SessionIDs[i]] = true
		if t.Resume != "" {
			seen["resume:"+t.Resume] = true
		}
	}
	return nil
}

// ValidateTask checks one task of a batch on its own: what makes this
// item, and not its batch, wrong.
func ValidateTask(i int, t TaskSpec) error {
	switch {
	case strings.TrimSpace(t.Name) == "":
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d]: name must not be empty", i)
	case strings.TrimSpace(t.Prompt) == "":
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): prompt must not be empty", i, t.Name)
	case t.TimeoutSeconds < 0:
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): timeout must be at least 1 second", i, t.Name)
	case !ValidQuestionTimeout(t.QuestionTimeoutSeconds):
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): questionTimeoutSeconds must be 1 to %d (a week)", i, t.Name, MaxQuestionTimeoutSeconds)
	case t.Profile != "" && t.Agent != "" && t.Profile != t.Agent:
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): agent %q and profile %q disagree", i, t.Name, t.Agent, t.Profile)
	case t.Context != "" && t.Context != "fresh" && t.Context != "fork":
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): context must be fresh or fork, not %q", i, t.Name, t.Context)
	case t.Context == "fork" && t.Resume != "":
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): a resumed session already has its context: drop context fork", i, t.Name)
	}
	if err := ValidateCwd(t.Cwd); err != nil {
		return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): %s", i, t.Name, err.Error())
	}
	if err := validateOptionalNames([2]string{"agent", t.Agent}, [2]string{"profile", t.Profile}, [2]string{"resume: session ID", t.Resume}); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("tasks[%d] (%s): %s", i, t.Name, err.Error()))
	}
	for _, f := range t.Files {
		if err := f.Validate(); err != nil {
			return errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): %s", i, t.Name, err.Error())
		}
	}
	return nil
}

// BatchStatus is the task contract's batch_status of total tasks of which rejected
// were refused on their own.
func BatchStatus(total, rejected int, done bool) string {
	switch {
	case rejected == total:
		return "rejected"
	case done && rejected == 0:
		return "completed"
	case rejected > 0:
		return "partial"
	}
	return "accepted"
}

// TaskDetails is a task as the Temporal UI shows it in a workflow's
// details: what an operator needs to tell one run from another without
// opening its history.
//
// depth is the caller's: at 1 or more, parentSession is the task whose
// child started this one.
func TaskDetails(name, agent, cwd, prompt, parentSession, delegationID string, depth int) string {
	first, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if r := []rune(first); len(r) > 200 {
		first = string(r[:200]) + "…"
	}
	details := fmt.Sprintf("**%s** · agent `%s`\n\n- cwd: `%s`\n- prompt: %s\n", name, agent, cwd, first)
	switch {
	case parentSession != "" && depth > 0:
		details += fmt.Sprintf("- started by task `%s` (nested, depth %d)\n", parentSession, depth)
	case parentSession != "":
		details += fmt.Sprintf("- parent pi session: `%s`\n", parentSession)
	}
	if delegationID != "" {
		details += fmt.Sprintf("- delegation: `%s`\n", delegationID)
	}
	return details
}

// HostQueue is the task queue of the workers on host: where the steps that
// need a task's cwd or its session files run (RunPi, ResolveTasks,
// ReadSession). Workflows and cwd-independent steps stay on the shared base
// queue. An empty host means any worker: the base queue itself.
func HostQueue(base, host string) string {
	if host == "" {
		return base
	}
	return base + "@" + host
}

// ValidHost reports whether host can be part of a task queue name.
func ValidHost(host string) bool {
	return host == "" || len(host) <= 200 && !strings.ContainsAny(host, "@ \t\n/")
}

// SessionMemo is what the UI and `list` show of a session beside its
// search attributes: its name, description, delegation and host.
func SessionMemo(t TaskSpec, delegationID, host string) map[string]any {
	memo := map[string]any{"name": t.Name, "delegation": delegationID}
	if host != "" {
		// LookupSessions reads it back when the session is resumed.
		memo["host"] = host
	}
	if t.Description != "" {
		memo["description"] = t.Description
	}
	return memo
}
