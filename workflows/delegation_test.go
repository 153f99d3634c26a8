package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// fakeResolver knows the profiles in known; others are UNKNOWN_AGENT.
func fakeResolver(known ...string) func(context.Context, profiles.ResolveRequest) ([]profiles.ResolvedTask, error) {
	return func(_ context.Context, req profiles.ResolveRequest) ([]profiles.ResolvedTask, error) {
		out := make([]profiles.ResolvedTask, len(req.Tasks))
		for i, t := range req.Tasks {
			ok := t.Profile == ""
			for _, k := range known {
				ok = ok || k == t.Profile
			}
			if !ok {
				msg := fmt.Sprintf("Unknown profile: %q. Available profiles: %s", t.Profile, strings.Join(known, ", "))
				out[i].Error = &errcode.Info{Code: errcode.UnknownAgent, Message: msg, Category: errcode.CategoryNotFound}
				continue
			}
			out[i].Child = api.RunPiInput{Profile: t.Profile, Model: t.Model}
		}
		return out, nil
	}
}

// concurrencyChild finalizes with the task's prompt after a delay that
// makes later tasks finish first, and records how many ran at once.
type concurrencyChild struct {
	mu      sync.Mutex
	running int
	peak    int
	depths  []int
}

func (c *concurrencyChild) run(_ context.Context, in api.RunPiInput) (api.RunPiResult, error) {
	c.mu.Lock()
	c.running++
	c.peak = max(c.peak, c.running)
	c.depths = append(c.depths, in.Depth)
	c.mu.Unlock()
	// Task "t0" sleeps longest: completion order is the reverse of input order.
	var n int
	fmt.Sscanf(in.Prompt, "t%d", &n)
	time.Sleep(time.Duration(60-n*10) * time.Millisecond)
	c.mu.Lock()
	c.running--
	c.mu.Unlock()
	return finalized("done " + in.Prompt), nil
}

func newDelegationEnv(t *testing.T, child any, known ...string) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
	env.RegisterWorkflowWithOptions(Delegation, workflow.RegisterOptions{Name: api.DelegationWorkflowName})
	env.RegisterActivityWithOptions(child, activity.RegisterOptions{Name: api.RunPiActivityName})
	env.RegisterActivityWithOptions(fakeResolver(known...), activity.RegisterOptions{Name: api.ResolveTasksActivityName})
	return env
}

func tasks(n int, profile func(i int) string) api.DelegationInput {
	in := api.DelegationInput{IdleTTLSeconds: -1}
	for i := range n {
		in.Tasks = append(in.Tasks, api.TaskSpec{Name: fmt.Sprintf("task-%d", i), Prompt: fmt.Sprintf("t%d", i), Cwd: "/repo", Profile: profile(i)})
		in.SessionIDs = append(in.SessionIDs, fmt.Sprintf("s-%d", i))
	}
	return in
}

func TestDelegationOrderIsolationAndConcurrency(t *testing.T) {
	// Version 0 resolves profiles in an activity; version 2 in a local
	// activity when any worker may run the tasks, else on the host's queue.
	for _, tc := range []struct {
		version int
		host    string
	}{{0, ""}, {api.CurrentVersion, ""}, {api.CurrentVersion, "h1"}} {
		t.Run(fmt.Sprintf("version-%d-host-%q", tc.version, tc.host), func(t *testing.T) {
			testDelegationOrder(t, tc.version, tc.host)
		})
	}
}

