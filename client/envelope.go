package client

import (
	"cmp"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// ContractVersion marks every --json envelope of the command.
const ContractVersion = "subagents.v1"

// Backend names what runs the tasks, in every envelope (the task contract's field).
const Backend = "temporal"

// Envelope is the one JSON answer of every `subagents --json` call: a
// delegation's or a session's state in the task contract's field names, plus what
// the verb adds (a list, a text). Fields are only ever added to it.
type Envelope struct {
	ContractVersion string `json:"contract_version"`
	Op              string `json:"op"`
	Backend         string `json:"backend"`
	DelegationID    string `json:"delegation_id,omitempty"`
	// TaskID is the session ID: of the session asked about, or of a
	// delegation's only task.
	TaskID     string `json:"task_id,omitempty"`
	Status     string `json:"status,omitempty"`
	Done       bool   `json:"done"`
	WaitStatus string `json:"wait_status,omitempty"`
	// CancelApplied and PriorStatus answer `cancel`.
	CancelApplied *bool  `json:"cancel_applied,omitempty"`
	PriorStatus   string `json:"prior_status,omitempty"`
	// AcceptedTurn answers `send` to a running session: the turn the prompt
	// will run as.
	AcceptedTurn int `json:"accepted_turn,omitempty"`
	// Batch accounting of a delegation (the task contract).
	// The counts are set on every delegation's envelope, zeros included
	// (the task contract's batch accounting: `rejected_count: 0` says none was
	// rejected); envelopes of other kinds have none.
	TotalCount    *int   `json:"total_count,omitempty"`
	AcceptedCount *int   `json:"accepted_count,omitempty"`
	RejectedCount *int   `json:"rejected_count,omitempty"`
	BatchStatus   string `json:"batch_status,omitempty"`
	// Deliver and Delivered: the parent acknowledges the results.
	Deliver         bool       `json:"deliver,omitempty"`
	Delivered       bool       `json:"delivered,omitempty"`
	ParentSessionID string     `json:"parent_session_id,omitempty"`
	Usage           *api.Usage `json:"usage,omitempty"`
	Items           []Item     `json:"items,omitempty"`
	// Runs and Count answer `list`.
	Runs  []ListItem `json:"runs,omitempty"`
	Count int        `json:"count,omitempty"`
	// Text answers `output` and `transcript`.
	Text          string `json:"text,omitempty"`
	TextTruncated bool   `json:"text_truncated,omitempty"`
	// NextFrom is where the next page of `output --full --from` begins
	// (0 after the last page).
	NextFrom     int    `json:"next_from,omitempty"`
	MessageCount int    `json:"message_count,omitempty"`
	RunCount     int    `json:"run_count,omitempty"`
	UIURL        string `json:"ui_url,omitempty"`
	// Plan is a plan's own part: its steps with their state, rounds and
	// gate runs (each step's result is its item), its budget and what
	// stopped it.
	Plan *api.PlanView `json:"plan,omitempty"`
	// Schedules answer `schedule list` and `schedule describe`.
	Schedules []ScheduleItem `json:"schedules,omitempty"`
	// Error is why the call itself failed (bad input, not found,
	// unavailable); a task's own failure is in its item.
	Error *errcode.Info `json:"error,omitempty"`
}

// Item is one task: a session's latest turn.
type Item struct {
	TaskID      string `json:"task_id"`
	Index       int    `json:"index"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Agent       string `json:"agent"`
	// Status is the turn's state; SessionState the session's, which waits
	// for input between turns.
	Status       string `json:"status"`
	SessionState string `json:"session_state,omitempty"`
	Done         bool   `json:"done"`
	Turn         int    `json:"turn,omitempty"`
	Attempts     int    `json:"attempts,omitempty"`
	// RunAttempt is Temporal's attempt of the last child run: above 1 when
	// a worker died under it; Continued when that attempt went on with the
	// pi session the dead one left.
	RunAttempt int32 `json:"run_attempt,omitempty"`
	Continued  bool  `json:"continued,omitempty"`
	// CancelApplied and PriorStatus are the answer of a `cancel` for the
	// ID this item came from (the task contract), kept when several are cancelled.
	CancelApplied *bool  `json:"cancel_applied,omitempty"`
	PriorStatus   string `json:"prior_status,omitempty"`
	// Warm is true when the last child run took a warm child of the
	// worker's pool instead of starting pi.
	Warm bool `json:"warm,omitempty"`
	// Change is what a task that ran in a git worktree changed: its branch
	// and patch file (subagents apply).
	Change *api.Change `json:"change,omitempty"`
	// Fallbacks are the models the last child run gave up on, and why,
	// before Model (a profile's fallbackModels).
	Fallbacks           []api.Fallback `json:"fallbacks,omitempty"`
	Output              string         `json:"output"`
	OutputAvailable     bool           `json:"output_available"`
	OutputTruncated     bool           `json:"output_truncated"`
	OutputTotalChars    int            `json:"output_total_chars"`
	OutputReturnedChars int            `json:"output_returned_chars"`
	Finalize            *api.Finalize  `json:"finalize,omitempty"`
	Error               *errcode.Info  `json:"error,omitempty"`
	Usage               api.Usage      `json:"usage"`
	ExitCode            int            `json:"exit_code"`
	SessionFile         string         `json:"session_file,omitempty"`
	ArtifactFile        string         `json:"artifact_file,omitempty"`
	Provider            string         `json:"provider"`
	Model               string         `json:"model"`
	Thinking            string         `json:"thinking,omitempty"`
	ToolRows            []api.ToolRow  `json:"tool_rows,omitempty"`
	ToolCount           int            `json:"tool_count"`
	// EventCount is the task contract's event_count: the structured events captured
	// for the task's latest run; Timeline the latest of them (settings
	// taskMaxEvents, default 120).
	EventCount int                 `json:"event_count"`
	Timeline   []api.TimelineEvent `json:"timeline,omitempty"`
	// LastText is the tail of what a running child last wrote.
	LastText       string `json:"last_text,omitempty"`
	ElapsedMS      int64  `json:"elapsed_ms"`
	TimeoutSeconds int    `json:"timeout_s,omitempty"`
	UIURL          string `json:"ui_url,omitempty"`
	// Question is the question the task's child waits to have answered
	// (`subagents reply`); in the answer of `reply`, the question answered.
	Question *api.Question `json:"question,omitempty"`
	// Nested are the sessions the task's child started, and theirs in
	// turn, oldest first, each naming its parent session (`status` only;
	// docs/pi.md#nesting).
	Nested []ListItem `json:"nested,omitempty"`
}

// ListItem is one delegation or session in `list`.
type ListItem struct {
	ID              string     `json:"id"`
	Kind            string     `json:"kind"`
	Name            string     `json:"name,omitempty"`
	Description     string     `json:"description,omitempty"`
	Delegation      string     `json:"delegation_id,omitempty"`
	Agent           string     `json:"agent,omitempty"`
	Status          string     `json:"status,omitempty"`
	ExecutionStatus string     `json:"execution_status"`
	Cwd             string     `json:"cwd,omitempty"`
	ParentSessionID string     `json:"parent_session_id,omitempty"`
	Open            bool       `json:"open"`
	Started         time.Time  `json:"started"`
	Closed          *time.Time `json:"closed,omitempty"`
	UIURL           string     `json:"ui_url,omitempty"`
}

// ErrorEnvelope is the --json answer of a call that failed.
func ErrorEnvelope(op string, err error) Envelope {
	code := errcode.CodeOf(err)
	return Envelope{
		ContractVersion: ContractVersion, Op: op, Backend: Backend,
		Error: errcode.NewInfo(code, err.Error()),
	}
}

// delegationWorkflow is the workflow that holds delegation st: its own, or
// for a one-task delegation its task's session.
func delegationWorkflow(st api.DelegationStatus) string {
	if sid := oneTaskSession(st.DelegationID); sid != "" && len(st.Tasks) == 1 && st.Tasks[0].SessionID == sid {
		return sid
	}
	return st.DelegationID
}

func (c *Client) delegationEnvelope(op string, st api.DelegationStatus, live map[string]*liveSession) Envelope {
	usage := st.Usage
	env := Envelope{
		ContractVersion: ContractVersion, Op: op, Backend: Backend, DelegationID: st.DelegationID,
		Status: string(st.State), Done: st.Done, TotalCount: new(st.TotalCount), AcceptedCount: new(st.AcceptedCount),
		RejectedCount: new(st.RejectedCount), BatchStatus: st.BatchStatus, Deliver: st.Deliver, Delivered: st.Delivered,
		ParentSessionID: st.ParentSessionID, Usage: &usage, Items: []Item{}, UIURL: c.uiLink(delegationWorkflow(st)),
	}
	for _, t := range st.Tasks {
		it := Item{
			TaskID: t.SessionID, Index: t.Index, Name: t.Name, Agent: api.AgentName(t.Profile),
			Status: string(t.State), Done: t.State.Terminal(), Error: t.Error, UIURL: c.uiLink(t.SessionID),
		}
		ran := ""
		if t.Turn != nil {
			fillTurn(&it, t.Turn)
			ran = t.Turn.Result.Model
		}
		if l := live[t.SessionID]; l != nil && !it.Done {
			fillLive(&it, l, time.Time{}, c.CurrentTime())
			if p := l.progress; p != nil && ran == "" {
				ran = p.Model
			}
		}
		want := t.Model
		if len(it.Fallbacks) > 0 {
			// Another model than the one asked for ran: say which.
			want = ""
		}
		it.Provider, it.Model = splitModel(cmp.Or(want, ran))
		env.Items = append(env.Items, it)
	}
	if len(env.Items) == 1 && st.Plan == nil {
		env.TaskID = env.Items[0].TaskID
	}
	if st.Plan != nil {
		// The steps' results are the items: the view keeps the rest.
		view := *st.Plan
		view.Steps = make([]api.StepState, len(st.Plan.Steps))
		for i, s := range st.Plan.Steps {
			s.Turn = nil
			view.Steps[i] = s
		}
		env.Plan = &view
	}
	return env
}

func (c *Client) sessionEnvelope(op string, st api.SessionStatus, l *liveSession, open bool, name string) Envelope {
	name = cmp.Or(st.Name, name)
	if st.LastTurn != nil && st.LastTurn.Name != "" {
		// The latest run's: a task that resumed the session names it.
		name = st.LastTurn.Name
	}
	it := Item{
		TaskID: st.SessionID, Name: name, Agent: api.AgentName(st.Agent),
		SessionState: string(st.State), Turn: st.Turn, Attempts: st.ChildRun, Thinking: st.Thinking,
		TimeoutSeconds: st.TimeoutSeconds, UIURL: c.uiLink(st.SessionID),
	}
	it.Done = sessionDone(st, open)
	it.Question = st.PendingQuestion()
	model := st.Model
	switch {
	case !it.Done:
		it.Status = string(api.StateRunning)
		if st.State == api.StateQueued {
			it.Status = string(api.StateQueued)
		}
		if l == nil {
			l = &liveSession{}
		}
		if st.Turn > 0 && st.State == api.StateRunning {
			fillLive(&it, l, st.TurnStarted, c.CurrentTime())
			if p := l.progress; p != nil {
				model = cmp.Or(model, p.Model)
			}
		}
	case st.LastTurn != nil:
		fillTurn(&it, st.LastTurn)
		it.Status = string(st.LastTurn.State)
	default:
		it.Status = string(st.State)
		it.Error = st.Error
	}
	it.Provider, it.Model = splitModel(model)
	usage := st.Usage
	return Envelope{
		ContractVersion: ContractVersion, Op: op, Backend: Backend, TaskID: st.SessionID, Status: it.Status,
		Done: it.Done, Usage: &usage, Items: []Item{it}, RunCount: st.Turn, UIURL: it.UIURL,
	}
}

// sessionDone reports whether every turn the session accepted has ended.
func sessionDone(st api.SessionStatus, open bool) bool {
	if !open {
		return true
	}
	switch st.State {
	case api.StateQueued, api.StateRunning:
		return false
	}
	return st.Turn >= st.Accepted
}

func fillTurn(it *Item, t *api.TurnResult) {
	r := t.Result
	it.Turn, it.Attempts, it.Usage = t.Turn, t.ChildRuns, t.Usage
	it.Output, it.OutputTruncated, it.OutputTotalChars, it.OutputReturnedChars = r.Output, r.OutputTruncated, r.OutputTotalChars, r.OutputReturnedChars
	it.OutputAvailable = r.Output != ""
	it.Finalize, it.ExitCode, it.SessionFile, it.ArtifactFile = r.Finalize, r.ExitCode, r.SessionFile, r.ArtifactFile
	it.ToolRows, it.ToolCount, it.ElapsedMS = r.ToolRows, r.ToolCalls, r.DurationMS
	it.EventCount, it.Timeline = r.EventCount, r.Timeline
	it.RunAttempt, it.Continued, it.Warm = r.Attempt, r.Continued, r.Warm
	it.Fallbacks, it.Change = r.Fallbacks, r.Change
	if t.Error != nil {
		it.Error = t.Error
	}
}

// fillLive adds a running child's last heartbeat; elapsed counts from the
// turn's start when known, as the heartbeat is up to two seconds old.
func fillLive(it *Item, l *liveSession, started, now time.Time) {
	if p := l.progress; p != nil {
		it.ToolRows, it.ToolCount, it.LastText = p.ToolRows, p.ToolCalls, p.LastText
		it.EventCount = p.EventCount
		it.Usage = p.PriorUsage.Add(p.Usage)
		it.ElapsedMS, it.TimeoutSeconds = p.ElapsedMS, p.TimeoutSeconds
	}
	if !started.IsZero() {
		it.ElapsedMS = now.Sub(started).Milliseconds()
	}
}

// splitModel splits "provider/id": the task's model, else the one its child
// reported; "default" while neither is known (pi's default, before the
// child has answered).
func splitModel(ref string) (provider, model string) {
	if ref == "" {
		return "default", "default"
	}
	if p, m, ok := strings.Cut(ref, "/"); ok {
		return p, m
	}
	return "default", ref
}
