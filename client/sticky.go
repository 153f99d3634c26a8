package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// The `subagent` tool's sticky sessions (the sessions contract): a session
// is named by its folder, its agent and an ID the caller may choose. The
// same ID with the same agent in the same folder continues that session;
// an ID nobody used yet starts it; the same ID with another agent or in
// another folder is another session. A session's workflow ID is its ID
// where that ID is free or already names this session, else the ID with
// a suffix made of the folder and agent (stickyWorkflowID).

// stickyIDRoom leaves room in a workflow ID (api.NameRule's 128
// characters) for stickyWorkflowID's suffix: "-" and 12 hex digits.
const stickyIDRoom = 128 - 13

// stickyWorkflowID is the workflow ID of session id of agent in cwd when
// id itself names another session: the same for every call with the same
// three, distinct for another agent or folder (48 bits of a SHA-256).
func stickyWorkflowID(id, agent, cwd string) string {
	sum := sha256.Sum256([]byte(cwd + "\x00" + agent))
	if len(id) > stickyIDRoom {
		id = id[:stickyIDRoom]
	}
	return id + "-" + hex.EncodeToString(sum[:6])
}

// stickySession finds the session of req's folder, agent and ID: its
// workflow ID, and whether it exists yet.
func (c *Client) stickySession(ctx context.Context, req SendRequest) (string, bool, error) {
	if err := api.ValidateName("session ID", req.TaskID); err != nil {
		return "", false, err
	}
	if strings.HasPrefix(req.TaskID, api.DelegationIDPrefix) {
		// That names a one-task delegation (its session's workflow): a
		// session of that ID could never be addressed as a session.
		return "", false, errcode.Errorf(errcode.InvalidInput, "session ID %q names a delegation, not a session: pass the task's session ID (task_id), or choose an ID that does not start with %q", req.TaskID, api.DelegationIDPrefix)
	}
	if req.Cwd == "" || req.Agent == "" {
		return "", false, errcode.New(errcode.InvalidInput, "a sticky session needs its agent and folder (cwd)")
	}
	agent := api.AgentName(req.Agent)
	for _, id := range []string{req.TaskID, stickyWorkflowID(req.TaskID, agent, req.Cwd)} {
		desc, err := c.describeAppearing(ctx, id)
		if isNotFound(err) {
			return id, false, nil
		}
		if err != nil {
			return "", false, c.temporalError(err, id)
		}
		info := desc.GetWorkflowExecutionInfo()
		if info.GetType().GetName() == api.SessionWorkflowName &&
			searchAttr(info, api.AgentKey.GetName()) == agent && searchAttr(info, api.CwdKey.GetName()) == req.Cwd {
			return id, true, nil
		}
	}
	// Both names are taken by other sessions: only a hash collision of
	// two folders and agents, or a hand-made workflow, gets here.
	return "", false, errcode.Errorf(errcode.InvalidInput, "session ID %q is taken by another session: continue it with its own agent and folder, or choose another ID", req.TaskID)
}

// startSticky starts the sticky session req names, which does not exist
// yet, as a one-task delegation under workflow ID id.
func (c *Client) startSticky(ctx context.Context, req SendRequest, id string) (Envelope, error) {
	start := StartRequest{
		Tasks:           []api.TaskSpec{{Name: req.Agent, Prompt: req.Prompt, Files: req.Files, Profile: req.Agent, Cwd: req.Cwd}},
		ParentSessionID: req.ParentSessionID, Deliver: req.Deliver, Tool: "subagent", Depth: req.Depth, Knobs: req.Knobs,
	}
	in, err := c.delegationInput(start)
	if err != nil {
		return Envelope{}, err
	}
	in.SessionIDs[0] = id
	env, err := c.startDelegation(ctx, in)
	if err != nil {
		return Envelope{}, err
	}
	env.Op = "send"
	return env, nil
}
