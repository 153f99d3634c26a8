package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Limits of the client's own waiting.
const (
	// DefaultPollInterval: how often Wait and Follow look at a running
	// delegation. Queries touch no history, so a second costs the server
	// nothing, and it is below what a person notices in a progress line.
	DefaultPollInterval = time.Second
	// firstPoll: the first look comes sooner, so that a task that ends in
	// a moment does not wait a whole interval.
	firstPoll = 200 * time.Millisecond
)

// Client runs the operations on delegations and sessions: the library
// behind every `subagents` verb and, through the command, the pi extension.
type Client struct {
	Temporal  sdkclient.Client
	TaskQueue string
	// Address is the frontend's host:port, for error messages.
	Address string
	// Namespace and UIURL make the Temporal UI links of runs ("" UIURL: no
	// links).
	Namespace string
	UIURL     string
	// PollInterval is DefaultPollInterval when zero.
	PollInterval time.Duration
	// NewID makes session and delegation IDs; nil means random UUIDs.
	NewID func() string
	// Now is the clock for elapsed times; nil means time.Now.
	Now func() time.Time
	// WorkflowVersion is the workflow code version the delegations and
	// sessions it starts run (api.CurrentVersion when zero): an earlier
	// one starts runs as the previous release did, for the upgrade tests
	// and the benchmarks that compare the two.
	WorkflowVersion int
}

// StartRequest is what `start` and `run` read (JSON on stdin, or flags).
type StartRequest struct {
	Tasks   []api.TaskSpec `json:"tasks"`
	Profile string         `json:"profile,omitempty"`
	// ParentSessionID is the pi session that delegates; with Deliver the
	// delegation waits until that parent acknowledges the results.
	ParentSessionID string `json:"parent_session_id,omitempty"`
	Deliver         bool   `json:"deliver,omitempty"`
	// MaxConcurrency bounds the tasks that run at once; 0 takes the
	// settings' taskMaxConcurrency, else the tool's default (Tool).
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// Tool is the tool family the call came through ("task": the task contract's
	// default of 3 tasks at once, else the delegate contract's 4; "subagent": read-only
	// profiles unless the settings allow writes).
	Tool           string `json:"tool,omitempty"`
	IdleTTLSeconds int    `json:"idle_ttl_seconds,omitempty"`
	// Host runs the tasks on the workers of that host (where their cwds
	// exist); "" lets any worker run them. The command fills it in from
	// --host / SUBAGENTS_HOST ("auto": this machine).
	Host string `json:"host,omitempty"`
	// Depth is the caller's own subagent depth and Knobs its own settings
	// of the tasks: the command fills them in from the caller's side of
	// the call (its session, its environment), never from the request's
	// JSON, which the caller writes as it likes.
	Depth int              `json:"-"`
	Knobs *api.CallerKnobs `json:"-"`
	// send: the request is a send's (api.DelegationInput.Send).
	send bool
	// ParentSessionFile is the parent pi's session file: tasks whose
	// context is fork start from a copy of its conversation.
	ParentSessionFile string `json:"parent_session_file,omitempty"`
}

// SendRequest is what `send` reads: a follow-up prompt for a session.
type SendRequest struct {
	TaskID          string         `json:"task_id"`
	Prompt          string         `json:"prompt"`
	Files           []api.FileSpec `json:"files,omitempty"`
	ParentSessionID string         `json:"parent_session_id,omitempty"`
	Deliver         bool           `json:"deliver,omitempty"`
	// Agent, when set, is the agent the caller continues: a session goes on
	// only with its own (the sessions contract scopes a session by cwd, agent and ID), so
	// another is refused with a message saying which to use.
	Agent string `json:"agent,omitempty"`
	// Sticky names the session as the sessions contract does: by Cwd, Agent
	// and TaskID, an ID nobody used yet starting that session (the
	// `subagent` tool's sessionId; client/sticky.go).
	Sticky bool   `json:"sticky,omitempty"`
	Cwd    string `json:"cwd,omitempty"`
	// Depth and Knobs are the caller's (StartRequest's), for a send that
	// starts its session (Sticky) or runs a closed one again.
	Depth int              `json:"-"`
	Knobs *api.CallerKnobs `json:"-"`
	// CallerDepth, when set, proves the caller's depth (Depth is then its
	// claim): called only where the send starts work, so that a plain
	// message to a running session needs no history read and a stale
	// token does not block it.
	CallerDepth func(ctx context.Context) (int, error) `json:"-"`
}

// ListFilter narrows `list`; empty fields match everything.
type ListFilter struct {
	Status          string `json:"status,omitempty"`
	Agent           string `json:"agent,omitempty"`
	ParentSessionID string `json:"parent_session_id,omitempty"`
	Cwd             string `json:"cwd,omitempty"`
	// Kind is "session", "delegation" (plans among them), "plan" (plans
	// only), or "" for all.
	Kind string `json:"kind,omitempty"`
	// Open keeps only workflows that still run (delegations awaiting their
	// parent's acknowledgement among them) and sessions that still take a
	// send (api.SendUntilKey).
	Open  bool `json:"open,omitempty"`
	Limit int  `json:"limit,omitempty"`

	// running keeps only workflows that still run (Open without the
	// sessions whose run has closed).
	running bool
	// now is when a closed session stops taking a send is compared with
	// (time.Now when zero).
	now time.Time
}

// id is a new task or delegation ID: a UUIDv7, whose first bits are the
// time it was made, so that a client asked about an ID it cannot find can
// tell a task a start has just returned (its session appears a moment
// later) from one that does not exist (answered at once): justMinted.
func (c *Client) id() string {
	if c.NewID != nil {
		return c.NewID()
	}
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}

// mintedWithin is how recent an ID must be for describe and wait to wait
// for its session: the session appears within sessionAppearsWithin of the
// start, and the machine asking may not be the one that made the ID (a
// minute of clock difference between them is allowed for).
const mintedWithin = sessionAppearsWithin + time.Minute

// justMinted reports whether id is one this project's clients made (a
// UUIDv7) within mintedWithin of now. IDs of other forms (older v4 IDs, a
// typo) are never waited for.
func justMinted(id string, now time.Time) bool {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		return false
	}
	made := time.Unix(u.Time().UnixTime())
	return now.Sub(made).Abs() <= mintedWithin
}

// CurrentTime is c.Now(), or the wall clock when Now is unset.
func (c *Client) CurrentTime() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) pollInterval() time.Duration {
	if c.PollInterval > 0 {
		return c.PollInterval
	}
	return DefaultPollInterval
}

// Start starts a delegation of req's tasks and returns at once, with the
// task IDs (session IDs) the caller addresses them by.
func (c *Client) Start(ctx context.Context, req StartRequest) (Envelope, error) {
	in, err := c.delegationInput(req)
	if err != nil {
		return Envelope{}, err
	}
	if err := c.checkResumes(ctx, in.Tasks, in.Send); err != nil {
		return Envelope{}, err
	}
	return c.startDelegation(ctx, in)
}

