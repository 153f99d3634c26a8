package api

// DefaultTaskQueue is the queue workers poll and clients start on, unless
// configured otherwise (a host's own queue is this plus "@host").
const DefaultTaskQueue = "subagents"

// Names under which the worker registers the workflows and activities.
// They are part of every recorded history: renaming one breaks running
// workflows.
const (
	DelegationWorkflowName  = "Delegation"
	SessionWorkflowName     = "Session"
	ReadSessionWorkflowName = "ReadSession"
	PlanWorkflowName        = "Plan"

	RunPiActivityName          = "RunPi"
	ResolveTasksActivityName   = "ResolveTasks"
	LookupSessionsActivityName = "LookupSessions"
	ReadSessionActivityName    = "ReadSession"
	RunGateActivityName        = "RunGate"
	SendToSessionActivityName  = "SendToSession"
)

// Names of the signals, queries and updates, in one place: they are part of
// the public contract and of every recorded history.
const (
	// SendSignal queues a follow-up prompt on a session (SendRequest).
	SendSignal = "send"
	// CancelSignal cancels a session's running turn, or a delegation's
	// running tasks (CancelRequest).
	CancelSignal = "cancel"
	// StatusQuery answers a session's SessionStatus.
	StatusQuery = "status"
	// SendUpdate is SendSignal with an answer: the accepted turn number.
	SendUpdate = "send"
	// WaitUpdate blocks until the session's current turn (or every task of
	// a delegation) has ended and returns the status (WaitRequest).
	WaitUpdate = "wait"
	// CancelUpdate is CancelSignal with an answer (CancelResult): whether
	// there was anything to cancel.
	CancelUpdate = "cancel"
	// TaskDoneSignal is how a session tells its delegation that its first
	// turn ended (TaskDone).
	TaskDoneSignal = "task-done"
	// AckUpdate tells a delegation started with Deliver that its parent pi
	// has its results (AckRequest); the delegation then completes.
	AckUpdate = "ack"
	// AckSignal is AckUpdate without an answer (AckRequest): durable once
	// the server has it, so a parent pi about to exit need not wait for the
	// delegation's next workflow task. An ack before every task has ended
	// is ignored, as the update's validator refuses it.
	AckSignal = "ack"
	// ReplyUpdate answers a child's question (ReplyRequest) and returns
	// the question answered (Question); refused when none waits.
	ReplyUpdate = "reply"
	// ReplySignal is ReplyUpdate without an answer (ReplyRequest): the
	// Temporal UI's way to answer. A reply that does not fit a waiting
	// question is ignored, as the update's validator refuses it.
	ReplySignal = "reply"
)

// CurrentVersion is the workflow code version that new delegations and
// sessions carry in their input (DelegationInput.Version,
// SessionInput.Version). A run started without one replays the code paths
// it was recorded with; one started with it takes the paths written since,
// which emit fewer commands. Carrying it in the input costs no event, where
// workflow.GetVersion would add a marker and a search attribute upsert to
// every run.
//
// Version 2: the starter sets the search attributes a run starts with
// (status running), the workflow upserts only what changes; a session that
// will wait for input says so in one upsert after its turn; a delegation
// whose tasks may run on any worker resolves their profiles in a local
// activity.
//
// Version 3: a delegation of one new task is one workflow, its session
// (SessionInput.Delegation), where it was a delegation and its session.
//
// Version 4: a session records how each turn ended (completed, failed, ...)
// where it recorded waiting_for_input, so the status attribute never hides
// a failure; a session or delegation cancelled through Temporal records
// cancelled before it closes; a resume target is busy only while a turn
// runs or waits to.
//
// Version 5: a session's run ends with its turn, in Temporal's own terms
// (completed; failed with the error code as the failure's type; or
// canceled), so that Running in the Temporal UI means a child works; its
// result holds the input of its next run (SessionResult.Next), which a
// send starts under the same workflow ID (activities.Sessions.SendToSession).
// A plan of PlanVersion 5 starts version 5 sessions.
const CurrentVersion = 5

// AckRequest is the payload of AckUpdate.
type AckRequest struct {
	// By names who acknowledged, for the history (e.g. the parent session).
	By string `json:"by,omitempty"`
}

// TaskDone is the payload of TaskDoneSignal.
type TaskDone struct {
	Index     int        `json:"index"`
	SessionID string     `json:"sessionId"`
	Turn      TurnResult `json:"turn"`
}

// SendRequest is the payload of SendSignal and SendUpdate.
type SendRequest struct {
	Prompt string     `json:"prompt"`
	Files  []FileSpec `json:"files,omitempty"`
	// NotifyWorkflowID, when set, is a delegation to signal (TaskDone with
	// NotifyIndex) when this turn ends: how a resumed task reports back.
	NotifyWorkflowID string `json:"notifyWorkflowId,omitempty"`
	NotifyIndex      int    `json:"notifyIndex,omitempty"`
	// Name is the task's name when a delegation resumes the session with
	// a task of its own: the turn's (TurnResult.Name).
	Name string `json:"name,omitempty"`
}

// SendAccepted answers SendUpdate.
type SendAccepted struct {
	// Turn is the number the prompt will run as.
	Turn int `json:"turn"`
}

// CancelRequest is the payload of CancelSignal.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// CancelResult answers CancelUpdate (the task contract's cancel envelope fields).
type CancelResult struct {
	CancelApplied bool  `json:"cancel_applied"`
	PriorStatus   State `json:"prior_status"`
}

// WaitRequest is the payload of WaitUpdate.
type WaitRequest struct {
	// Turn to wait for; 0 means the latest turn that was accepted.
	Turn int `json:"turn,omitempty"`
	// Questions ends the wait early, with the status, while a child's
	// question waits for its answer: a parent that waits for its task
	// would otherwise wait for itself.
	Questions bool `json:"questions,omitempty"`
}
