// Package workflows holds the workflow code: delegations and the per-task
// session, their message names and payload types.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/activities"
)

// Names under which the worker registers workflows and activities. They are
// part of every recorded history: renaming one breaks running workflows.
const (
	SessionWorkflowName = "Session"
	RunPiActivityName   = "RunPi"
)

// DefaultTimeout is a task's timeout when it names none (seed 002: 600 s).
const DefaultTimeout = 600 * time.Second

// SessionInput starts a session: one subagent task.
type SessionInput struct {
	// SessionID is also the workflow ID.
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent,omitempty"`
	Prompt    string `json:"prompt"`
	Cwd       string `json:"cwd"`
	Model     string `json:"model,omitempty"`
	// TimeoutSeconds bounds one turn; 0 means DefaultTimeout.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// SessionResult is what a session's turn produced.
type SessionResult struct {
	SessionID string                 `json:"sessionId"`
	Turn      activities.RunPiResult `json:"turn"`
}

// Session runs a subagent task as one child pi turn.
func Session(ctx workflow.Context, in SessionInput) (SessionResult, error) {
	timeout := DefaultTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// The child's own timeout plus room to stop it cleanly. The timeout
		// may be extended while the child still calls tools (seed 002), by
		// up to the 300 s debounce maximum after its last call; longer
		// extensions end with this limit.
		StartToCloseTimeout: timeout + 10*time.Minute,
		// A worker that dies stops heartbeating; after this long the turn
		// is retried on another worker, which continues the session file.
		// The activity heartbeats every 2 s, so 10 s rides out a busy moment.
		HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second,
			MaximumAttempts: 3,
		},
	})
	var turn activities.RunPiResult
	err := workflow.ExecuteActivity(ctx, RunPiActivityName, activities.RunPiInput{
		SessionID:      in.SessionID,
		Agent:          in.Agent,
		Prompt:         in.Prompt,
		Cwd:            in.Cwd,
		Model:          in.Model,
		Turn:           1,
		TimeoutSeconds: in.TimeoutSeconds,
	}).Get(ctx, &turn)
	if err != nil {
		return SessionResult{}, err
	}
	return SessionResult{SessionID: in.SessionID, Turn: turn}, nil
}
