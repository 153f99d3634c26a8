package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
)

// hostQueue is HostQueue from inside a workflow running on the base queue.
func hostQueue(ctx workflow.Context, host string) string {
	return api.HostQueue(workflow.GetInfo(ctx).TaskQueueName, host)
}