func testDelegationOrder(t *testing.T, version int, host string) {
	child := &concurrencyChild{}
	env := newDelegationEnv(t, child.run, "scout")
	in := tasks(5, func(i int) string {
		if i == 2 {
			return "nope"
		}
		return "scout"
	})
	in.MaxConcurrency = 2
	in.Version, in.Host = version, host
	var local, remote int
	env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { local++ })
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == api.ResolveTasksActivityName {
			remote++
		}
	})
	env.ExecuteWorkflow(api.DelegationWorkflowName, in)
	if wantLocal := version >= 2 && host == ""; (local == 1) != wantLocal || (remote == 1) == wantLocal {
		t.Fatalf("profiles resolved %d times locally and %d times as an activity (version %d, host %q)", local, remote, version, host)
	}
	var st api.DelegationStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Tasks) != 5 || !st.Done {
		t.Fatalf("status %+v", st)
	}
	for i, task := range st.Tasks {
		if task.Index != i || task.SessionID != fmt.Sprintf("s-%d", i) {
			t.Fatalf("task %d out of order: %+v", i, task)
		}
		if i == 2 {
			if task.State != api.StateFailed || task.Error.Code != errcode.UnknownAgent || task.Error.Message != `Unknown profile: "nope". Available profiles: scout` {
				t.Fatalf("unknown profile task %+v", task)
			}
			continue
		}
		if task.State != api.StateCompleted || task.Turn.Result.Output != fmt.Sprintf("done t%d", i) {
			t.Fatalf("task %d: %+v", i, task)
		}
	}
	if st.TotalCount != 5 || st.AcceptedCount != 4 || st.RejectedCount != 1 || st.BatchStatus != "partial" || st.State != api.StateFailed {
		t.Fatalf("accounting %+v", st)
	}
	if st.Usage.Turns != 4 {
		t.Fatalf("usage %+v", st.Usage)
	}
	if child.peak > 2 || child.peak == 0 {
		t.Fatalf("peak concurrency %d, limit 2", child.peak)
	}
	for _, d := range child.depths {
		if d != 1 {
			t.Fatalf("child depth %d, want 1", d)
		}
	}
}

