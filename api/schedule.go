package api

import (
	"strings"
	"unicode/utf8"

	"github.com/durable-pi/subagents/internal/errcode"
)

// Schedules (docs/schedules.md): a Temporal schedule whose action starts a
// ScheduledWorkflowName run (a fire). The fire prepares its delegation or
// plan as a start from the command would at that moment (PrepareScheduled,
// on a worker), runs it as a child, and, unless the schedule is quiet and
// the run completed, leaves its result in a ScheduledResultWorkflowName
// run that waits until a pi session of the folder claims it (ClaimUpdate)
// and acknowledges it (AckSignal).
const (
	// ScheduledWorkflowName is one fire of a schedule.
	ScheduledWorkflowName = "Scheduled"
	// ScheduledResultWorkflowName holds one fire's result for the folder's
	// next pi session.
	ScheduledResultWorkflowName = "ScheduledResult"
	// PrepareScheduledActivityName is the fire's preparation: settings,
	// saved plans and their trust, read where the folder is.
	PrepareScheduledActivityName = "PrepareScheduled"
	// ClaimUpdate takes a scheduled run's result for one pi session
	// (ClaimRequest, answered by ClaimResult): the first session wins, and
	// a later claim by another one is refused unless it replaces a
	// claimant whose pi is gone.
	ClaimUpdate = "claim"
	// ResultQuery answers a ScheduledResult's ClaimResult as it stands
	// (Won false), without claiming.
	ResultQuery = "result"
)

// ScheduledVersion is the fire workflow's code version, carried in its
// input as CurrentVersion is in a delegation's.
const ScheduledVersion = 1

// ScheduleParentPrefix starts the parent session ID of every delegation a
// schedule starts ("schedule:" and the schedule's ID): `list
// --parent-session schedule:ID` lists its runs.
const ScheduleParentPrefix = "schedule:"

// ResultIDSuffix ends the workflow ID of a fire's ScheduledResult: the
// fire's ID and this.
const ResultIDSuffix = "-result"

// ScheduledInput is the schedule action's input: what every fire starts.
// Exactly one of Delegation, Plan and PlanName is set.
type ScheduledInput struct {
	ScheduleID string `json:"scheduleId"`
	// Cwd is the folder the schedule belongs to: its runs' results go to
	// the next pi session started there.
	Cwd string `json:"cwd"`
	// Quiet delivers only the runs that did not complete.
	Quiet bool `json:"quiet,omitempty"`
	// Delegation is the delegation as checked when the schedule was made:
	// its tasks named, none started. Each fire makes its session IDs, and a
	// MaxConcurrency of 0 takes the folder's settings at that moment.
	Delegation *DelegationInput `json:"delegation,omitempty"`
	// Plan is a plan document, bound and checked when the schedule was
	// made.
	Plan *PlanInput `json:"plan,omitempty"`
	// PlanName is a saved plan, read (and its project's trust checked) at
	// each fire, with PlanArgs; PlanCwd, PlanProfile and PlanConcurrency
	// are the request's.
	PlanName        string            `json:"planName,omitempty"`
	PlanArgs        map[string]string `json:"planArgs,omitempty"`
	PlanProfile     string            `json:"planProfile,omitempty"`
	PlanConcurrency int               `json:"planConcurrency,omitempty"`
	// Host runs the work on that host's workers (where Cwd exists).
	Host string `json:"host,omitempty"`
	// Version is ScheduledVersion when the schedule was made.
	Version int `json:"version,omitempty"`
}

// Kind is what the schedule starts: "delegation" or "plan".
func (in ScheduledInput) Kind() string {
	if in.Delegation != nil {
		return "delegation"
	}
	return "plan"
}

// ValidateScheduled checks a schedule action's input: one kind of work,
// a folder, a schedule ID.
func ValidateScheduled(in ScheduledInput) error {
	kinds := 0
	for _, set := range []bool{in.Delegation != nil, in.Plan != nil, in.PlanName != ""} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds != 1:
		return errcode.New(errcode.InvalidInput, "a schedule runs one thing: tasks, a plan document or a saved plan's name")
	case !strings.HasPrefix(in.Cwd, "/"):
		return errcode.Errorf(errcode.InvalidInput, "a schedule's folder must be an absolute path, not %q", in.Cwd)
	case !ValidHost(in.Host):
		return errcode.Errorf(errcode.InvalidInput, "host %q cannot name a task queue (no '@', '/' or spaces)", in.Host)
	}
	return ValidateScheduleID(in.ScheduleID)
}

// ScheduleIDRule says what a schedule ID is made of; 64 characters leave
// room in the IDs made from it (the fire's time, "-result") for Temporal's
// and for a session file name.
const ScheduleIDRule = "1 to 64 letters, digits, '-' or '_'"

// ValidateScheduleID is nil for a schedule ID that can name a schedule,
// its fires and their delegations.
func ValidateScheduleID(id string) error {
	if !ValidName(id) || len(id) > 64 {
		return errcode.Errorf(errcode.InvalidInput, "schedule ID %q is not valid: a schedule ID is %s", id, ScheduleIDRule)
	}
	return nil
}