// delegationInput turns a request into the delegation's input: default
// names, one session ID per task (a resumed task keeps its own), checked.
func (c *Client) delegationInput(req StartRequest) (api.DelegationInput, error) {
	in := api.DelegationInput{
		Tasks: req.Tasks, Profile: req.Profile, ParentSessionID: req.ParentSessionID, Deliver: req.Deliver,
		MaxConcurrency: req.MaxConcurrency, IdleTTLSeconds: req.IdleTTLSeconds, Depth: req.Depth, Host: req.Host,
		Version: cmp.Or(c.WorkflowVersion, api.CurrentVersion), Tool: req.Tool, ParentSessionFile: req.ParentSessionFile, Knobs: req.Knobs,
	}
	in.Send = req.send && in.Version >= 5
	for i := range in.Tasks {
		t := &in.Tasks[i]
		if strings.TrimSpace(t.Name) == "" {
			t.Name = defaultTaskName(*t, in.Profile, i)
		}
		if len(in.Tasks) > 1 {
			// The task contract: a bad item of a batch is rejected on its own, with
			// its error, while the others run.
			if err := api.ValidateTask(i, *t); err != nil {
				t.Rejected = errcode.InfoOf(err)
			}
		}
		if t.Context == "fork" && in.ParentSessionFile == "" && t.Rejected == nil {
			err := errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): context fork starts from the parent's conversation, and this call names no parent session file", i, t.Name)
			if len(in.Tasks) == 1 {
				return in, err
			}
			t.Rejected = errcode.InfoOf(err)
		}
		id := t.Resume
		if id == "" {
			id = c.id()
		}
		in.SessionIDs = append(in.SessionIDs, id)
	}
	if in.MaxConcurrency == 0 && len(in.Tasks) > 1 {
		cfg, err := profiles.LoadConfig(profiles.DefaultAgentDir(), in.Tasks[0].Cwd, os.Getenv)
		if err != nil {
			return in, err
		}
		in.MaxConcurrency = cfg.TaskMaxConcurrency
		if in.MaxConcurrency == 0 && req.Tool == "task" {
			in.MaxConcurrency = DefaultTaskToolConcurrency
		}
	}
	if err := api.ValidateDelegation(in); err != nil {
		return in, err
	}
	if b, err := json.Marshal(in); err == nil && len(b) > MaxStartBytes {
		return in, errcode.Errorf(errcode.InvalidInput,
			"the request is %d KiB and Temporal takes at most %d KiB of input per workflow: name large context in files[] (read on the worker) instead of putting it in the prompt",
			len(b)>>10, MaxStartBytes>>10)
	}
	return in, nil
}