// TestDelegationMarksEarlyTasks: the resolve request names the tasks that
// start at once (within the concurrency limit, rejected ones left out) and
// their children's depth, which a worker needs to start those children
// while the sessions start.
func TestDelegationMarksEarlyTasks(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
	env.RegisterWorkflowWithOptions(Delegation, workflow.RegisterOptions{Name: api.DelegationWorkflowName})
	env.RegisterActivityWithOptions((&concurrencyChild{}).run, activity.RegisterOptions{Name: api.RunPiActivityName})
	var got profiles.ResolveRequest
	resolve := fakeResolver("scout")
	env.RegisterActivityWithOptions(func(ctx context.Context, req profiles.ResolveRequest) ([]profiles.ResolvedTask, error) {
		got = req
		return resolve(ctx, req)
	}, activity.RegisterOptions{Name: api.ResolveTasksActivityName})
	in := tasks(5, func(int) string { return "scout" })
	in.Tasks[1].Rejected = &errcode.Info{Code: errcode.InvalidInput, Message: "tasks[1] (task-1): prompt must not be empty", Category: errcode.CategoryInvalidInput}
	in.MaxConcurrency, in.Depth, in.MaxDepth, in.Version = 2, 1, 2, api.CurrentVersion
	env.ExecuteWorkflow(api.DelegationWorkflowName, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var early []bool
	for _, task := range got.Tasks {
		early = append(early, task.Early)
	}
	if want := []bool{true, false, true, false, false}; !slices.Equal(early, want) || got.Depth != 2 {
		t.Fatalf("resolve request: early %v (want %v), depth %d (want 2)", early, want, got.Depth)
	}
}

func TestDelegationAllCompleted(t *testing.T) {
	env := newDelegationEnv(t, (&concurrencyChild{}).run)
	env.ExecuteWorkflow(api.DelegationWorkflowName, tasks(3, func(int) string { return "" }))
	var st api.DelegationStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.BatchStatus != "completed" || st.State != api.StateCompleted || st.AcceptedCount != 3 {
		t.Fatalf("status %+v", st)
	}
}

// TestDelegationRejectsItemsOnTheirOwn: the task contract's batch accounting: an
// item the caller rejected (an empty prompt) and one whose profile is
// unknown fail alone, with their errors, while the valid item runs.
func TestDelegationRejectsItemsOnTheirOwn(t *testing.T) {
	env := newDelegationEnv(t, (&concurrencyChild{}).run, "scout")
	in := tasks(3, func(i int) string { return []string{"scout", "ghost", "scout"}[i] })
	in.Tasks[2].Prompt = ""
	in.Tasks[2].Rejected = &errcode.Info{Code: errcode.InvalidInput, Message: "tasks[2] (task-2): prompt must not be empty", Category: errcode.CategoryInvalidInput}
	if err := api.ValidateDelegation(in); err != nil {
		t.Fatalf("a rejected item failed the batch: %v", err)
	}
	env.ExecuteWorkflow(api.DelegationWorkflowName, in)
	var st api.DelegationStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.AcceptedCount != 1 || st.RejectedCount != 2 || st.BatchStatus != "partial" || st.State != api.StateFailed {
		t.Fatalf("status %+v", st)
	}
	if st.Tasks[0].State != api.StateCompleted || st.Tasks[1].Error.Code != errcode.UnknownAgent || st.Tasks[2].Error.Code != errcode.InvalidInput || st.Tasks[2].Turn != nil {
		t.Fatalf("tasks %+v", st.Tasks)
	}
}

func TestValidateDelegation(t *testing.T) {
	ok := tasks(1, func(int) string { return "" })
	many := tasks(17, func(int) string { return "" })
	tests := []struct {
		name   string
		mutate func(*api.DelegationInput)
		code   errcode.Code
		want   string
	}{
		{"valid", func(*api.DelegationInput) {}, "", ""},
		{"no tasks", func(in *api.DelegationInput) { in.Tasks, in.SessionIDs = nil, nil }, errcode.InvalidInput, "1 to 16 tasks"},
		{"17 tasks", func(in *api.DelegationInput) { *in = many }, errcode.InvalidInput, "got 17"},
		{"depth", func(in *api.DelegationInput) { in.Depth = 2 }, errcode.DepthExceeded, "cannot delegate further"},
		{"relative cwd", func(in *api.DelegationInput) { in.Tasks[0].Cwd = "repo" }, errcode.InvalidInput, "cwd must be an absolute path"},
		{"dotdot cwd", func(in *api.DelegationInput) { in.Tasks[0].Cwd = "/a/../b" }, errcode.InvalidInput, "cwd must not contain '..' path segments"},
		{"empty prompt", func(in *api.DelegationInput) { in.Tasks[0].Prompt = " " }, errcode.InvalidInput, "prompt must not be empty"},
		{"empty name", func(in *api.DelegationInput) { in.Tasks[0].Name = "" }, errcode.InvalidInput, "name must not be empty"},
		{"ids", func(in *api.DelegationInput) { in.SessionIDs = nil }, errcode.InvalidInput, "one session ID per task"},
		{"concurrency", func(in *api.DelegationInput) { in.MaxConcurrency = 17 }, errcode.InvalidInput, "maxConcurrency must be 1 to 16"},
		{"agent vs profile", func(in *api.DelegationInput) { in.Tasks[0].Agent, in.Tasks[0].Profile = "a", "b" }, errcode.InvalidInput, "disagree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ok
			in.Tasks = append([]api.TaskSpec(nil), ok.Tasks...)
			tt.mutate(&in)
			err := api.ValidateDelegation(in)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errcode.Is(err, tt.code) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %s %q", err, tt.code, tt.want)
			}
		})
	}
}

