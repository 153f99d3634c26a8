package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// fakeChild stands in for RunPi in workflow unit tests: it answers each run
// with the next scripted result and records the prompts it was given.
type fakeChild struct {
	results []api.RunPiResult
	prompts []string
	inputs  []api.RunPiInput
}

func (f *fakeChild) run(_ context.Context, in api.RunPiInput) (api.RunPiResult, error) {
	f.prompts = append(f.prompts, in.Prompt)
	f.inputs = append(f.inputs, in)
	if len(f.results) == 0 {
		return api.RunPiResult{}, temporal.NewNonRetryableApplicationError("no scripted result left", "TEST", nil)
	}
	r := f.results[0]
	f.results = f.results[1:]
	return r, nil
}

func newTestEnv(t *testing.T, child any) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
	env.RegisterActivityWithOptions(child, activity.RegisterOptions{Name: api.RunPiActivityName})
	return env
}

// untilCancelled is a child run that works until its cancel reaches it
// through its heartbeats, as with the real RunPi, and ends cancelled with
// partial.
func untilCancelled(partial api.RunPiResult) func(context.Context, api.RunPiInput) (api.RunPiResult, error) {
	return func(ctx context.Context, _ api.RunPiInput) (api.RunPiResult, error) {
		for ctx.Err() == nil {
			activity.RecordHeartbeat(ctx)
			time.Sleep(10 * time.Millisecond)
		}
		return partial, temporal.NewCanceledError(partial)
	}
}

func usage(in int64) api.Usage { return api.Usage{Input: in, Output: 1, Turns: 1} }

func finalized(result string) api.RunPiResult {
	return api.RunPiResult{Finalize: &api.Finalize{Status: "SUCCESS", Result: result}, Output: result, Usage: usage(10)}
}

func oneTurn(prompt string) api.SessionInput {
	return api.SessionInput{SessionID: "s-1", Agent: "scout", Cwd: "/repo", Prompt: prompt, IdleTTLSeconds: -1}
}

func TestSessionFinalizeRetries(t *testing.T) {
	textOnly := api.RunPiResult{Output: "I think it's 42.", Usage: usage(5)}
	rejected := api.RunPiResult{Output: "", Usage: usage(6), ToolRows: []api.ToolRow{
		{Name: api.FinalizeToolName, Status: "error", Error: `subagent_finalize: status "SUCCESS" requires a non-empty "result".`},
	}}
	two := 2
	zero := 0
	tests := []struct {
		name       string
		results    []api.RunPiResult
		retries    *int
		noFinalize bool
		state      api.State
		code       errcode.Code
		attempts   int
		output     string
		feedback   []string // what each corrective prompt must say
	}{
		{"finalized at once", []api.RunPiResult{finalized("42")}, nil, false, api.StateCompleted, "", 1, "42", nil},
		{"missing finalize then fixed", []api.RunPiResult{textOnly, finalized("42")}, nil, false, api.StateCompleted, "", 2, "42",
			[]string{"You ended without calling subagent_finalize"}},
		{"rejected finalize quotes the reason", []api.RunPiResult{rejected, finalized("42")}, nil, false, api.StateCompleted, "", 2, "42",
			[]string{`Your subagent_finalize call was rejected: subagent_finalize: status "SUCCESS" requires a non-empty "result".`}},
		{"retries exhausted", []api.RunPiResult{textOnly, textOnly, textOnly}, &two, false, api.StateFailed, errcode.FinalizeMissing, 3, "I think it's 42.",
			[]string{"You ended without", "You ended without"}},
		{"no retries", []api.RunPiResult{textOnly}, &zero, false, api.StateFailed, errcode.FinalizeMissing, 1, "I think it's 42.", nil},
		{"finalize false takes the text", []api.RunPiResult{textOnly}, nil, true, api.StateCompleted, "", 1, "I think it's 42.", nil},
		{"finalize ERROR fails the turn", []api.RunPiResult{{Finalize: &api.Finalize{Status: "ERROR", Error: "repo missing"}, Output: "repo missing"}},
			nil, false, api.StateFailed, errcode.Failed, 1, "repo missing", nil},
		{"timeout", []api.RunPiResult{{Error: &errcode.Info{Code: errcode.Timeout, Message: "Timed out after 600s. Consider resuming with a longer timeout."}}},
			nil, false, api.StateTimedOut, errcode.Timeout, 1, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := &fakeChild{results: tt.results}
			env := newTestEnv(t, child.run)
			in := oneTurn("Find the answer.")
			in.MaxFinalizeRetries, in.Child.NoFinalize = tt.retries, tt.noFinalize
			env.ExecuteWorkflow(api.SessionWorkflowName, in)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res api.SessionResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			turn := res.LastTurn
			if res.State != tt.state || turn.State != tt.state || turn.ChildRuns != tt.attempts || turn.Result.Output != tt.output {
				t.Fatalf("state %s/%s attempts %d output %q", res.State, turn.State, turn.ChildRuns, turn.Result.Output)
			}
			if (turn.Error == nil && tt.code != "") || (turn.Error != nil && turn.Error.Code != tt.code) {
				t.Fatalf("error %+v, want %q", turn.Error, tt.code)
			}
			if child.prompts[0] != "Find the answer." || len(child.prompts) != tt.attempts {
				t.Fatalf("prompts %q", child.prompts)
			}
			for i, want := range tt.feedback {
				if !strings.Contains(child.prompts[i+1], want) {
					t.Fatalf("feedback %d = %q, want it to say %q", i+1, child.prompts[i+1], want)
				}
			}
			// Every attempt runs on the same session and counts once.
			var sum api.Usage
			for _, r := range tt.results[:tt.attempts] {
				sum = sum.Add(r.Usage)
			}
			if res.Usage != sum || turn.Usage != sum {
				t.Fatalf("usage %+v, want %+v", res.Usage, sum)
			}
			for _, in := range child.inputs {
				if in.SessionID != "s-1" || in.Turn != 1 || in.Cwd != "/repo" || in.Agent != "scout" {
					t.Fatalf("child input %+v", in)
				}
			}
		})
	}
}