// delegationDetails lists a delegation's tasks for the Temporal UI.
func delegationDetails(in api.DelegationInput) string {
	var b strings.Builder
	for i, t := range in.Tasks {
		b.WriteString(api.TaskDetails(t.Name, api.AgentName(t.ProfileOr(in.Profile)), t.Cwd, t.Prompt, in.ParentSessionID, "", in.Depth))
		if i < len(in.Tasks)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// MaxStartBytes bounds a delegation's input: Temporal refuses a payload
// over 2 MB (its blob size limit); a little room is left for the encoding.
const MaxStartBytes = 2000 << 10

// DefaultTaskToolConcurrency is the task contract's subagents.taskMaxConcurrency
// default, for batches of the task tool.
const DefaultTaskToolConcurrency = 3

func (c *Client) startDelegation(ctx context.Context, in api.DelegationInput) (Envelope, error) {
	if isOneTask(in) {
		return c.startOneTask(ctx, in)
	}
	id := api.DelegationIDPrefix + c.id()
	attrs := []temporal.SearchAttributeUpdate{
		api.AgentKey.ValueSet("delegation"),
		// It runs from its first workflow task on; saying so here spares
		// the workflow an upsert.
		api.StatusKey.ValueSet(string(api.StateRunning)),
		api.CwdKey.ValueSet(in.Tasks[0].Cwd),
	}
	if in.ParentSessionID != "" {
		attrs = append(attrs, api.ParentSessionKey.ValueSet(in.ParentSessionID))
	}
	names := make([]string, len(in.Tasks))
	for i, t := range in.Tasks {
		names[i] = t.Name
	}
	_, err := c.Temporal.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             c.TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(attrs...),
		Memo:                  map[string]any{"name": strings.Join(names, ", ")},
		StaticSummary:         fmt.Sprintf("delegation of %d task(s): %s", len(names), strings.Join(names, ", ")) + api.NestedUnder(in.Depth, in.ParentSessionID),
		StaticDetails:         delegationDetails(in),
		// A delegation ID is never reused; a duplicate start is a bug.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// Where this client shares its process with a worker of the queue
		// (subagents dev and its socket), the server hands the first
		// workflow task back in the start's answer: one trip through
		// matching less. Elsewhere it is an ordinary start.
		EnableEagerStart: true,
	}, api.DelegationWorkflowName, in)
	if err != nil {
		return Envelope{}, c.temporalError(err, id)
	}
	st := startedStatus(id, in)
	if len(in.Tasks) > 1 {
		// The worker resolves the profiles in the delegation's first
		// workflow task: ask for the batch as it stands after it, so that
		// an unknown or denied profile counts as rejected here already.
		// Bounded: with no worker polling, the start still answers.
		qctx, cancel := context.WithTimeout(ctx, startStatusTimeout)
		defer cancel()
		for qctx.Err() == nil {
			var now api.DelegationStatus
			v, err := c.Temporal.QueryWorkflow(qctx, id, "", api.StatusQuery)
			if err == nil && v.Get(&now) == nil {
				st = now
				break
			}
			// Asked before its first workflow task ended: ask again.
			select {
			case <-qctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	env := c.delegationEnvelope("start", st, nil)
	return env, nil
}

// startedStatus is a delegation's status as its start answers it: every
// task queued, or refused on its own.
func startedStatus(id string, in api.DelegationInput) api.DelegationStatus {
	st := api.DelegationStatus{DelegationID: id, State: api.StateQueued, TotalCount: len(in.Tasks),
		Deliver: in.Deliver, ParentSessionID: in.ParentSessionID}
	for i, t := range in.Tasks {
		task := api.TaskResult{Index: i, Name: t.Name, SessionID: in.SessionIDs[i], Profile: t.ProfileOr(in.Profile), Model: t.Model, State: api.StateQueued}
		if t.Rejected != nil {
			task.State, task.Error = api.StateFailed, t.Rejected
			st.RejectedCount++
		} else {
			st.AcceptedCount++
		}
		st.Tasks = append(st.Tasks, task)
	}
	st.BatchStatus = api.BatchStatus(st.TotalCount, st.RejectedCount, false)
	return st
}

// isOneTask reports a delegation that runs as one workflow, its task's
// session (api.SessionInput.Delegation): one new task, from version 3.
func isOneTask(in api.DelegationInput) bool {
	return in.Version >= 3 && len(in.Tasks) == 1 && in.Tasks[0].Resume == "" && in.Tasks[0].Rejected == nil
}

// startOneTask starts a delegation of one new task as its session's
// workflow, which stands for the delegation too: half the workflows, and
// half the server's work, of a delegation and its session.
func (c *Client) startOneTask(ctx context.Context, in api.DelegationInput) (Envelope, error) {
	t, sid := in.Tasks[0], in.SessionIDs[0]
	id := api.OneTaskDelegationID(sid)
	profile := t.ProfileOr(in.Profile)
	agent := api.AgentName(profile)
	sin := api.SessionInput{
		SessionID: sid, Agent: profile, Cwd: t.Cwd, Prompt: t.Prompt, Files: t.Files, Name: t.Name,
		ParentSessionID: in.ParentSessionID, Host: in.Host, IdleTTLSeconds: in.IdleTTLSeconds, Version: in.Version,
		QuestionTimeoutSeconds: t.QuestionTimeoutSeconds,
		Delegation: &api.DelegationRole{
			ID: id, Depth: in.Depth, Tool: in.Tool, Deliver: in.Deliver, AckTTLSeconds: in.AckTTLSeconds, Knobs: in.Knobs,
			// What the session resolves; its prompt and files are the
			// session's own.
			Task: api.TaskSpec{Name: t.Name, Profile: profile, Model: t.Model, TimeoutSeconds: t.TimeoutSeconds, Cwd: t.Cwd, Description: t.Description,
				Worktree: t.Worktree, BaseRef: t.BaseRef},
		},
	}
	if t.Context == "fork" {
		sin.Delegation.ForkFrom = in.ParentSessionFile
	}
	_, err := c.Temporal.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:        sid,
		TaskQueue: c.TaskQueue,
		// What a delegation's session starts with, and the mark of the
		// delegation it stands for.
		TypedSearchAttributes: api.SessionAttributes(agent, t.Cwd, api.StateRunning, in.ParentSessionID,
			api.DelegationKey.ValueSet(api.DelegationOpen)),
		Memo:          api.SessionMemo(t, id, in.Host),
		StaticSummary: api.SessionSummary(t.Name, agent) + api.NestedUnder(in.Depth, in.ParentSessionID),
		StaticDetails: api.TaskDetails(t.Name, agent, t.Cwd, t.Prompt, in.ParentSessionID, id, in.Depth),
		// A new task's ID is never reused; a duplicate start is a bug.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// As for a delegation (startDelegation).
		EnableEagerStart: true,
	}, api.SessionWorkflowName, sin)
	if err != nil {
		return Envelope{}, c.temporalError(err, id)
	}
	return c.delegationEnvelope("start", startedStatus(id, in), nil), nil
}

// startStatusTimeout bounds the start's look at a batch after its first
// workflow task: that task takes milliseconds on a live worker; a second
// is far beyond it and short enough for a caller with no worker running.
const startStatusTimeout = time.Second

// checkResumes refuses, before anything starts, to resume a session that
// does not exist or still runs (the delegate contract's texts); the delegation checks
// again, for a session that changes in between.
func (c *Client) checkResumes(ctx context.Context, tasks []api.TaskSpec, send bool) error {
	for _, t := range tasks {
		if t.Resume == "" || t.Rejected != nil {
			continue
		}
		desc, err := c.Temporal.DescribeWorkflowExecution(ctx, t.Resume, "")
		switch {
		case isNotFound(err) || err == nil && desc.GetWorkflowExecutionInfo().GetType().GetName() != api.SessionWorkflowName:
			return errcode.Errorf(errcode.SessionNotFound, "Cannot resume: session %q not found. The session may have expired or the ID is incorrect.", t.Resume)
		case err != nil:
			return c.temporalError(err, t.Resume)
		}
		info := desc.GetWorkflowExecutionInfo()
		state := searchAttr(info, api.StatusKey.GetName())
		if !send && info.GetCloseTime() == nil && (state == string(api.StateRunning) || state == string(api.StateQueued)) {
			return errcode.Errorf(errcode.SessionRunning, "Cannot resume: session %q is still running. Wait for it to complete before resuming.", t.Resume)
		}
	}
	return nil
}

// defaultTaskName names a task that came without one (the sessions contract and 001
// calls have none): its description, else its profile.
func defaultTaskName(t api.TaskSpec, profile string, i int) string {
	for _, s := range []string{t.Description, t.Profile, t.Agent, profile} {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return fmt.Sprintf("task-%d", i+1)
}

// kind of a workflow the client addresses by ID.
type kind string

const (
	kindSession    kind = "session"
	kindDelegation kind = "delegation"
	// kindOneTask is a delegation ID whose workflow is its task's session
	// (api.SessionInput.Delegation); never a list kind.
	kindOneTask kind = "one-task delegation"
)

// oneTaskSession is the session a delegation ID stands for when it names a
// one-task delegation (api.OneTaskDelegationID), else "": its workflow.
func oneTaskSession(id string) string {
	rest, ok := strings.CutPrefix(id, api.DelegationIDPrefix)
	if !ok {
		return ""
	}
	// A session ID: a UUID, or one a sticky session's caller chose.
	if !api.ValidName(rest) {
		return ""
	}
	return rest
}

// describeOneTask describes the session a one-task delegation ID stands
// for; nil when id is not one (a delegation of several tasks, or a session
// that stands for no delegation of that ID).
func (c *Client) describeOneTask(ctx context.Context, id string) *workflowservice.DescribeWorkflowExecutionResponse {
	sid := oneTaskSession(id)
	if sid == "" {
		return nil
	}
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, sid, "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetType().GetName() != api.SessionWorkflowName ||
		memoString(desc.GetWorkflowExecutionInfo(), "delegation") != id {
		return nil
	}
	return desc
}

// describe finds id's workflow; a missing one is SESSION_NOT_FOUND with
// the delegate contract's message.
func (c *Client) describe(ctx context.Context, id string) (*workflowservice.DescribeWorkflowExecutionResponse, kind, error) {
	if strings.TrimSpace(id) == "" {
		return nil, "", errcode.New(errcode.InvalidInput, "a task or session ID is required")
	}
	if desc := c.describeOneTask(ctx, id); desc != nil {
		return desc, kindOneTask, nil
	}
	desc, err := c.describeAppearing(ctx, id)
	if err != nil {
		return nil, "", c.temporalError(err, id)
	}
	switch name := desc.GetWorkflowExecutionInfo().GetType().GetName(); name {
	case api.SessionWorkflowName:
		return desc, kindSession, nil
	case api.DelegationWorkflowName, api.PlanWorkflowName:
		// A plan answers as a delegation whose tasks are its task steps.
		return desc, kindDelegation, nil
	default:
		return nil, "", errcode.Errorf(errcode.SessionNotFound, "%q is a %s workflow, not a subagent session or delegation", id, name)
	}
}

// sessionAppearsWithin bounds the wait for a task ID a start just returned:
// its session workflow is started by the delegation's first workflow task,
// tens of milliseconds after the start answered on a live worker; an ID
// still unknown after this is not a session.
const sessionAppearsWithin = 2 * time.Second

// describeAppearing describes workflow id; one that does not exist yet but
// was just made (justMinted) is asked for again until it does, for at most
// sessionAppearsWithin, and the last answer (not found) is returned after
// that. Any other unknown ID is not found at once.
func (c *Client) describeAppearing(ctx context.Context, id string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if !isNotFound(err) || !justMinted(id, c.CurrentTime()) {
		return desc, err
	}
	for deadline := time.Now().Add(sessionAppearsWithin); isNotFound(err) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return desc, err
		case <-time.After(50 * time.Millisecond):
		}
		desc, err = c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	}
	return desc, err
}

