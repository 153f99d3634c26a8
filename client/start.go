package client

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// start: a request's tasks made into a delegation's input (default names,
// session IDs, checks) and started, as a delegation workflow or, for one new
// task, as that task's session workflow standing for the delegation.

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