// TestSessionSticky: after its first turn the session waits; a send runs a
// second turn on the same session; wait returns when it ends; the idle TTL
// completes the session.
func TestSessionSticky(t *testing.T) {
	child := &fakeChild{results: []api.RunPiResult{finalized("first"), finalized("second"), finalized("third")}}
	env := newTestEnv(t, child.run)
	in := oneTurn("Turn one.")
	in.IdleTTLSeconds = 3600

	env.RegisterDelayedCallback(func() {
		st := queryStatus(t, env)
		// A session of version 0 records waiting_for_input; status reports
		// how the turn ended, as later versions record it.
		if st.State != api.StateCompleted || st.Turn != 1 || st.LastTurn.Result.Output != "first" {
			t.Errorf("after turn 1: %+v", st)
		}
		env.SignalWorkflow(api.SendSignal, api.SendRequest{Prompt: "Turn two."})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.SendUpdate, "send-3", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("send rejected: %v", err) },
			OnComplete: func(v any, err error) {
				if acc, ok := v.(api.SendAccepted); !ok || err != nil || acc.Turn != 3 {
					t.Errorf("send accepted %v %v", v, err)
				}
			},
		}, api.SendRequest{Prompt: "Turn three."})
		env.UpdateWorkflow(api.SendUpdate, "send-empty", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) {},
			OnComplete: func(v any, err error) { t.Errorf("an empty prompt was accepted") },
		}, api.SendRequest{Prompt: "  "})
		env.UpdateWorkflow(api.WaitUpdate, "wait-3", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("wait rejected: %v", err) },
			OnComplete: func(v any, err error) {
				st, ok := v.(api.SessionStatus)
				if !ok || err != nil || st.Turn != 3 || st.LastTurn.Result.Output != "third" {
					t.Errorf("wait returned %+v %v", v, err)
				}
			},
		}, api.WaitRequest{})
	}, 2*time.Minute)

	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	var res api.SessionResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Turns != 3 || res.State != api.StateCompleted || res.LastTurn.Result.Output != "third" || res.Usage.Turns != 3 {
		t.Fatalf("result %+v", res)
	}
	if strings.Join(child.prompts, "|") != "Turn one.|Turn two.|Turn three." {
		t.Fatalf("prompts %q", child.prompts)
	}
	for i, in := range child.inputs {
		if in.Turn != i+1 || in.SessionID != "s-1" {
			t.Fatalf("turn %d input %+v", i+1, in)
		}
	}
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) api.SessionStatus {
	t.Helper()
	v, err := env.QueryWorkflow(api.StatusQuery)
	if err != nil {
		t.Fatal(err)
	}
	var st api.SessionStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSessionCancelSignal cancels the running turn: the turn is cancelled
// with the child's partial output, and the session stays addressable.
func TestSessionCancelSignal(t *testing.T) {
	env := newTestEnv(t, untilCancelled(api.RunPiResult{Output: "half done", Usage: usage(7)}))
	env.SetTestTimeout(30 * time.Second)
	in := oneTurn("Long task.")
	in.IdleTTLSeconds = 60
	env.RegisterDelayedCallback(func() {
		if st := queryStatus(t, env); st.State != api.StateRunning || st.ChildRun != 1 {
			t.Errorf("before cancel: %+v", st)
		}
		env.SignalWorkflow(api.CancelSignal, api.CancelRequest{Reason: "test"})
	}, time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	var res api.SessionResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	// The test environment drops a cancelled activity's details; the
	// partial output reaching the result is checked end to end (e2e).
	turn := res.LastTurn
	if turn.State != api.StateCancelled || turn.Error.Code != errcode.Cancelled || res.State != api.StateCancelled {
		t.Fatalf("turn %+v", turn)
	}
}

// TestSessionContinuesAsNew: a long sticky session continues as new and
// carries its turn count, usage and last turn.
func TestSessionContinuesAsNew(t *testing.T) {
	child := &fakeChild{}
	for range maxTurnsPerRun {
		child.results = append(child.results, finalized("ok"))
	}
	env := newTestEnv(t, child.run)
	in := oneTurn("Turn 1.")
	in.IdleTTLSeconds = 3600
	env.RegisterDelayedCallback(func() {
		for i := 2; i <= maxTurnsPerRun; i++ {
			env.SignalWorkflow(api.SendSignal, api.SendRequest{Prompt: "next"})
		}
	}, time.Minute)
	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !asContinueAsNew(err, &can) {
		t.Fatalf("err = %v, want continue-as-new", err)
	}
	var next api.SessionInput
	if err := converterFromPayloads(can, &next); err != nil {
		t.Fatal(err)
	}
	c := next.Carry
	if c == nil || c.Ended != maxTurnsPerRun || c.Usage.Turns != maxTurnsPerRun || c.LastTurn.Result.Output != "ok" || next.Prompt != "" {
		t.Fatalf("carry %+v prompt %q", c, next.Prompt)
	}
	if next.SessionID != "s-1" || next.Cwd != "/repo" {
		t.Fatalf("next input %+v", next)
	}
}

func asContinueAsNew(err error, target **workflow.ContinueAsNewError) bool {
	return errors.As(err, target)
}

func converterFromPayloads(can *workflow.ContinueAsNewError, v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(can.Input, v)
}

// TestSessionCancelUpdate: cancel says whether it stopped something, and
// what the session was doing before.
func TestSessionCancelUpdate(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	env.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
	calls := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in api.RunPiInput) (api.RunPiResult, error) {
		calls++
		if calls == 1 {
			return finalized("first"), nil
		}
		for ctx.Err() == nil {
			activity.RecordHeartbeat(ctx)
			time.Sleep(10 * time.Millisecond)
		}
		return api.RunPiResult{}, temporal.NewCanceledError()
	}, activity.RegisterOptions{Name: api.RunPiActivityName})
	in := oneTurn("one")
	in.IdleTTLSeconds = 600
	var results []api.CancelResult
	cancel := func(id string) {
		env.UpdateWorkflow(api.CancelUpdate, id, &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("cancel rejected: %v", err) },
			OnComplete: func(v any, err error) { results = append(results, v.(api.CancelResult)) },
		}, api.CancelRequest{})
	}
	env.RegisterDelayedCallback(func() {
		if st := queryStatus(t, env); st.TimeoutSeconds != 600 || st.TurnStarted.IsZero() {
			t.Errorf("status %+v", st)
		}
		cancel("idle")
		env.SignalWorkflow(api.SendSignal, api.SendRequest{Prompt: "two"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { cancel("running") }, time.Minute+time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := []api.CancelResult{{CancelApplied: false, PriorStatus: api.StateWaitingForInput}, {CancelApplied: true, PriorStatus: api.StateRunning}}
	if len(results) != 2 || results[0] != want[0] || results[1] != want[1] {
		t.Fatalf("cancel results %+v, want %+v", results, want)
	}
}

// oneTaskDelegation is a session that stands for a one-task delegation of
// profile, as the client starts it.
func oneTaskDelegation(profile string) api.SessionInput {
	in := oneTurn("t1")
	in.Agent, in.Version, in.ParentSessionID = profile, api.CurrentVersion, "parent-1"
	in.Delegation = &api.DelegationRole{ID: api.OneTaskDelegationID(in.SessionID), Task: api.TaskSpec{Name: "task", Profile: profile, Model: "m/x"}}
	return in
}

// TestSessionAsOneTaskDelegation: a session that stands for its one-task
// delegation resolves its profile, reports its first turn as the
// delegation's task (a later turn does not change it), refuses a task
// whose profile is unknown without a child, and with Deliver completes only
// once its parent acknowledges (or the ack TTL passes).
func TestSessionAsOneTaskDelegation(t *testing.T) {
	tests := []struct {
		name      string
		profile   string
		deliver   bool
		ack       string // "update", "signal" or none
		send      bool   // a second turn follows the first
		state     api.State
		code      errcode.Code
		rejected  int
		children  int
		delivered bool
	}{
		{name: "completes with its turn", profile: "scout", state: api.StateCompleted, children: 1},
		{name: "unknown profile: refused without a child", profile: "nobody", state: api.StateFailed, code: errcode.UnknownAgent, rejected: 1},
		{name: "deliver: the parent acknowledges", profile: "scout", deliver: true, ack: "update", state: api.StateCompleted, children: 1, delivered: true},
		{name: "deliver: the ack signal", profile: "scout", deliver: true, ack: "signal", state: api.StateCompleted, children: 1, delivered: true},
		{name: "deliver: nobody acknowledges, the TTL ends it", profile: "scout", deliver: true, state: api.StateCompleted, children: 1},
		// Version 4's model, where the session stays open for its next
		// turn (TestReopenedSessionKeepsItsDelegation is version 5's).
		{name: "a later turn is not the delegation's", profile: "scout", send: true, state: api.StateCompleted, children: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			child := &fakeChild{results: []api.RunPiResult{finalized("first"), finalized("second")}}
			env := newDelegationEnv(t, child.run, "scout")
			in := oneTaskDelegation(tc.profile)
			in.Delegation.Deliver, in.Delegation.AckTTLSeconds, in.Delegation.Depth = tc.deliver, 3600, 0
			if tc.send {
				in.IdleTTLSeconds, in.Version = 600, 4
			}
			var early error
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(api.AckUpdate, "early", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { early = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
				}, api.AckRequest{})
			}, 0)
			var during api.DelegationStatus
			var openAfterTurn bool
			env.RegisterDelayedCallback(func() {
				during, openAfterTurn = queryStatus(t, env).AsDelegation(), !env.IsWorkflowCompleted()
				switch {
				case tc.send:
					env.SignalWorkflow(api.SendSignal, api.SendRequest{Prompt: "t2"})
				case tc.ack == "signal":
					env.SignalWorkflow(api.AckSignal, api.AckRequest{By: "parent-1"})
				case tc.ack == "update":
					env.UpdateWorkflow(api.AckUpdate, "ack", &testsuite.TestUpdateCallback{
						OnReject: func(err error) { t.Errorf("ack refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
					}, api.AckRequest{By: "parent-1"})
				}
			}, time.Minute)
			env.ExecuteWorkflow(api.SessionWorkflowName, in)
			res, _ := closedResult(t, env)
			if early == nil || !strings.Contains(early.Error(), "nothing to acknowledge") {
				t.Fatalf("an ack before the turn ended = %v, want a rejection", early)
			}
			if tc.deliver && !openAfterTurn {
				t.Fatal("completed before its parent acknowledged")
			}
			st := api.SessionStatus{SessionID: res.SessionID, State: res.State, Delegation: res.Delegation}.AsDelegation()
			task := st.Tasks[0]
			if st.DelegationID != "delegation-s-1" || !st.Done || st.State != tc.state || st.RejectedCount != tc.rejected ||
				st.Delivered != tc.delivered || st.ParentSessionID != "parent-1" || task.SessionID != "s-1" || task.Profile != tc.profile {
				t.Fatalf("delegation %+v", st)
			}
			if (tc.code == "") != (task.Error == nil) || task.Error != nil && task.Error.Code != tc.code {
				t.Fatalf("task error %+v, want %q", task.Error, tc.code)
			}
			if len(child.inputs) != tc.children {
				t.Fatalf("%d children ran, want %d", len(child.inputs), tc.children)
			}
			if tc.children > 0 {
				c := child.inputs[0]
				if c.Profile != tc.profile || c.Model != "m/x" || c.Depth != 1 || c.SessionID != "s-1" || task.Turn.Result.Output != "first" {
					t.Fatalf("child %+v, task %+v", c, task)
				}
			}
			if tc.send && (res.LastTurn.Result.Output != "second" || during.Tasks[0].Turn.Turn != 1) {
				t.Fatalf("last turn %+v, delegation's %+v", res.LastTurn, during.Tasks[0].Turn)
			}
		})
	}
}

// TestOneTaskDelegationCancelledBeforeItsChild: a one-task delegation
// cancelled before its child started (its profile still being resolved)
// ends cancelled without starting one, as a delegation's task that never
// started does.
func TestOneTaskDelegationCancelledBeforeItsChild(t *testing.T) {
	child := &fakeChild{results: []api.RunPiResult{finalized("too late")}}
	env := newDelegationEnv(t, child.run, "scout")
	var answer api.CancelResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(api.CancelUpdate, "cancel", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("cancel refused: %v", err) }, OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if r, ok := v.(api.CancelResult); ok {
					answer = r
				}
			},
		}, api.CancelRequest{Reason: "test"})
	}, 0)
	env.ExecuteWorkflow(api.SessionWorkflowName, oneTaskDelegation("scout"))
	res, err := closedResult(t, env)
	if !temporal.IsCanceledError(err) {
		t.Fatalf("closed with %v, want canceled", err)
	}
	st := api.SessionStatus{SessionID: res.SessionID, State: res.State, Delegation: res.Delegation}.AsDelegation()
	if !answer.CancelApplied || st.State != api.StateCancelled || st.Tasks[0].Error == nil || st.Tasks[0].Error.Code != errcode.Cancelled || len(child.inputs) != 0 {
		t.Fatalf("cancel %+v, delegation %+v, %d children", answer, st, len(child.inputs))
	}
}