func isNotFound(err error) bool {
	var notFound *serviceerror.NotFound
	return errors.As(err, &notFound)
}

// temporalError gives a Temporal error its code.
func (c *Client) temporalError(err error, id string) error {
	var notFound *serviceerror.NotFound
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var denied *serviceerror.PermissionDenied
	var coded *errcode.Error
	switch {
	case errors.As(err, &coded):
		return err
	case errors.As(err, &notFound):
		return errcode.Wrap(errcode.SessionNotFound, err, fmt.Sprintf("Session %q not found. The session may have expired or the ID is incorrect.", id))
	case errors.As(err, &unavailable), errors.As(err, &deadline), errors.Is(err, context.DeadlineExceeded):
		return connection.Unavailable(c.Address, err)
	case errors.As(err, &denied):
		return errcode.Wrap(errcode.PermissionDenied, err, fmt.Sprintf("Temporal at %s refused the call: %s", c.Address, denied.Message))
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		code, known := errcode.Parse(app.Type())
		if !known {
			code = errcode.Failed
		}
		return errcode.Wrap(code, err, app.Message())
	}
	return errcode.Wrap(errcode.Failed, err, err.Error())
}

// query asks a workflow for its status; a closed workflow that no worker
// can replay answers with its result instead.
func (c *Client) query(ctx context.Context, id string, open bool, out any) error {
	v, err := retryNoPoller(ctx, func() (converter.EncodedValue, error) {
		return c.Temporal.QueryWorkflow(ctx, id, "", api.StatusQuery)
	})
	if err == nil {
		return v.Get(out)
	}
	if open {
		return c.temporalError(err, id)
	}
	if rerr := c.Temporal.GetWorkflow(ctx, id, "").Get(ctx, out); rerr != nil {
		// A session closes failed or cancelled with its result in the
		// failure's details (version 5).
		if held, derr := api.DetailsOf(rerr, out); held {
			return derr
		}
		return c.temporalError(err, id)
	}
	return nil
}

// Status is a delegation's or a session's state now, with the live progress
// of running children (their last heartbeat).
func (c *Client) Status(ctx context.Context, id string) (Envelope, error) {
	env, err := c.status(ctx, "status", id)
	if err == nil {
		// What the tasks delegated in turn, under each task: asked for by
		// a reader of one status, not by the wait and follow loops that
		// share c.status.
		c.WithNested(ctx, &env)
	}
	return env, err
}

func (c *Client) status(ctx context.Context, op, id string) (Envelope, error) {
	desc, k, err := c.describe(ctx, id)
	if err != nil {
		return Envelope{}, err
	}
	open := desc.GetWorkflowExecutionInfo().GetCloseTime() == nil
	if k == kindOneTask {
		st, err := c.oneTaskStatus(ctx, desc)
		if err != nil {
			return Envelope{}, err
		}
		live := map[string]*liveSession{}
		if t := st.Tasks[0]; open && !t.State.Terminal() {
			live[t.SessionID] = liveFrom(desc)
		}
		env := c.delegationEnvelope(op, st, live)
		if !env.Done {
			c.withQuestions(ctx, &env, live)
		}
		return env, nil
	}
	if k == kindDelegation {
		var st api.DelegationStatus
		if err := c.query(ctx, id, open, &st); err != nil {
			return Envelope{}, err
		}
		if !open && !st.Done {
			exec := desc.GetWorkflowExecutionInfo().GetStatus()
			if ended := api.ClosedAs(exec, ""); ended != "" && ended != api.StateFailed {
				// Terminated, cancelled or timed out by Temporal before its
				// tasks ended: that is its state, and its open tasks'.
				endedByTemporal(&st, ended)
			} else {
				// It failed before its tasks ended (a resume target was
				// missing or running): its error is the answer.
				if err := c.Temporal.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
					return Envelope{}, c.temporalError(err, id)
				}
				st.Done = true
			}
		}
		live := map[string]*liveSession{}
		for _, t := range st.Tasks {
			if !t.State.Terminal() && t.State != api.StateQueued {
				if l, err := c.live(ctx, t.SessionID); err == nil {
					live[t.SessionID] = l
				}
			}
		}
		env := c.delegationEnvelope(op, st, live)
		if !env.Done {
			// A task whose child waits for an answer says so, with the
			// question (docs/questions.md).
			c.withQuestions(ctx, &env, live)
		}
		return env, nil
	}
	var st api.SessionStatus
	if err := c.query(ctx, id, open, &st); err != nil {
		return Envelope{}, err
	}
	st.SessionID = id
	var l *liveSession
	if open {
		l = liveFrom(desc)
	}
	env := c.sessionEnvelope(op, st, l, open, memoString(desc.GetWorkflowExecutionInfo(), "name"))
	if !open {
		sessionEndedByTemporal(&env, desc.GetWorkflowExecutionInfo().GetStatus())
	}
	return env, nil
}

// oneTaskStatus is the status of the one-task delegation whose session desc
// describes.
func (c *Client) oneTaskStatus(ctx context.Context, desc *workflowservice.DescribeWorkflowExecutionResponse) (api.DelegationStatus, error) {
	info := desc.GetWorkflowExecutionInfo()
	sid, id := info.GetExecution().GetWorkflowId(), memoString(info, "delegation")
	var st api.SessionStatus
	if err := c.query(ctx, sid, info.GetCloseTime() == nil, &st); err != nil {
		return api.DelegationStatus{}, err
	}
	st.SessionID = sid
	if ended := api.ClosedAs(info.GetStatus(), ""); ended != "" && ended != api.StateFailed && (st.Delegation == nil || st.Delegation.FirstTurn == nil) {
		// Terminated, cancelled or timed out by Temporal before its task
		// ended: that is its task's state.
		if st.Delegation == nil {
			st.Delegation = &api.DelegationView{ID: id, ParentSessionID: searchAttr(info, api.ParentSessionKey.GetName())}
		}
		st.Name = cmp.Or(st.Name, memoString(info, "name"))
		out := st.AsDelegation()
		endedByTemporal(&out, ended)
		return out, nil
	}
	if st.Delegation == nil || st.Delegation.FirstTurn == nil {
		if info.GetCloseTime() != nil {
			// It closed before its task ended (terminated, or its profile
			// could not be read): that is the answer.
			if err := c.Temporal.GetWorkflow(ctx, sid, "").Get(ctx, nil); err != nil {
				return api.DelegationStatus{}, c.temporalError(err, id)
			}
		}
		if st.Delegation == nil {
			st.Delegation = &api.DelegationView{ID: id, ParentSessionID: searchAttr(info, api.ParentSessionKey.GetName())}
		}
	}
	if st.Name == "" {
		st.Name = memoString(info, "name")
	}
	return st.AsDelegation(), nil
}

