package client

import (
	"context"
	"strings"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
)

// wait and follow: the workflow's wait update answers the moment the work
// ends; status polls draw progress meanwhile and take over when the update
// cannot be used.

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

func (c *Client) pollInterval() time.Duration {
	if c.PollInterval > 0 {
		return c.PollInterval
	}
	return DefaultPollInterval
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
