package workflows

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

func scheduledInput(quiet bool) api.ScheduledInput {
	return api.ScheduledInput{
		ScheduleID: "nightly", Cwd: "/repo", Quiet: quiet, Version: api.ScheduledVersion,
		Delegation: &api.DelegationInput{Tasks: []api.TaskSpec{{Name: "scan", Prompt: "scan", Cwd: "/repo"}}},
	}
}

// fireRecorder fakes a fire's surroundings: the preparation, the
// delegation it starts (its end given by end) and the ScheduledResult it
// leaves, whose input it records.
type fireRecorder struct {
	mu       sync.Mutex
	started  []string
	results  []api.ScheduledResultInput
	children []api.DelegationInput
}

func (r *fireRecorder) env(t *testing.T, prepare func(context.Context, api.PrepareScheduledInput) (api.ScheduledPrepared, error),
	end func(workflow.Context, api.DelegationInput) (api.DelegationStatus, error)) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Scheduled, workflow.RegisterOptions{Name: api.ScheduledWorkflowName})
	env.RegisterActivityWithOptions(prepare, activity.RegisterOptions{Name: api.PrepareScheduledActivityName})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in api.DelegationInput) (api.DelegationStatus, error) {
		r.mu.Lock()
		r.started = append(r.started, workflow.GetInfo(ctx).WorkflowExecution.ID)
		r.children = append(r.children, in)
		r.mu.Unlock()
		return end(ctx, in)
	}, workflow.RegisterOptions{Name: api.DelegationWorkflowName})
	env.RegisterWorkflowWithOptions(func(_ workflow.Context, in api.ScheduledResultInput) (api.ClaimResult, error) {
		r.mu.Lock()
		r.results = append(r.results, in)
		r.mu.Unlock()
		return api.ClaimResult{}, nil
	}, workflow.RegisterOptions{Name: api.ScheduledResultWorkflowName})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "nightly-2026-11-26T10:25:31Z"})
	return env
}

// prepared is a preparation that names the delegation as the activity
// does.
func prepared(_ context.Context, in api.PrepareScheduledInput) (api.ScheduledPrepared, error) {
	d := *in.Scheduled.Delegation
	d.SessionIDs = []string{"s-1"}
	d.ParentSessionID = api.ScheduleParentPrefix + in.Scheduled.ScheduleID
	return api.ScheduledPrepared{Delegation: &d, ChildID: api.DelegationIDPrefix + api.FireKey(in.FireID), Name: "scan"}, nil
}

func ended(state api.State, output string, e *errcode.Info) func(workflow.Context, api.DelegationInput) (api.DelegationStatus, error) {
	return func(workflow.Context, api.DelegationInput) (api.DelegationStatus, error) {
		turn := &api.TurnResult{State: state, Result: api.RunPiResult{Output: output}, Error: e}
		return api.DelegationStatus{State: state, Done: true, Tasks: []api.TaskResult{{Name: "scan", State: state, Turn: turn, Error: e}}}, nil
	}
}