// liveSession is a running session's last heartbeat.
type liveSession struct {
	progress *api.Progress
	// asks: the session's memo shows a question its child waits on.
	asks bool
}

func (c *Client) live(ctx context.Context, sessionID string) (*liveSession, error) {
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, sessionID, "")
	if err != nil {
		return nil, err
	}
	return liveFrom(desc), nil
}

func liveFrom(desc *workflowservice.DescribeWorkflowExecutionResponse) *liveSession {
	l := &liveSession{asks: memoString(desc.GetWorkflowExecutionInfo(), "question") != ""}
	for _, a := range desc.GetPendingActivities() {
		if a.GetActivityType().GetName() != api.RunPiActivityName || a.GetHeartbeatDetails() == nil {
			continue
		}
		var p api.Progress
		if err := converter.GetDefaultDataConverter().FromPayloads(a.GetHeartbeatDetails(), &p); err == nil {
			l.progress = &p
			break
		}
	}
	return l
}

func memoString(info *workflowpb.WorkflowExecutionInfo, key string) string {
	return payloadString(info.GetMemo().GetFields(), key)
}

// payloadString decodes one string field of a memo or of the search
// attributes; a missing or non-string field is "".
func payloadString(fields map[string]*commonpb.Payload, key string) string {
	p, ok := fields[key]
	if !ok {
		return ""
	}
	var s string
	_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
	return s
}

// Wait blocks until the delegation (every task) or the session's latest
// turn has ended, or timeout passes (0: no limit), and says which.
func (c *Client) Wait(ctx context.Context, id string, timeout time.Duration) (Envelope, error) {
	return c.follow(ctx, "wait", id, timeout, nil)
}

// Follow is Wait that calls onUpdate with every status it sees on the way,
// for live progress.
func (c *Client) Follow(ctx context.Context, id string, timeout time.Duration, onUpdate func(Envelope)) (Envelope, error) {
	return c.follow(ctx, "wait", id, timeout, onUpdate)
}

func (c *Client) follow(ctx context.Context, op, id string, timeout time.Duration, onUpdate func(Envelope)) (Envelope, error) {
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	// The wait update answers the moment the work ends; the status polls
	// only draw progress, and take over if the update cannot be used (the
	// workflow closed, continued as new, or has too many waiters).
	wctx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	type answer struct {
		env Envelope
		err error
	}
	ended := make(chan answer, 1)
	go func() {
		env, err := c.waitUpdate(wctx, op, id)
		if isNotFound(err) {
			if _, derr := c.describeAppearing(wctx, id); derr == nil {
				// A task ID a start just returned: its session has appeared.
				env, err = c.waitUpdate(wctx, op, id)
			}
		}
		ended <- answer{env, err}
	}()
	waiting := true
	delay := firstPoll
	if onUpdate == nil {
		// Nothing to draw: wait for the answer alone, and ask for the
		// status only when it cannot come (or the caller stops waiting).
		select {
		case a := <-ended:
			waiting = false
			if a.err == nil && a.env.Done {
				a.env.WaitStatus = "completed"
				return a.env, nil
			}
		case <-ctx.Done():
			return c.finalStatus(ctx, op, id, "aborted")
		case <-deadline:
			return c.finalStatus(ctx, op, id, "timeout")
		}
	}
	var env Envelope
	for {
		frame, err := c.status(ctx, op, id)
		switch {
		case err == nil:
			env = frame
			if env.Done {
				env.WaitStatus = "completed"
				return env, nil
			}
			if onUpdate != nil {
				onUpdate(env)
			}
		case ctx.Err() != nil:
			return c.aborted(op, id), nil
		case !waiting:
			return Envelope{}, err
		}
		// A frame that could not be read (the status query refused, e.g.
		// matching's "no poller seen") only skips a drawing: the wait
		// update still answers when the work ends.
		next := time.After(delay)
		if waiting && onUpdate == nil {
			// Nothing to draw: the update wakes us; poll rarely, as a
			// safety net only.
			next = time.After(c.pollInterval() * 10)
		}
		select {
		case <-ctx.Done():
			if env.Op == "" {
				return c.finalStatus(ctx, op, id, "aborted")
			}
			env.WaitStatus = "aborted"
			return env, nil
		case <-deadline:
			if env.Op == "" {
				return c.finalStatus(ctx, op, id, "timeout")
			}
			env.WaitStatus = "timeout"
			return env, nil
		case a := <-ended:
			waiting = false
			if a.err == nil && a.env.Done {
				a.env.WaitStatus = "completed"
				return a.env, nil
			}
			// Fall back to polling, from now at the usual pace.
			delay = firstPoll
			continue
		case <-next:
		}
		delay = min(delay*2, c.pollInterval())
	}
}

// waitUpdate blocks in the workflow's wait update until the session's
// latest turn, or the whole delegation, has ended, and returns the status
// the update answers with.
func (c *Client) waitUpdate(ctx context.Context, op, id string) (Envelope, error) {
	if sid := oneTaskSession(id); sid != "" {
		// Straight to the session it may stand for: its first turn is the
		// delegation's task. A delegation of several tasks has no such
		// session, and is waited for below.
		h, err := c.updateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID: sid, UpdateName: api.WaitUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
			Args: []any{api.WaitRequest{Turn: 1}},
		})
		if err == nil {
			var st api.SessionStatus
			if err := h.Get(ctx, &st); err != nil {
				return Envelope{}, err
			}
			if st.Delegation != nil && st.Delegation.ID == id {
				st.SessionID = sid
				return c.delegationEnvelope(op, st.AsDelegation(), nil), nil
			}
		} else if !isNotFound(err) {
			return Envelope{}, err
		}
	}
	h, err := c.updateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: api.WaitUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
		Args: []any{api.WaitRequest{}},
	})
	if err != nil {
		return Envelope{}, err
	}
	if strings.HasPrefix(id, api.DelegationIDPrefix) || api.IsPlanID(id) {
		var st api.DelegationStatus
		if err := h.Get(ctx, &st); err != nil {
			return Envelope{}, err
		}
		return c.delegationEnvelope(op, st, nil), nil
	}
	var st api.SessionStatus
	if err := h.Get(ctx, &st); err != nil {
		return Envelope{}, err
	}
	st.SessionID = id
	return c.sessionEnvelope(op, st, nil, true, ""), nil
}

// finalStatus is the status of a wait that ends before the work did: read
// with a context of its own, as the caller's may be what ended.
func (c *Client) finalStatus(ctx context.Context, op, id, why string) (Envelope, error) {
	// A status is a describe and a query: seconds are plenty.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	env, err := c.status(sctx, op, id)
	if err != nil {
		if why == "aborted" {
			return c.aborted(op, id), nil
		}
		return Envelope{}, err
	}
	if env.Done {
		why = "completed"
	}
	env.WaitStatus = why
	return env, nil
}

