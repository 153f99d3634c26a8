package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// What Temporal's errors mean to the client: the error codes of its
// answers (temporalError), a workflow missing or closed, and matching's
// passing "no poller seen" ridden out (retryNoPoller).

func isNotFound(err error) bool {
	var notFound *serviceerror.NotFound
	return errors.As(err, &notFound)
}

// isClosed reports an update that failed because its workflow had closed.
func isClosed(err error) bool {
	return isNotFound(err) || strings.Contains(err.Error(), "workflow execution already completed")
}

// temporalError gives a Temporal error its code.
func (c *Client) temporalError(err error, id string) error {
	var notFound *serviceerror.NotFound
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var denied *serviceerror.PermissionDenied
	var coded *errcode.Error
	switch {
	case errors.As(err, &coded):
		return err
	case errors.As(err, &notFound):
		return errcode.Wrap(errcode.SessionNotFound, err, fmt.Sprintf("Session %q not found. The session may have expired or the ID is incorrect.", id))
	case errors.As(err, &unavailable), errors.As(err, &deadline), errors.Is(err, context.DeadlineExceeded):
		return connection.Unavailable(c.Address, err)
	case errors.As(err, &denied):
		return errcode.Wrap(errcode.PermissionDenied, err, fmt.Sprintf("Temporal at %s refused the call: %s", c.Address, denied.Message))
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		code, known := errcode.Parse(app.Type())
		if !known {
			code = errcode.Failed
		}
		return errcode.Wrap(code, err, app.Message())
	}
	return errcode.Wrap(errcode.Failed, err, err.Error())
}

// updateWorkflow sends an update, riding out matching's "no poller seen"
// (see retryNoPoller).
func (c *Client) updateWorkflow(ctx context.Context, opts sdkclient.UpdateWorkflowOptions) (sdkclient.WorkflowUpdateHandle, error) {
	return retryNoPoller(ctx, func() (sdkclient.WorkflowUpdateHandle, error) { return c.Temporal.UpdateWorkflow(ctx, opts) })
}

// Limits of retryNoPoller. A live worker polls its queues without pause,
// so matching sees a poll within a second of a worker (or its sticky
// queue) coming back; five seconds covers a worker's restart, and a worker
// that is really down is reported after that.
const (
	noPollerFirstDelay = 50 * time.Millisecond
	noPollerMaxDelay   = time.Second
	noPollerBudget     = 5 * time.Second
)

// retryNoPoller calls call again while Temporal answers FailedPrecondition
// "no poller seen for task queue recently": matching says so for a query or
// an update when its record of the queue's pollers has a gap, which a live
// worker's poll closes a moment later (it once ended one delegation of
// eight from inside pi with that message while the worker ran).
func retryNoPoller[T any](ctx context.Context, call func() (T, error)) (T, error) {
	deadline := time.Now().Add(noPollerBudget)
	delay := noPollerFirstDelay
	for {
		v, err := call()
		if err == nil || !isNoPoller(err) || time.Now().Add(delay).After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(delay):
		}
		delay = min(2*delay, noPollerMaxDelay)
	}
}

func isNoPoller(err error) bool {
	var fp *serviceerror.FailedPrecondition
	return errors.As(err, &fp) && strings.Contains(fp.Message, "no poller seen")
}