func TestDelegationResumeValidation(t *testing.T) {
	tests := []struct {
		name   string
		lookup api.SessionLookup
		code   errcode.Code
		msg    string
	}{
		{"not found", api.SessionLookup{SessionID: "a1b2c3d4e5f6a7b8"}, errcode.SessionNotFound,
			`Cannot resume: session "a1b2c3d4e5f6a7b8" not found. The session may have expired or the ID is incorrect.`},
		{"running", api.SessionLookup{SessionID: "a1b2c3d4e5f6a7b8", Found: true, Open: true, State: "running"}, errcode.SessionRunning,
			`Cannot resume: session "a1b2c3d4e5f6a7b8" is still running. Wait for it to complete before resuming.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := &fakeChild{results: []api.RunPiResult{finalized("never")}}
			env := newDelegationEnv(t, child.run)
			env.RegisterActivityWithOptions(func(context.Context, []string) ([]api.SessionLookup, error) {
				return []api.SessionLookup{tt.lookup}, nil
			}, activity.RegisterOptions{Name: api.LookupSessionsActivityName})
			in := tasks(2, func(int) string { return "" })
			in.Tasks[1].Resume = "a1b2c3d4e5f6a7b8"
			env.ExecuteWorkflow(api.DelegationWorkflowName, in)
			var app *temporal.ApplicationError
			err := env.GetWorkflowError()
			if !errors.As(err, &app) || app.Type() != string(tt.code) || app.Message() != tt.msg {
				t.Fatalf("err = %v, want %s %q", err, tt.code, tt.msg)
			}
			if len(child.prompts) != 0 {
				t.Fatal("a task ran although the call failed")
			}
		})
	}
}

func TestDelegationWaitsForDeliveryAck(t *testing.T) {
	tests := []struct {
		name      string
		ack       bool
		signal    bool // AckSignal instead of AckUpdate
		delivered bool
	}{
		{name: "the parent acknowledges", ack: true, delivered: true},
		{name: "the parent acknowledges with the signal", ack: true, signal: true, delivered: true},
		{name: "nobody acknowledges: the TTL completes it undelivered", ack: false, delivered: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newDelegationEnv(t, (&concurrencyChild{}).run, "scout")
			in := tasks(1, func(int) string { return "scout" })
			in.Deliver, in.AckTTLSeconds, in.ParentSessionID = true, 3600, "parent-1"
			var early, acked error
			var ackStatus api.DelegationStatus
			env.RegisterDelayedCallback(func() {
				// Nothing to acknowledge while the task runs: the signal is
				// ignored, the update refused.
				if tc.signal {
					env.SignalWorkflow(api.AckSignal, api.AckRequest{By: "parent-1"})
				}
				env.UpdateWorkflow(api.AckUpdate, "early", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { early = err },
					OnAccept: func() {}, OnComplete: func(any, error) {},
				}, api.AckRequest{})
			}, 0)
			var openAfterDone bool
			env.RegisterDelayedCallback(func() {
				openAfterDone = !env.IsWorkflowCompleted()
				if !tc.ack {
					return
				}
				if tc.signal {
					env.SignalWorkflow(api.AckSignal, api.AckRequest{By: "parent-1"})
					ackStatus.Delivered = true
					return
				}
				env.UpdateWorkflow(api.AckUpdate, "ack", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { acked = err },
					OnAccept: func() {},
					OnComplete: func(v any, err error) {
						acked = err
						if st, ok := v.(api.DelegationStatus); ok {
							ackStatus = st
						}
					},
				}, api.AckRequest{By: "parent-1"})
			}, time.Minute)
			env.ExecuteWorkflow(api.DelegationWorkflowName, in)
			var st api.DelegationStatus
			if err := env.GetWorkflowResult(&st); err != nil {
				t.Fatal(err)
			}
			if early == nil || !strings.Contains(early.Error(), "nothing to acknowledge") {
				t.Fatalf("an ack before the end = %v, want a rejection", early)
			}
			if !openAfterDone {
				t.Fatal("the delegation completed before its parent acknowledged")
			}
			if acked != nil || st.Delivered != tc.delivered || !st.Deliver || st.State != api.StateCompleted || st.ParentSessionID != "parent-1" {
				t.Fatalf("ack err %v, result %+v", acked, st)
			}
			if tc.ack && !ackStatus.Delivered {
				t.Fatalf("the ack answered %+v", ackStatus)
			}
		})
	}
}

// TestResumeTargetBusy: an open resume target is busy while a turn runs or
// waits to; between turns a session of version 4 records how its last turn
// ended, one of an earlier version waiting_for_input.
func TestResumeTargetBusy(t *testing.T) {
	tests := []struct {
		version int
		state   api.State
		want    bool
	}{
		{4, api.StateRunning, true},
		{4, api.StateQueued, true},
		{4, api.StateCompleted, false},
		{4, api.StateFailed, false},
		{4, api.StateWaitingForInput, false},
		{3, api.StateWaitingForInput, false},
		{3, api.StateRunning, true},
		{3, api.StateCompleted, true},
	}
	for _, tc := range tests {
		d := &delegation{in: api.DelegationInput{Version: tc.version}}
		if got := d.busy(tc.state); got != tc.want {
			t.Errorf("version %d, %s: busy %v, want %v", tc.version, tc.state, got, tc.want)
		}
	}
}