// aborted is the answer to a wait whose caller gave up before any status.
func (c *Client) aborted(op, id string) Envelope {
	return Envelope{ContractVersion: ContractVersion, Op: op, Backend: Backend, TaskID: id, WaitStatus: "aborted"}
}

// proveDepth sets Depth to the caller's proven depth (CallerDepth).
func (req *SendRequest) proveDepth(ctx context.Context) error {
	if req.CallerDepth == nil {
		return nil
	}
	d, err := req.CallerDepth(ctx)
	if err != nil {
		return err
	}
	req.Depth = d
	return nil
}

// Send queues a follow-up prompt on a session. A session whose turn runs
// takes it as its next turn; one that waits for input or has ended is
// resumed by a delegation, so that its parent gets the result delivered.
func (c *Client) Send(ctx context.Context, req SendRequest) (Envelope, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return Envelope{}, errcode.New(errcode.InvalidInput, "prompt must not be empty")
	}
	for _, f := range req.Files {
		if err := f.Validate(); err != nil {
			return Envelope{}, errcode.Errorf(errcode.InvalidInput, "files: %s", err.Error())
		}
	}
	if req.Sticky {
		id, exists, err := c.stickySession(ctx, req)
		if err != nil {
			return Envelope{}, err
		}
		if !exists {
			if err := req.proveDepth(ctx); err != nil {
				return Envelope{}, err
			}
			return c.startSticky(ctx, req, id)
		}
		req.TaskID = id
	}
	desc, k, err := c.describe(ctx, req.TaskID)
	if err != nil {
		return Envelope{}, err
	}
	if k != kindSession {
		return Envelope{}, errcode.Errorf(errcode.InvalidInput, "%s is a delegation: send to one of its tasks (task_id)", req.TaskID)
	}
	info := desc.GetWorkflowExecutionInfo()
	if have := searchAttr(info, api.AgentKey.GetName()); req.Agent != "" && have != "" && have != req.Agent {
		return Envelope{}, errcode.Errorf(errcode.InvalidInput,
			"session %s belongs to agent %q, not %q: continue it with agent %q, or leave the session ID out to start a new %q session",
			req.TaskID, have, req.Agent, have, req.Agent)
	}
	state := searchAttr(info, api.StatusKey.GetName())
	if info.GetCloseTime() == nil && (state == string(api.StateRunning) || state == string(api.StateQueued)) {
		env, err := c.sendToRunning(ctx, req)
		if err == nil || !isClosed(err) {
			return env, err
		}
		// Its turn ended and its run closed in the meantime (version 5):
		// a delegation reopens it below.
	}
	if err := req.proveDepth(ctx); err != nil {
		return Envelope{}, err
	}
	name := memoString(info, "name")
	// The session goes on with its own profile (its tools, model and
	// prompt), not pi's defaults: the agent it was started with.
	profile := searchAttr(info, api.AgentKey.GetName())
	if profile == api.AgentName("") {
		profile = ""
	}
	start := StartRequest{
		Tasks: []api.TaskSpec{{Name: name, Prompt: req.Prompt, Files: req.Files, Resume: req.TaskID, Cwd: searchAttr(info, api.CwdKey.GetName()),
			Profile: profile}},
		ParentSessionID: req.ParentSessionID, Deliver: req.Deliver, Host: memoString(info, "host"),
		Depth: req.Depth, Knobs: req.Knobs, send: true,
	}
	if req.Sticky {
		// The subagent tool's: its rules (read-only agents unless
		// allowWrite) hold for a session it continues as for one it starts.
		start.Tool = "subagent"
	}
	env, err := c.Start(ctx, start)
	if err != nil {
		return Envelope{}, err
	}
	env.Op = "send"
	return env, nil
}

// takesSend reports whether the workflow info describes is open: it runs,
// or it is a session whose run closed with its turn and still takes a send
// that reopens it (api.SendUntilKey).
func takesSend(info *workflowpb.WorkflowExecutionInfo) bool {
	if info.GetCloseTime() == nil {
		return true
	}
	var until time.Time
	p := info.GetSearchAttributes().GetIndexedFields()[api.SendUntilKey.GetName()]
	return p != nil && converter.GetDefaultDataConverter().FromPayload(p, &until) == nil && time.Now().Before(until)
}

// sendToRunning queues req on a session whose turn runs: its next turn.
func (c *Client) sendToRunning(ctx context.Context, req SendRequest) (Envelope, error) {
	h, err := c.updateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: req.TaskID, UpdateName: api.SendUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
		Args: []any{api.SendRequest{Prompt: req.Prompt, Files: req.Files}},
	})
	var acc api.SendAccepted
	if err == nil {
		err = h.Get(ctx, &acc)
	}
	if err != nil {
		if isClosed(err) {
			return Envelope{}, err
		}
		return Envelope{}, c.temporalError(err, req.TaskID)
	}
	env, err := c.status(ctx, "send", req.TaskID)
	if err != nil {
		return Envelope{}, err
	}
	env.AcceptedTurn = acc.Turn
	return env, nil
}

func searchAttr(info *workflowpb.WorkflowExecutionInfo, name string) string {
	return payloadString(info.GetSearchAttributes().GetIndexedFields(), name)
}

// Cancel stops a session's running turn, or every running task of a
// delegation; finished work keeps its results.
func (c *Client) Cancel(ctx context.Context, id string) (Envelope, error) {
	desc, k, err := c.describe(ctx, id)
	if err != nil {
		return Envelope{}, err
	}
	var res api.CancelResult
	open := desc.GetWorkflowExecutionInfo().GetCloseTime() == nil
	if open && k == kindOneTask {
		// Its task is the session's first turn: once that has ended,
		// there is nothing of the delegation left to cancel (a later turn
		// belongs to whoever sent it).
		st, err := c.oneTaskStatus(ctx, desc)
		if err != nil {
			return Envelope{}, err
		}
		if st.Done {
			open, res.PriorStatus = false, st.State
		}
	}
	if open {
		h, err := c.updateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID: desc.GetWorkflowExecutionInfo().GetExecution().GetWorkflowId(), UpdateName: api.CancelUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
			Args: []any{api.CancelRequest{Reason: "cancelled by the caller"}},
		})
		if err == nil {
			err = h.Get(ctx, &res)
		}
		if err != nil && !isClosed(err) {
			return Envelope{}, c.temporalError(err, id)
		}
	}
	env, err := c.status(ctx, "cancel", id)
	if err != nil {
		return Envelope{}, err
	}
	if res.PriorStatus == "" {
		res.PriorStatus = api.State(env.Status)
	}
	env.CancelApplied, env.PriorStatus = &res.CancelApplied, string(res.PriorStatus)
	return env, nil
}

// isClosed reports an update that failed because its workflow had closed.
func isClosed(err error) bool {
	return isNotFound(err) || strings.Contains(err.Error(), "workflow execution already completed")
}