// TestSessionRecordsHowTurnsEnd: from version 4 on, the status attribute
// says how each turn ended (a failure is never hidden as waiting for
// input) and a cancel of the workflow itself is recorded before it closes;
// version 3 records what it recorded then, for replay.
func TestSessionRecordsHowTurnsEnd(t *testing.T) {
	failed := api.RunPiResult{Output: "no", Error: errcode.NewInfo(errcode.Failed, "the model failed"), Usage: usage(5)}
	tests := []struct {
		version int
		want    []string
	}{
		{4, []string{"queued", "running", "failed", "cancelled"}},
		{3, []string{"queued", "running", "waiting_for_input"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("version %d", tc.version), func(t *testing.T) {
			child := &fakeChild{results: []api.RunPiResult{failed}}
			env := newTestEnv(t, child.run)
			var recorded []string
			env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
				if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(api.StatusKey); ok {
					recorded = append(recorded, v)
				}
			}).Return(nil)
			in := oneTurn("Find the answer.")
			in.IdleTTLSeconds, in.Version = 3600, tc.version
			env.RegisterDelayedCallback(func() {
				if st := queryStatus(t, env); st.State != api.StateFailed || st.Error == nil || st.Error.Code != errcode.Failed {
					t.Errorf("status after the failed turn: %s %+v", st.State, st.Error)
				}
				env.CancelWorkflow()
			}, time.Minute)
			env.ExecuteWorkflow(api.SessionWorkflowName, in)
			if err := env.GetWorkflowError(); !temporal.IsCanceledError(err) {
				t.Fatalf("workflow error %v, want cancelled", err)
			}
			if strings.Join(recorded, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("recorded %q, want %q", recorded, tc.want)
			}
		})
	}
}

