package workflows

import (
	"strings"

	"go.temporal.io/sdk/workflow"
)

// HostQueue is the task queue of the workers on host: where the steps that
// need a task's cwd or its session files run (RunPi, ResolveTasks,
// ReadSession). Workflows and cwd-independent steps stay on the shared base
// queue. An empty host means any worker: the base queue itself.
func HostQueue(base, host string) string {
	if host == "" {
		return base
	}
	return base + "@" + host
}

// ValidHost reports whether host can be part of a task queue name.
func ValidHost(host string) bool {
	return host == "" || len(host) <= 200 && !strings.ContainsAny(host, "@ \t\n/")
}

// hostQueue is HostQueue from inside a workflow running on the base queue.
func hostQueue(ctx workflow.Context, host string) string {
	return HostQueue(workflow.GetInfo(ctx).TaskQueueName, host)
}