// Ack tells a delegation started with Deliver that its parent received the
// results, so that it completes; acknowledging a closed one is a no-op.
func (c *Client) Ack(ctx context.Context, id, by string) (Envelope, error) {
	desc, k, err := c.describe(ctx, id)
	if err != nil {
		return Envelope{}, err
	}
	if k == kindSession {
		return Envelope{}, errcode.Errorf(errcode.InvalidInput, "%s is a session: only delegations are acknowledged", id)
	}
	if desc.GetWorkflowExecutionInfo().GetCloseTime() == nil {
		var st api.DelegationStatus
		if k == kindOneTask {
			if st, err = c.oneTaskStatus(ctx, desc); err != nil {
				return Envelope{}, err
			}
		} else if err := c.query(ctx, id, true, &st); err != nil {
			return Envelope{}, err
		}
		if !st.Done {
			return Envelope{}, errcode.Errorf(errcode.SessionRunning, "%s has not finished: there is nothing to acknowledge yet", id)
		}
		// A signal, not the ack update: durable once the server has it,
		// without waiting for the delegation's next workflow task (a parent
		// pi acknowledges on its way out).
		wid := desc.GetWorkflowExecutionInfo().GetExecution().GetWorkflowId()
		if err := c.Temporal.SignalWorkflow(ctx, wid, "", api.AckSignal, api.AckRequest{By: by}); err != nil {
			if !isClosed(err) {
				return Envelope{}, c.temporalError(err, id)
			}
			return c.status(ctx, "ack", id)
		}
		st.Delivered = true
		return c.delegationEnvelope("ack", st, nil), nil
	}
	return c.status(ctx, "ack", id)
}

// listKindPlan is the list kind of plans only: a plan lists as a
// delegation (ListItem.Kind), which it is.
const listKindPlan = "plan"

