package client

import (
	"context"
	"strings"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// send: a follow-up prompt to a session, queued as its next turn while a
// turn runs, else run by a delegation that resumes the session.

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
