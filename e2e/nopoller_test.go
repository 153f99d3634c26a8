package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
)

// noPollerWait is how long the test's queue has no worker: beyond the
// SDK's 10 s timeout of a query, which Temporal's matching answers, a second
// before it, with FailedPrecondition "no poller seen for task queue
// recently, worker may be down" when no worker polled the queue within
// matching.queryPollerUnavailableWindow (20 s; never, here).
const noPollerWait = 11 * time.Second

// TestFollowRidesOutNoPoller reproduces a tool call from inside pi that
// ended with "no poller seen for task queue recently" instead of the
// child's answer: the progress of a wait (`wait --progress`, what the
// extension follows) is drawn from a status query, and matching refused
// that query. Here no worker polls the delegation's queue when the wait
// begins, and one comes after the query has been refused: the wait goes on
// and ends with the result.
func TestFollowRidesOutNoPoller(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("late", finalizeStep("late but fine"))
	c := &client.Client{Temporal: shared.client, TaskQueue: e.taskQueue, Address: shared.server.FrontendAddress()}
	ctx, cancel := context.WithTimeout(context.Background(), noPollerWait+testTimeout)
	defer cancel()
	started, err := c.Start(ctx, client.StartRequest{Tasks: []api.TaskSpec{{Name: "late", Prompt: "[[script:late]] hi", Cwd: e.workDir}}, IdleTTLSeconds: -1})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		env client.Envelope
		err error
	}
	ended := make(chan answer, 1)
	go func() {
		env, err := c.Follow(ctx, started.DelegationID, 0, func(client.Envelope) {})
		ended <- answer{env, err}
	}()
	time.Sleep(noPollerWait)
	e.startWorker(shared.client)
	a := <-ended
	if a.err != nil {
		t.Fatalf("the wait ended with %v", a.err)
	}
	if !a.env.Done || len(a.env.Items) != 1 || !strings.Contains(a.env.Items[0].Output, "late but fine") {
		t.Fatalf("the wait ended with %+v", a.env)
	}
}