// List finds delegations and sessions by their search attributes, newest
// first.
func (c *Client) List(ctx context.Context, f ListFilter) (Envelope, error) {
	q, err := listQuery(f)
	if err != nil {
		return Envelope{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		// A page of the UI: enough to find a run, small enough to read.
		limit = 100
	}
	env := Envelope{ContractVersion: ContractVersion, Op: "list", Backend: Backend, Runs: []ListItem{}}
	var token []byte
	seen := map[string]bool{}
	for len(env.Runs) < limit {
		resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: int32(min(limit, 1000))})
		if err != nil {
			return Envelope{}, c.temporalError(err, "")
		}
		for _, info := range resp.GetExecutions() {
			if len(env.Runs) == limit {
				break
			}
			it := c.listItem(info)
			if f.Kind == string(kindDelegation) && it.Kind == string(kindSession) {
				it = oneTaskItem(it, info)
			}
			if seen[it.ID] {
				// An earlier run of a session a send reopened (version 5):
				// Temporal lists the open and the latest-closed runs first,
				// and the latest is the session's.
				continue
			}
			seen[it.ID] = true
			env.Runs = append(env.Runs, it)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	env.Count = len(env.Runs)
	return env, nil
}

// listQuery builds the visibility query of f. Values go inside quotes, so
// quotes and backslashes in them are refused rather than escaped.
func listQuery(f ListFilter) (string, error) {
	var clauses []string
	switch f.Kind {
	case "":
		clauses = append(clauses, fmt.Sprintf("(WorkflowType = '%s' OR WorkflowType = '%s' OR WorkflowType = '%s')", api.SessionWorkflowName, api.DelegationWorkflowName, api.PlanWorkflowName))
	case string(kindSession):
		clauses = append(clauses, fmt.Sprintf("WorkflowType = '%s'", api.SessionWorkflowName))
	case string(kindDelegation):
		// Delegations of several tasks, and the sessions that are one-task
		// delegations; open: those not yet ended and acknowledged (a
		// session stays open after its delegation, waiting for a send).
		if f.Open {
			clauses = append(clauses, fmt.Sprintf("(WorkflowType IN ('%s', '%s') OR %s = '%s')", api.DelegationWorkflowName, api.PlanWorkflowName, api.DelegationKey.GetName(), api.DelegationOpen))
		} else {
			clauses = append(clauses, fmt.Sprintf("(WorkflowType IN ('%s', '%s') OR %s IN ('%s', '%s'))", api.DelegationWorkflowName, api.PlanWorkflowName,
				api.DelegationKey.GetName(), api.DelegationOpen, api.DelegationClosed))
		}
	case listKindPlan:
		// Plans only: they are delegations too, which --kind delegation
		// lists with the rest.
		clauses = append(clauses, fmt.Sprintf("WorkflowType = '%s'", api.PlanWorkflowName))
	default:
		return "", errcode.Errorf(errcode.InvalidInput, "kind must be session, delegation or plan, not %q", f.Kind)
	}
	if f.Status != "" {
		st, err := api.ParseState(f.Status)
		if err != nil {
			return "", errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
		clauses = append(clauses, api.StateClause(st))
	}
	for _, kv := range []struct{ attr, value string }{
		{api.AgentKey.GetName(), f.Agent},
		{api.ParentSessionKey.GetName(), f.ParentSessionID},
		{api.CwdKey.GetName(), f.Cwd},
	} {
		if kv.value == "" {
			continue
		}
		if strings.ContainsAny(kv.value, `'"\`) {
			return "", errcode.Errorf(errcode.InvalidInput, "filter %s must not hold quotes or backslashes: %q", kv.attr, kv.value)
		}
		clauses = append(clauses, fmt.Sprintf("%s = '%s'", kv.attr, kv.value))
	}
	switch {
	case f.running, f.Open && (f.Kind == string(kindDelegation) || f.Kind == listKindPlan):
		// A delegation is open while its workflow runs (until its parent
		// has its results); only a session's closed run takes a send.
		clauses = append(clauses, "ExecutionStatus = 'Running'")
	case f.Open:
		now := f.now
		if now.IsZero() {
			now = time.Now()
		}
		clauses = append(clauses, fmt.Sprintf("(ExecutionStatus = 'Running' OR %s > '%s')", api.SendUntilKey.GetName(), now.UTC().Format(time.RFC3339Nano)))
	}
	return strings.Join(clauses, " AND "), nil
}

func (c *Client) listItem(info *workflowpb.WorkflowExecutionInfo) ListItem {
	id := info.GetExecution().GetWorkflowId()
	it := ListItem{
		ID: id, Kind: string(kindSession), Name: memoString(info, "name"), Description: memoString(info, "description"),
		Delegation: memoString(info, "delegation"),
		Agent:      searchAttr(info, api.AgentKey.GetName()),
		Status:     string(api.ClosedAs(info.GetStatus(), api.State(searchAttr(info, api.StatusKey.GetName())))),
		Cwd:        searchAttr(info, api.CwdKey.GetName()), ParentSessionID: searchAttr(info, api.ParentSessionKey.GetName()),
		Open: takesSend(info), Started: info.GetStartTime().AsTime(), UIURL: c.uiLink(id),
		ExecutionStatus: strings.ToLower(strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")),
	}
	if n := info.GetType().GetName(); n == api.DelegationWorkflowName || n == api.PlanWorkflowName {
		it.Kind = string(kindDelegation)
	}
	if ct := info.GetCloseTime(); ct != nil {
		t := ct.AsTime()
		it.Closed = &t
	}
	return it
}

// oneTaskItem is a session that stands for a one-task delegation, listed
// as that delegation: its ID, and open until its delegation has ended and
// been acknowledged.
func oneTaskItem(it ListItem, info *workflowpb.WorkflowExecutionInfo) ListItem {
	it.ID, it.Kind, it.Delegation = it.Delegation, string(kindDelegation), ""
	it.Open = info.GetCloseTime() == nil && searchAttr(info, api.DelegationKey.GetName()) == api.DelegationOpen
	return it
}

// Output is a session's final text of its latest turn: capped as the tool
// results are, or the whole of it with full (read on the worker).
func (c *Client) Output(ctx context.Context, id string, full bool) (Envelope, error) {
	return c.OutputFrom(ctx, id, full, -1)
}

// OutputFrom is Output; from ≥ 0 asks for one page of the full output,
// from that character on (read on the worker), and NextFrom in the envelope
// says where the next page begins (0 after the last): an output too long
// for one answer is read whole page by page.
func (c *Client) OutputFrom(ctx context.Context, id string, full bool, from int) (Envelope, error) {
	env, st, err := c.sessionStatus(ctx, "output", id)
	if err != nil {
		return Envelope{}, err
	}
	it := &env.Items[0]
	env.Text = it.Output
	if env.Text == "" {
		env.Text = NoOutputText
	}
	if full && (it.OutputTruncated || from > 0) && st.LastTurn != nil {
		res, err := c.read(ctx, api.ReadRequest{SessionID: id, Agent: st.Agent, Cwd: st.Cwd, What: api.ReadOutput,
			Turn: st.LastTurn.Turn, Host: st.Host, Paged: from >= 0, From: max(from, 0)})
		if err != nil {
			return Envelope{}, err
		}
		if res.Found {
			env.Text, env.NextFrom = res.Text, res.Next
			it.Output, it.OutputTruncated, it.OutputReturnedChars = res.Text, res.Truncated, len([]rune(res.Text))
		}
	}
	return env, nil
}

// NoOutputText is the delegate contract's answer for a session without text.
const NoOutputText = "(no text output from sub-agent)"

// Transcript is every turn of a session, formatted as the delegate contract's
// get_subagent_session, read from the pi session file on the worker.
func (c *Client) Transcript(ctx context.Context, id string) (Envelope, error) {
	env, st, err := c.sessionStatus(ctx, "transcript", id)
	if err != nil {
		return Envelope{}, err
	}
	res, err := c.read(ctx, api.ReadRequest{SessionID: id, Agent: st.Agent, Cwd: st.Cwd, What: api.ReadTranscript, Runs: st.Runs, Host: st.Host})
	if err != nil {
		return Envelope{}, err
	}
	env.Text, env.MessageCount, env.TextTruncated = res.Text, res.MessageCount, res.Truncated
	if !res.Found || strings.TrimSpace(res.Text) == "" {
		env.Text = "(no messages yet: the sub-agent has not written its session file)"
	}
	return env, nil
}

func (c *Client) sessionStatus(ctx context.Context, op, id string) (Envelope, api.SessionStatus, error) {
	desc, k, err := c.describe(ctx, id)
	if err != nil {
		return Envelope{}, api.SessionStatus{}, err
	}
	if k != kindSession {
		return Envelope{}, api.SessionStatus{}, errcode.Errorf(errcode.InvalidInput, "%s is a delegation: pass one of its task IDs (session IDs)", id)
	}
	open := desc.GetWorkflowExecutionInfo().GetCloseTime() == nil
	var st api.SessionStatus
	if err := c.query(ctx, id, open, &st); err != nil {
		return Envelope{}, st, err
	}
	st.SessionID = id
	if st.Cwd == "" {
		st.Cwd = searchAttr(desc.GetWorkflowExecutionInfo(), api.CwdKey.GetName())
	}
	return c.sessionEnvelope(op, st, nil, open, memoString(desc.GetWorkflowExecutionInfo(), "name")), st, nil
}

// read runs the ReadSession workflow and returns what it read.
func (c *Client) read(ctx context.Context, req api.ReadRequest) (api.ReadResult, error) {
	var res api.ReadResult
	run, err := c.Temporal.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:        "read-" + req.SessionID + "-" + c.id(),
		TaskQueue: c.TaskQueue,
		// Nobody looks at a finished read again: keep it out of the way.
		TypedSearchAttributes: temporal.NewSearchAttributes(api.AgentKey.ValueSet("reader")),
	}, api.ReadSessionWorkflowName, req)
	if err != nil {
		return res, c.temporalError(err, req.SessionID)
	}
	if err := run.Get(ctx, &res); err != nil {
		return res, c.temporalError(err, req.SessionID)
	}
	return res, nil
}

// uiLink is the Temporal UI page of a workflow.
func (c *Client) uiLink(id string) string {
	if c.UIURL == "" || id == "" {
		return ""
	}
	ns := c.Namespace
	if ns == "" {
		ns = "default"
	}
	return strings.TrimRight(c.UIURL, "/") + "/namespaces/" + ns + "/workflows/" + id
}

// updateWorkflow sends an update, riding out matching's "no poller seen"
// (see retryNoPoller).
func (c *Client) updateWorkflow(ctx context.Context, opts sdkclient.UpdateWorkflowOptions) (sdkclient.WorkflowUpdateHandle, error) {
	return retryNoPoller(ctx, func() (sdkclient.WorkflowUpdateHandle, error) { return c.Temporal.UpdateWorkflow(ctx, opts) })
}

// Limits of retryNoPoller. A live worker polls its queues without pause,
// so matching sees a poll within a second of a worker (or its sticky
// queue) coming back; five seconds covers a worker's restart, and a worker
// that is really down is reported after that.
const (
	noPollerFirstDelay = 50 * time.Millisecond
	noPollerMaxDelay   = time.Second
	noPollerBudget     = 5 * time.Second
)

// retryNoPoller calls call again while Temporal answers FailedPrecondition
// "no poller seen for task queue recently": matching says so for a query or
// an update when its record of the queue's pollers has a gap, which a live
// worker's poll closes a moment later (it once ended one delegation of
// eight from inside pi with that message while the worker ran).
func retryNoPoller[T any](ctx context.Context, call func() (T, error)) (T, error) {
	deadline := time.Now().Add(noPollerBudget)
	delay := noPollerFirstDelay
	for {
		v, err := call()
		if err == nil || !isNoPoller(err) || time.Now().Add(delay).After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(delay):
		}
		delay = min(2*delay, noPollerMaxDelay)
	}
}

func isNoPoller(err error) bool {
	var fp *serviceerror.FailedPrecondition
	return errors.As(err, &fp) && strings.Contains(fp.Message, "no poller seen")
}
