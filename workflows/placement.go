package workflows

import (
	"github.com/durable-pi/subagents/api"
	"go.temporal.io/sdk/workflow"
)

// hostQueue is HostQueue from inside a workflow running on the base queue.
func hostQueue(ctx workflow.Context, host string) string {
	return api.HostQueue(workflow.GetInfo(ctx).TaskQueueName, host)
}