// TestSessionKeepsItsWorktreeBase: after a worktree run, the session's next
// runs carry the base that run started from (api.WorktreeSpec.Base).
func TestSessionKeepsItsWorktreeBase(t *testing.T) {
	noFinalize := api.RunPiResult{Output: "thinking", Usage: usage(1), Change: &api.Change{Base: "abc123", Empty: true}}
	child := &fakeChild{results: []api.RunPiResult{noFinalize, finalized("done")}}
	env := newTestEnv(t, child.run)
	in := oneTurn("Write.")
	in.Child.Worktree = &api.WorktreeSpec{}
	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(child.inputs) != 2 || child.inputs[0].Worktree.Base != "" || child.inputs[1].Worktree.Base != "abc123" {
		t.Fatalf("worktree of each run: %+v", child.inputs)
	}
}

// closedResult is the result a session closed with: its value, or (version
// 5) the details of the failure or cancellation it closed with, which err
// then is.
func closedResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) (api.SessionResult, error) {
	t.Helper()
	var res api.SessionResult
	err := env.GetWorkflowResult(&res)
	if err != nil && !sessionResultOf(err, &res) {
		t.Fatalf("the session closed without its result: %v", err)
	}
	return res, err
}

// TestSessionClosesWithItsTurn: a version 5 session's run ends with its
// turn, in Temporal's terms: completed; failed, with the turn's error code
// as the failure's type and its message as the failure's message; or
// canceled. Its result holds the input a send reopens it with, only when
// it is sticky.
func TestSessionClosesWithItsTurn(t *testing.T) {
	zero := 0
	tests := []struct {
		name     string
		result   api.RunPiResult
		cancel   bool
		idleTTL  int
		state    api.State
		failType string // "" completed, "canceled", else the failure's type
		message  string
		reopen   bool
	}{
		{name: "completed", result: finalized("42"), idleTTL: 600, state: api.StateCompleted, reopen: true},
		{name: "finalize missing: failed with its code", result: api.RunPiResult{Output: "text only"}, idleTTL: 600,
			state: api.StateFailed, failType: string(errcode.FinalizeMissing), message: "without a valid subagent_finalize", reopen: true},
		{name: "timed out: failed, the record says timed out", result: api.RunPiResult{Error: &errcode.Info{Code: errcode.Timeout, Message: "Timed out after 600s."}},
			idleTTL: 600, state: api.StateTimedOut, failType: string(errcode.Timeout), message: "Timed out after 600s.", reopen: true},
		{name: "cancelled: canceled", cancel: true, idleTTL: 600, state: api.StateCancelled, failType: "canceled", reopen: true},
		{name: "not sticky: nothing to reopen", result: finalized("42"), idleTTL: -1, state: api.StateCompleted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var env *testsuite.TestWorkflowEnvironment
			if tc.cancel {
				env = newTestEnv(t, untilCancelled(api.RunPiResult{Output: "partial"}))
				env.RegisterDelayedCallback(func() { env.SignalWorkflow(api.CancelSignal, api.CancelRequest{}) }, time.Second)
			} else {
				child := &fakeChild{results: []api.RunPiResult{tc.result}}
				env = newTestEnv(t, child.run)
			}
			in := oneTurn("Find the answer.")
			in.Version, in.IdleTTLSeconds, in.MaxFinalizeRetries = api.CurrentVersion, tc.idleTTL, &zero
			env.ExecuteWorkflow(api.SessionWorkflowName, in)
			if !env.IsWorkflowCompleted() {
				t.Fatal("the run is still open after its turn")
			}
			res, err := closedResult(t, env)
			var app *temporal.ApplicationError
			switch {
			case tc.failType == "":
				if err != nil {
					t.Fatalf("closed with %v, want completed", err)
				}
			case tc.failType == "canceled":
				if !temporal.IsCanceledError(err) {
					t.Fatalf("closed with %v, want canceled", err)
				}
			case !errors.As(err, &app) || app.Type() != tc.failType || !strings.Contains(app.Message(), tc.message) || !app.NonRetryable():
				t.Fatalf("closed with %v, want a failure of type %s saying %q", err, tc.failType, tc.message)
			}
			if res.State != tc.state || res.LastTurn == nil || res.LastTurn.State != tc.state || res.Turns != 1 {
				t.Fatalf("result %+v", res)
			}
			next, ok := res.ReopenInput()
			if ok != tc.reopen {
				t.Fatalf("reopenable = %v, want %v (next %+v)", ok, tc.reopen, res.Next)
			}
			if ok && (next.Carry.Ended != 1 || next.Carry.Accepted != 1 || next.Carry.LastTurn == nil || next.Carry.LastTurn.State != tc.state ||
				next.Prompt != "" || next.SessionID != "s-1" || next.Agent != "scout" || next.Version != api.CurrentVersion || len(next.Carry.Runs) != 1) {
				t.Fatalf("next run's input %+v, carry %+v", next, next.Carry)
			}
			if ok && res.Next.Carry.LastTurn != nil {
				t.Fatal("the result holds its last turn twice")
			}
		})
	}
}