func TestScheduledFire(t *testing.T) {
	failure := errcode.NewInfo(errcode.Timeout, "Subagent timed out after 600s")
	tests := []struct {
		name    string
		quiet   bool
		prepare func(context.Context, api.PrepareScheduledInput) (api.ScheduledPrepared, error)
		end     func(workflow.Context, api.DelegationInput) (api.DelegationStatus, error)
		// want: the run's state and code, whether it leaves a result, and
		// whether a delegation started.
		state    api.State
		code     errcode.Code
		delivers bool
		runs     bool
		summary  string
	}{
		{name: "completed, delivered", prepare: prepared, end: ended(api.StateCompleted, "All clean.\nDetails follow.", nil),
			state: api.StateCompleted, delivers: true, runs: true, summary: "All clean."},
		{name: "quiet and completed: delivered to nobody", quiet: true, prepare: prepared, end: ended(api.StateCompleted, "All clean.", nil),
			state: api.StateCompleted, runs: true, summary: "All clean."},
		{name: "quiet and failed: delivered", quiet: true, prepare: prepared, end: ended(api.StateTimedOut, "", failure),
			state: api.StateTimedOut, code: errcode.Timeout, delivers: true, runs: true, summary: "Subagent timed out after 600s"},
		{name: "a preparation refused: failed, delivered, nothing started", quiet: true,
			prepare: func(context.Context, api.PrepareScheduledInput) (api.ScheduledPrepared, error) {
				return api.ScheduledPrepared{Error: errcode.NewInfo(errcode.PermissionDenied, "plan \"gated\" is the project's and it is not trusted")}, nil
			},
			state: api.StateFailed, code: errcode.PermissionDenied, delivers: true, summary: "plan \"gated\" is the project's and it is not trusted"},
		{name: "a preparation that keeps failing: failed, delivered",
			prepare: func(context.Context, api.PrepareScheduledInput) (api.ScheduledPrepared, error) {
				return api.ScheduledPrepared{}, errors.New("stale NFS handle")
			},
			state: api.StateFailed, code: errcode.Failed, delivers: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r fireRecorder
			end := tt.end
			if end == nil {
				end = ended(api.StateCompleted, "", nil)
			}
			env := r.env(t, tt.prepare, end)
			env.ExecuteWorkflow(api.ScheduledWorkflowName, scheduledInput(tt.quiet))
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("fire did not complete: %v", env.GetWorkflowError())
			}
			var res api.ScheduledRunResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.State != tt.state {
				t.Errorf("state = %s, want %s", res.State, tt.state)
			}
			if got := errcode.Code(""); res.Error != nil {
				got = res.Error.Code
				if got != tt.code {
					t.Errorf("code = %s, want %s", got, tt.code)
				}
			} else if tt.code != "" {
				t.Errorf("no error, want %s", tt.code)
			}
			if tt.summary != "" && res.Summary != tt.summary {
				t.Errorf("summary = %q, want %q", res.Summary, tt.summary)
			}
			if got := len(r.started) == 1; got != tt.runs {
				t.Errorf("delegations started: %v, want one: %v", r.started, tt.runs)
			}
			if tt.runs {
				if want := "delegation-nightly-2026-11-26T102531Z"; r.started[0] != want || res.DelegationID != want {
					t.Errorf("delegation ID = %q (result %q), want %q", r.started[0], res.DelegationID, want)
				}
				if p := r.children[0].ParentSessionID; p != "schedule:nightly" {
					t.Errorf("parent session = %q", p)
				}
			}
			if got := len(r.results) == 1; got != tt.delivers {
				t.Fatalf("results left: %v, want one: %v", r.results, tt.delivers)
			}
			if tt.delivers {
				left := r.results[0]
				if res.ResultID != "nightly-2026-11-26T10:25:31Z-result" || left.State != tt.state || left.Cwd != "/repo" || left.DelegationID != res.DelegationID {
					t.Errorf("result left = %+v (ID %q)", left, res.ResultID)
				}
			} else if res.ResultID != "" {
				t.Errorf("ResultID = %q for a run delivered to nobody", res.ResultID)
			}
		})
	}
}

