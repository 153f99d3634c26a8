package client

import (
	"cmp"
	"context"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// status: a delegation's or a session's state now, from its workflow's
// status query (or its result, once closed), with the last heartbeat of
// each running child (liveSession).

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