// TestReopenedSessionRunsTheNextTurn: the run a send reopens a closed
// session with goes on from what the closed run carried (its turn count,
// usage, settings and worktree base) and closes with the new turn.
func TestReopenedSessionRunsTheNextTurn(t *testing.T) {
	child := &fakeChild{results: []api.RunPiResult{finalized("first"), finalized("second")}}
	env := newTestEnv(t, child.run)
	in := oneTurn("First.")
	in.Version, in.IdleTTLSeconds, in.Child.Model = api.CurrentVersion, 600, "m/x"
	in.Child.Worktree = &api.WorktreeSpec{}
	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	first, err := closedResult(t, env)
	if err != nil {
		t.Fatal(err)
	}
	next, ok := first.ReopenInput()
	if !ok {
		t.Fatalf("not reopenable: %+v", first)
	}

	env = newTestEnv(t, child.run)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(api.SendSignal, api.SendRequest{Prompt: "Second."}) }, 0)
	env.ExecuteWorkflow(api.SessionWorkflowName, next)
	second, err := closedResult(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if second.Turns != 2 || second.LastTurn.Turn != 2 || second.LastTurn.Result.Output != "second" || second.Usage.Input != 20 {
		t.Fatalf("reopened run's result %+v", second)
	}
	if len(child.inputs) != 2 || child.inputs[1].Turn != 2 || child.inputs[1].Model != "m/x" || child.inputs[1].Prompt != "Second." {
		t.Fatalf("the second child run %+v", child.inputs)
	}
	if n, _ := second.ReopenInput(); len(n.Carry.Runs) != 2 || n.Carry.Runs[1].Turn != 2 {
		t.Fatalf("turn marks %+v", n.Carry.Runs)
	}
}

