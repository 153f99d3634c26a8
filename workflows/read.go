package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
)

// ReadSession reads a session's transcript or a turn's full output on a
// worker, which holds the pi session files: a caller on another host gets
// them through Temporal instead of its own disk.
func ReadSession(ctx workflow.Context, req api.ReadRequest) (api.ReadResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// The files are on the host whose workers ran the session.
		TaskQueue: hostQueue(ctx, req.Host),
		// Reading and formatting a session file of a few MiB takes well
		// under a second; the bound catches a stuck network file system.
		StartToCloseTimeout: time.Minute,
		// Someone is waiting for the answer: a few quick retries, then an
		// error they can act on.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var res api.ReadResult
	err := workflow.ExecuteActivity(ctx, api.ReadSessionActivityName, req).Get(ctx, &res)
	return res, err
}
