package client

import (
	"context"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
)

// cancel: a session's running turn, or every running task of a
// delegation, stopped at the caller's word; finished work keeps its
// results.

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