// TestReopenedSessionKeepsItsDelegation: a one-task delegation's session
// reopened for a later turn still answers as that delegation, whose task
// stays its first turn, acknowledged.
func TestReopenedSessionKeepsItsDelegation(t *testing.T) {
	child := &fakeChild{results: []api.RunPiResult{finalized("first"), finalized("second")}}
	env := newDelegationEnv(t, child.run, "scout")
	in := oneTaskDelegation("scout")
	in.IdleTTLSeconds = 600
	env.ExecuteWorkflow(api.SessionWorkflowName, in)
	first, err := closedResult(t, env)
	if err != nil {
		t.Fatal(err)
	}
	next, ok := first.ReopenInput()
	if !ok || next.Delegation == nil || next.Carry.FirstTurn == nil {
		t.Fatalf("next run's input %+v", next)
	}
	env = newDelegationEnv(t, child.run, "scout")
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(api.SendSignal, api.SendRequest{Prompt: "t2"}) }, 0)
	env.ExecuteWorkflow(api.SessionWorkflowName, next)
	second, err := closedResult(t, env)
	if err != nil {
		t.Fatal(err)
	}
	st := api.SessionStatus{SessionID: second.SessionID, State: second.State, Delegation: second.Delegation}.AsDelegation()
	if second.LastTurn.Result.Output != "second" || st.Tasks[0].Turn.Turn != 1 || st.Tasks[0].Turn.Result.Output != "first" || !st.Done {
		t.Fatalf("delegation %+v, last turn %+v", st, second.LastTurn)
	}
}