// ScheduledPrepared is PrepareScheduled's answer: the work of one fire,
// ready to start as ChildID, or why it cannot start (Error).
type ScheduledPrepared struct {
	Delegation *DelegationInput `json:"delegation,omitempty"`
	Plan       *PlanInput       `json:"plan,omitempty"`
	ChildID    string           `json:"childId,omitempty"`
	// Name and Summary are the child's memo name and its one line in the
	// Temporal UI; Details its task list there.
	Name    string        `json:"name,omitempty"`
	Summary string        `json:"summary,omitempty"`
	Details string        `json:"details,omitempty"`
	Error   *errcode.Info `json:"error,omitempty"`
}

// PrepareScheduledInput is PrepareScheduled's input: the schedule's work
// and the fire's workflow ID (the child's ID is made from it).
type PrepareScheduledInput struct {
	Scheduled ScheduledInput `json:"scheduled"`
	FireID    string         `json:"fireId"`
}

// FireKey is a fire's workflow ID made fit for an ID a session file is
// named by: Temporal names a fire by the schedule's ID and the fire's
// RFC 3339 time ("nightly-2026-11-26T10:25:31Z"); the colons (and anything
// else outside NameRule) go.
func FireKey(fireID string) string {
	var b strings.Builder
	for _, r := range fireID {
		switch {
		case r == ':':
		case r < utf8.RuneSelf && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// ScheduledRunResult is a fire's result.
type ScheduledRunResult struct {
	ScheduleID string `json:"scheduleId"`
	// DelegationID is the delegation or plan it ran ("" when its
	// preparation failed).
	DelegationID string        `json:"delegationId,omitempty"`
	State        State         `json:"state"`
	Error        *errcode.Info `json:"error,omitempty"`
	Summary      string        `json:"summary,omitempty"`
	// ResultID is the ScheduledResult holding it for the folder's next pi
	// session ("": a quiet schedule's completed run, delivered to nobody).
	ResultID string `json:"resultId,omitempty"`
}

// Delivered reports whether a run of a schedule (quiet or not) that ended
// in state goes to the folder's next pi session: every failure does, a
// completed run only when the schedule is not quiet.
func Delivered(quiet bool, state State) bool {
	return !quiet || state != StateCompleted
}

// ScheduledResultInput starts a fire's ScheduledResult.
type ScheduledResultInput struct {
	ScheduleID   string        `json:"scheduleId"`
	FireID       string        `json:"fireId"`
	DelegationID string        `json:"delegationId,omitempty"`
	Cwd          string        `json:"cwd"`
	State        State         `json:"state"`
	Error        *errcode.Info `json:"error,omitempty"`
	Summary      string        `json:"summary,omitempty"`
	// TTLSeconds is how long it waits to be claimed and acknowledged (0:
	// DefaultAckTTL, as a delegation waits for its parent).
	TTLSeconds int `json:"ttlSeconds,omitempty"`
}

// ResultHolder is the pi process that claimed a result: a later pi of the
// folder replaces its claim only once that process is gone.
type ResultHolder struct {
	PID   int    `json:"pid"`
	Start string `json:"start,omitempty"`
	Host  string `json:"host,omitempty"`
}

// ClaimRequest is ClaimUpdate's payload.
type ClaimRequest struct {
	// By is the pi session that takes the result.
	By     string        `json:"by"`
	Holder *ResultHolder `json:"holder,omitempty"`
	// Replace takes a result another session claimed: honoured only while
	// that session (its ID here) still holds it, so that of two pis that
	// found its holder gone only one replaces it.
	Replace string `json:"replace,omitempty"`
}

// ClaimResult answers ClaimUpdate and ResultQuery: whether this claim won,
// who holds the result now, and the run it is.
type ClaimResult struct {
	Won       bool                 `json:"won"`
	ClaimedBy string               `json:"claimedBy,omitempty"`
	Holder    *ResultHolder        `json:"holder,omitempty"`
	Acked     bool                 `json:"acked,omitempty"`
	Run       ScheduledResultInput `json:"run"`
}

// SummaryChars caps a run's summary: a line of a listing.
const SummaryChars = 200

// Summarize cuts s to its first line and at most SummaryChars runes.
func Summarize(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if r := []rune(s); len(r) > SummaryChars {
		s = string(r[:SummaryChars]) + "…"
	}
	return s
}

// RunSummary is the summary of a delegation's status: its first task's
// output, else the first error.
func RunSummary(st DelegationStatus) string {
	for _, t := range st.Tasks {
		if t.Turn != nil && t.Turn.Result.Output != "" {
			return Summarize(t.Turn.Result.Output)
		}
	}
	for _, t := range st.Tasks {
		if t.Error != nil {
			return Summarize(t.Error.Message)
		}
	}
	return ""
}
