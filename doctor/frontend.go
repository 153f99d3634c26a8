package doctor

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/client"
)

// waitingLimit bounds the open delegations the unacknowledged check looks
// at: a page of `list`, far more than one user leaves waiting.
const waitingLimit = 1000

// temporalFrontend is the Frontend of a connected Temporal client.
type temporalFrontend struct {
	tc sdkclient.Client
	c  *client.Client
}

// NewFrontend asks Temporal through tc, on namespace, for this project's
// delegations on taskQueue.
func NewFrontend(tc sdkclient.Client, address, namespace, taskQueue string) Frontend {
	return &temporalFrontend{tc: tc, c: &client.Client{Temporal: tc, TaskQueue: taskQueue, Address: address, Namespace: namespace}}
}

func (f *temporalFrontend) DescribeNamespace(ctx context.Context, namespace string) error {
	_, err := f.tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	return err
}

func (f *temporalFrontend) SearchAttributes(ctx context.Context, namespace string) (map[string]enumspb.IndexedValueType, error) {
	resp, err := f.tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	return resp.GetCustomAttributes(), nil
}

func (f *temporalFrontend) Pollers(ctx context.Context, queue string, kind enumspb.TaskQueueType) ([]Poller, error) {
	resp, err := f.tc.DescribeTaskQueue(ctx, queue, kind)
	if err != nil {
		return nil, err
	}
	var out []Poller
	for _, p := range resp.GetPollers() {
		out = append(out, Poller{Identity: p.GetIdentity(), LastAccess: p.GetLastAccessTime().AsTime()})
	}
	return out, nil
}

// Waiting lists the open delegations started before cutoff (none started
// after it can have waited that long), and of those the ones whose work
// ended and whose parent was to acknowledge it and has not. A delegation's
// work ended at its start plus its longest task's run; the wait began then.
func (f *temporalFrontend) Waiting(ctx context.Context, cutoff time.Time) ([]Waiting, error) {
	open, err := f.c.List(ctx, client.ListFilter{Kind: "delegation", Open: true, Limit: waitingLimit})
	if err != nil {
		return nil, err
	}
	var out []Waiting
	for _, run := range open.Runs {
		if !run.Started.Before(cutoff) {
			continue
		}
		env, err := f.c.Status(ctx, run.ID)
		if err != nil {
			// Closed or gone since the list: nothing waits.
			continue
		}
		if !env.Done || !env.Deliver || env.Delivered {
			continue
		}
		var ran int64
		for _, it := range env.Items {
			ran = max(ran, it.ElapsedMS)
		}
		since := run.Started.Add(time.Duration(ran) * time.Millisecond)
		if since.Before(cutoff) {
			out = append(out, Waiting{ID: run.ID, Cwd: run.Cwd, ParentSessionID: run.ParentSessionID, Since: since})
		}
	}
	return out, nil
}
