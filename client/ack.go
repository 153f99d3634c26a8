package client

import (
	"context"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// ack: the parent of a delegation started with Deliver says it has the
// results, so that the delegation completes.

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