// TestScheduledFireCancelled: a cancel of the fire (overlap cancel_other)
// reaches its delegation, the fire waits for it to stop, and the
// cancelled run is delivered, even from a quiet schedule.
func TestScheduledFireCancelled(t *testing.T) {
	var r fireRecorder
	env := r.env(t, prepared, func(ctx workflow.Context, _ api.DelegationInput) (api.DelegationStatus, error) {
		err := workflow.Await(ctx, func() bool { return false })
		return api.DelegationStatus{State: api.StateCancelled}, err
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(api.ScheduledWorkflowName, scheduledInput(true))
	if err := env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("fire ended with %v, want cancelled", err)
	}
	if len(r.results) != 1 || r.results[0].State != api.StateCancelled || r.results[0].Error.Code != errcode.Cancelled {
		t.Fatalf("results left = %+v, want one cancelled", r.results)
	}
}

func TestScheduledResultClaims(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ScheduledResult, workflow.RegisterOptions{Name: api.ScheduledResultWorkflowName})
	run := api.ScheduledResultInput{ScheduleID: "nightly", FireID: "f", DelegationID: "delegation-f", Cwd: "/repo", State: api.StateCompleted}
	steps := []struct {
		at      time.Duration
		req     api.ClaimRequest
		wantWon bool
		wantBy  string
	}{
		{1 * time.Second, api.ClaimRequest{By: "A", Holder: &api.ResultHolder{PID: 10}}, true, "A"},
		// Another pi at the same time: the result is A's.
		{2 * time.Second, api.ClaimRequest{By: "B", Holder: &api.ResultHolder{PID: 20}}, false, "A"},
		// A again (restarted): still its.
		{3 * time.Second, api.ClaimRequest{By: "A", Holder: &api.ResultHolder{PID: 11}}, true, "A"},
		// C replaces a claimant that no longer holds it: refused.
		{4 * time.Second, api.ClaimRequest{By: "C", Replace: "Z"}, false, "A"},
		// B found A's pi gone and replaces it; C, which found the same, comes second.
		{5 * time.Second, api.ClaimRequest{By: "B", Replace: "A", Holder: &api.ResultHolder{PID: 20}}, true, "B"},
		{6 * time.Second, api.ClaimRequest{By: "C", Replace: "A"}, false, "B"},
	}
	got := make([]*api.ClaimResult, len(steps))
	for i, s := range steps {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(api.ClaimUpdate, s.req.By+s.at.String(), &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("claim %d rejected: %v", i, err) },
				OnAccept: func() {},
				OnComplete: func(v any, err error) {
					if err != nil {
						t.Errorf("claim %d: %v", i, err)
						return
					}
					res := v.(api.ClaimResult)
					got[i] = &res
				},
			}, s.req)
		}, s.at)
	}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.ClaimUpdate, "nobody", &testsuite.TestUpdateCallback{
			OnReject: func(error) {}, OnAccept: func() { t.Error("a claim by no session was accepted") }, OnComplete: func(any, error) {},
		}, api.ClaimRequest{})
	}, 7*time.Second)
	// A, replaced, acknowledges: ignored; B's ack ends it.
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(api.AckSignal, api.AckRequest{By: "A"}) }, 8*time.Second)
	env.RegisterDelayedCallback(func() {
		var v api.ClaimResult
		q, err := env.QueryWorkflow(api.ResultQuery)
		if err != nil || q.Get(&v) != nil || v.Acked {
			t.Errorf("after A's ack: %+v, %v (want not acknowledged)", v, err)
		}
		env.SignalWorkflow(api.AckSignal, api.AckRequest{By: "B"})
	}, 9*time.Second)
	env.ExecuteWorkflow(api.ScheduledResultWorkflowName, run)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if got[i] == nil || got[i].Won != s.wantWon || got[i].ClaimedBy != s.wantBy {
			t.Errorf("claim %d by %s: %+v, want won %v, claimed by %s", i, s.req.By, got[i], s.wantWon, s.wantBy)
		}
	}
	var res api.ClaimResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !res.Acked || res.ClaimedBy != "B" || res.Run.DelegationID != "delegation-f" {
		t.Fatalf("result = %+v", res)
	}
}

// TestScheduledResultWaitsAtMostItsTTL: a result nobody claims ends with
// its TTL, unacknowledged.
func TestScheduledResultWaitsAtMostItsTTL(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ScheduledResult, workflow.RegisterOptions{Name: api.ScheduledResultWorkflowName})
	env.ExecuteWorkflow(api.ScheduledResultWorkflowName, api.ScheduledResultInput{ScheduleID: "s", FireID: "f", Cwd: "/r", State: api.StateFailed, TTLSeconds: 3600})
	var res api.ClaimResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Acked || res.ClaimedBy != "" {
		t.Fatalf("result = %+v, want unclaimed and unacknowledged", res)
	}
}

// TestReplayScheduledHistories replays the histories of a fire and of the
// result it left (recorded by e2e's TestScheduledResultsReachTheNextPiOnce
// with SUBAGENTS_RECORD_HISTORIES=1) against the current code: a change
// that would break a schedule's running fires or waiting results fails
// here. They live in a folder of their own, replayed with these workflows.
func TestReplayScheduledHistories(t *testing.T) {
	// A fire names its children after its own ID (its result's is the
	// fire's and ResultIDSuffix): replay it under it.
	replayHistories(t, filepath.Join("testdata", "histories", "scheduled", "*.json"), 2, func(events []*historypb.HistoryEvent) string {
		fire, _ := strings.CutSuffix(lastChildID(events), api.ResultIDSuffix)
		if fire == lastChildID(events) {
			return ""
		}
		return fire
	})
}

// lastChildID is the workflow ID of the last child a history starts (a
// fire's result, named after the fire).
func lastChildID(events []*historypb.HistoryEvent) string {
	id := ""
	for _, ev := range events {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			id = a.GetWorkflowId()
		}
	}
	return id
}
