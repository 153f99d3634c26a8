package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// planChild answers each child run by what its prompt says: "FAILME"
// fails the run; "verdict=W" finalizes with verdict W; "calls=3" reports 3
// tool calls; else it finalizes with "out:" and the prompt's first word.
// It counts the runs of each first word.
type planChild struct {
	mu   sync.Mutex
	runs map[string]int
	// verdicts, by step key, are the verdicts of that step's runs in order
	// (a reviewer that asks for changes, then is satisfied), corrective
	// turns and later rounds included.
	verdicts map[string][]string
	stepRuns map[string]int
	// prompts holds the latest prompt of each first word.
	prompts map[string]string
	// then holds, for each first word, the cwd of each run its latest run
	// would start early (api.RunPiInput.Then), in order.
	then map[string][]string
}

func (c *planChild) run(_ context.Context, in api.RunPiInput) (api.RunPiResult, error) {
	word := strings.Fields(in.Prompt)[0]
	key := ""
	for k := range c.verdicts {
		if strings.HasSuffix(in.SessionID, "-"+k) || strings.Contains(in.SessionID, "-"+k+"-") {
			key = k
		}
	}
	c.mu.Lock()
	if c.prompts == nil {
		c.prompts = map[string]string{}
	}
	c.prompts[word] = in.Prompt
	if c.then == nil {
		c.then = map[string][]string{}
	}
	c.then[word] = nil
	for _, next := range in.Then {
		c.then[word] = append(c.then[word], next.Cwd)
	}
	c.runs[word]++
	n := c.stepRuns[key]
	c.stepRuns[key]++
	c.mu.Unlock()
	if strings.Contains(in.Prompt, "FAILME") {
		return api.RunPiResult{Error: errcode.NewInfo(errcode.Failed, "the child failed"), Usage: usage(1)}, nil
	}
	res := finalized("out:" + word)
	if vs := c.verdicts[key]; key != "" && n < len(vs) {
		res.Finalize.Verdict = vs[n]
	} else if _, v, ok := strings.Cut(in.Prompt, "verdict="); ok {
		res.Finalize.Verdict = strings.Fields(v)[0]
	}
	if strings.Contains(in.Prompt, "calls=3") {
		res.ToolCalls = 4 // three and the finalize
	}
	return res, nil
}

func newPlanEnv(t *testing.T, child *planChild, gate func(context.Context, api.GateInput) (api.GateResult, error)) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
	env.RegisterWorkflowWithOptions(Plan, workflow.RegisterOptions{Name: api.PlanWorkflowName})
	env.RegisterActivityWithOptions(child.run, activity.RegisterOptions{Name: api.RunPiActivityName})
	env.RegisterActivityWithOptions(fakeResolver("scout", "reviewer", "implementer"), activity.RegisterOptions{Name: api.ResolveTasksActivityName})
	if gate == nil {
		gate = func(context.Context, api.GateInput) (api.GateResult, error) { return api.GateResult{}, nil }
	}
	env.RegisterActivityWithOptions(gate, activity.RegisterOptions{Name: api.RunGateActivityName})
	return env
}

func step(key, agent, task string) api.Step { return api.Step{Key: key, Agent: agent, Task: task} }

func runPlan(t *testing.T, env *testsuite.TestWorkflowEnvironment, in api.PlanInput) api.DelegationStatus {
	t.Helper()
	if in.Cwd == "" {
		in.Cwd = "/repo"
	}
	env.ExecuteWorkflow(api.PlanWorkflowName, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the plan did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var st api.DelegationStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func stateOf(st api.DelegationStatus, key string) api.StepState {
	for _, s := range st.Plan.Steps {
		if s.Key == key {
			return s
		}
	}
	return api.StepState{}
}

func TestPlanWorkflow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		plan     api.Plan
		verdicts map[string][]string
		gate     []api.GateResult
		want     api.State
		steps    map[string]api.State
		runs     map[string]int
		prompts  map[string]string
		check    func(t *testing.T, st api.DelegationStatus)
	}{
		{
			name: "a sequence hands each step the one before",
			plan: api.Plan{Steps: []api.Step{step("a", "scout", "a go"), step("b", "implementer", "b use {steps.a.output}")}},
			want: api.StateCompleted, steps: map[string]api.State{"a": api.StateCompleted, "b": api.StateCompleted},
			runs:    map[string]int{"a": 1, "b": 1},
			prompts: map[string]string{"b": "b use out:a"},
		},
		{
			name: "a failure skips the rest of its lane only",
			plan: api.Plan{Steps: []api.Step{{Parallel: []api.Step{
				{Key: "api", Steps: []api.Step{step("w1", "implementer", "w1 FAILME"), step("r1", "reviewer", "r1 {steps.w1.output}")}},
				{Key: "ui", Steps: []api.Step{step("w2", "implementer", "w2 go"), step("r2", "reviewer", "r2 {steps.w2.output}")}},
			}}}},
			want:  api.StateFailed,
			steps: map[string]api.State{"w1": api.StateFailed, "r1": api.StateSkipped, "w2": api.StateCompleted, "r2": api.StateCompleted},
			runs:  map[string]int{"w1": 1, "r1": 0, "r2": 1},
			check: func(t *testing.T, st api.DelegationStatus) {
				if e := stateOf(st, "r1").Error; e == nil || e.Code != errcode.Skipped {
					t.Fatalf("r1 error %+v", e)
				}
			},
		},
		{
			name: "a loop ends as soon as its until holds",
			plan: api.Plan{Steps: []api.Step{step("impl", "implementer", "impl go"), {Key: "rounds", Loop: &api.Loop{Max: 3, Until: api.Until{Step: "review", Verdict: "clean"}},
				Steps: []api.Step{{Key: "review", Agent: "reviewer", Task: "review round {round}", Verdicts: []string{"clean", "changes"}}, {Key: "fix", Continue: "impl", Task: "fix {steps.review.output}"}}}}},
			verdicts: map[string][]string{"review": {"changes", "clean"}},
			want:     api.StateCompleted,
			steps:    map[string]api.State{"review": api.StateCompleted, "fix": api.StateCompleted},
			runs:     map[string]int{"impl": 1, "review": 2, "fix": 1},
			check: func(t *testing.T, st api.DelegationStatus) {
				if r := stateOf(st, "review"); r.Round != 2 || r.Verdict != "clean" || !strings.HasSuffix(r.SessionID, "-review-R2") {
					t.Fatalf("review %+v", r)
				}
				if f := stateOf(st, "fix"); f.SessionID != stateOf(st, "impl").SessionID {
					t.Fatalf("fix ran in %s, not the implementer's session", f.SessionID)
				}
			},
		},
		{
			name: "a loop that never meets its until fails with LOOP_EXHAUSTED",
			plan: api.Plan{Steps: []api.Step{{Loop: &api.Loop{Max: 2, Until: api.Until{Step: "review", Verdict: "clean"}},
				Steps: []api.Step{{Key: "review", Agent: "reviewer", Task: "review verdict=changes", Verdicts: []string{"clean", "changes"}}}}}},
			want:  api.StateFailed,
			steps: map[string]api.State{"review": api.StateFailed},
			runs:  map[string]int{"review": 2},
			check: func(t *testing.T, st api.DelegationStatus) {
				if e := stateOf(st, "review").Error; e == nil || e.Code != errcode.LoopExhausted {
					t.Fatalf("review error %+v", e)
				}
			},
		},
		{
			name:     "a verdict outside the step's verdicts gets a corrective turn",
			plan:     api.Plan{Steps: []api.Step{{Key: "review", Agent: "reviewer", Task: "review", Verdicts: []string{"clean", "changes"}}}},
			verdicts: map[string][]string{"review": {"maybe", "clean"}},
			want:     api.StateCompleted,
			runs:     map[string]int{"review": 1, "Your": 1},
			check: func(t *testing.T, st api.DelegationStatus) {
				if r := stateOf(st, "review"); r.Runs != 2 || r.Verdict != "clean" {
					t.Fatalf("review %+v", r)
				}
			},
		},
		{
			name:     "a child that keeps giving a verdict outside the list fails the step",
			plan:     api.Plan{Steps: []api.Step{{Key: "review", Agent: "reviewer", Task: "review", Verdicts: []string{"clean", "changes"}}}},
			verdicts: map[string][]string{"review": {"maybe", "perhaps", "unsure"}},
			want:     api.StateFailed,
			runs:     map[string]int{"review": 1, "Your": 2},
			check: func(t *testing.T, st api.DelegationStatus) {
				if e := stateOf(st, "review").Error; e == nil || e.Code != errcode.FinalizeMissing || !strings.Contains(e.Message, `"unsure"`) {
					t.Fatalf("review error %+v", e)
				}
			},
		},
		{
			name: "a gate that fails once sends its output back, then passes",
			plan: api.Plan{Steps: []api.Step{{Key: "w", Agent: "implementer", Task: "w go", Gate: &api.Gate{Command: "make check"}}}},
			gate: []api.GateResult{{ExitCode: 1, Output: "FAIL: TestX"}, {}},
			want: api.StateCompleted,
			runs: map[string]int{"w": 1, "The": 1},
			check: func(t *testing.T, st api.DelegationStatus) {
				if w := stateOf(st, "w"); w.GateRuns != 2 || w.Runs != 2 {
					t.Fatalf("w %+v", w)
				}
			},
		},
		{
			name:  "a gate that keeps failing fails the step with GATE_FAILED",
			plan:  api.Plan{Steps: []api.Step{{Key: "w", Agent: "implementer", Task: "w go", Gate: &api.Gate{Command: "make check", Attempts: 1}}, step("after", "reviewer", "after x")}},
			gate:  []api.GateResult{{ExitCode: 2, Output: "FAIL"}, {ExitCode: 2, Output: "FAIL again"}},
			want:  api.StateFailed,
			steps: map[string]api.State{"w": api.StateFailed, "after": api.StateSkipped},
			check: func(t *testing.T, st api.DelegationStatus) {
				if e := stateOf(st, "w").Error; e == nil || e.Code != errcode.GateFailed || !strings.Contains(e.Message, "FAIL again") {
					t.Fatalf("w error %+v", e)
				}
			},
		},
		{
			name:  "a spent plan budget starts no further step",
			plan:  api.Plan{Budget: &api.Budget{ToolCalls: 3}, Steps: []api.Step{step("a", "scout", "a calls=3"), step("b", "scout", "b go")}},
			want:  api.StateFailed,
			steps: map[string]api.State{"a": api.StateCompleted, "b": api.StateSkipped},
			runs:  map[string]int{"b": 0},
			check: func(t *testing.T, st api.DelegationStatus) {
				if st.Plan.Stopped == nil || st.Plan.Stopped.Code != errcode.BudgetExceeded || stateOf(st, "b").Error.Code != errcode.BudgetExceeded {
					t.Fatalf("stopped %+v", st.Plan.Stopped)
				}
			},
		},
		{
			name:  "an unknown agent refuses the plan before any child runs",
			plan:  api.Plan{Steps: []api.Step{step("a", "scout", "a go"), step("b", "wizard", "b go")}},
			want:  api.StateFailed,
			steps: map[string]api.State{"a": api.StateSkipped, "b": api.StateFailed},
			runs:  map[string]int{"a": 0},
			check: func(t *testing.T, st api.DelegationStatus) {
				if e := stateOf(st, "b").Error; e == nil || e.Code != errcode.UnknownAgent || !strings.HasPrefix(e.Message, `step "b": Unknown profile`) {
					t.Fatalf("b error %+v", e)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			child := &planChild{runs: map[string]int{}, verdicts: tc.verdicts, stepRuns: map[string]int{}}
			var gates []api.GateInput
			gate := func(_ context.Context, in api.GateInput) (api.GateResult, error) {
				gates = append(gates, in)
				if len(gates) <= len(tc.gate) {
					return tc.gate[len(gates)-1], nil
				}
				return api.GateResult{}, nil
			}
			env := newPlanEnv(t, child, gate)
			st := runPlan(t, env, api.PlanInput{Plan: tc.plan})
			if st.State != tc.want || !st.Done {
				t.Fatalf("plan %s done %v, want %s: %+v", st.State, st.Done, tc.want, st.Plan.Steps)
			}
			for k, want := range tc.steps {
				if got := stateOf(st, k).State; got != want {
					t.Errorf("step %s: %s, want %s", k, got, want)
				}
			}
			for k, want := range tc.runs {
				if got := child.runs[k]; got != want {
					t.Errorf("child runs of %q: %d, want %d", k, got, want)
				}
			}
			for k, want := range tc.prompts {
				if got := child.prompts[k]; got != want {
					t.Errorf("prompt of %q: %q, want %q", k, got, want)
				}
			}
			if tc.check != nil {
				tc.check(t, st)
			}
		})
	}
}

// TestPlanKeepsPriorSteps: a resumed plan (attempt 2 with prior steps)
// runs only what did not complete, as new sessions.
func TestPlanKeepsPriorSteps(t *testing.T) {
	child := &planChild{runs: map[string]int{}, stepRuns: map[string]int{}}
	env := newPlanEnv(t, child, nil)
	prior := []api.StepState{{Key: "a", State: api.StateCompleted, SessionID: "plan-x-a",
		Turn: &api.TurnResult{State: api.StateCompleted, Result: finalized("kept a")}}, {Key: "b", State: api.StateCancelled}}
	st := runPlan(t, env, api.PlanInput{Attempt: 2, Prior: prior,
		Plan: api.Plan{Steps: []api.Step{step("a", "scout", "a go"), step("b", "scout", "b {steps.a.output}")}}})
	if st.State != api.StateCompleted || child.runs["a"] != 0 || child.runs["b"] != 1 || child.prompts["b"] != "b kept a" {
		t.Fatalf("plan %s runs %v prompts %v", st.State, child.runs, child.prompts)
	}
	if a := stateOf(st, "a"); !a.Reused || a.SessionID != "plan-x-a" {
		t.Fatalf("a %+v", a)
	}
	if b := stateOf(st, "b"); !strings.HasSuffix(b.SessionID, "-b-A2") {
		t.Fatalf("b %+v", b)
	}
}

// TestGateRunsOf: a gate that failed for good counts the runs its
// attempts started, as its last error or its last heartbeat says.
func TestGateRunsOf(t *testing.T) {
	withRuns := func(n int) error {
		return temporal.NewApplicationErrorWithOptions("cannot run", "", temporal.ApplicationErrorOptions{Details: []any{api.GateRunCount{Runs: n}}})
	}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"three runs, the reaper died each time", withRuns(3), 3},
		{"refused before it ran", temporal.NewNonRetryableApplicationError("Permission denied", "PERMISSION_DENIED", nil, api.GateRunCount{}), 0},
		{"an error of a worker that kept no count", temporal.NewApplicationError("boom", ""), 0},
		{"the last attempt timed out after its second run", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil, api.GateRunCount{Runs: 2}), 2},
		{"a timeout whose beat has no count", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil, api.GateRunCount{}), 1},
		{"a timeout with no beat", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gateRunsOf(fmt.Errorf("activity error: %w", tc.err)); got != tc.want {
				t.Fatalf("runs %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPlanStartsTheNextStepsEarly: a step's run carries the runs whose
// children start early once its child has finalized (the steps its end
// lets start, each in its own folder here, named for its step), and only
// those: none past a gate, none for a step that continues a session or
// still waits for another lane.
func TestPlanStartsTheNextStepsEarly(t *testing.T) {
	at := func(key string) api.Step { return api.Step{Key: key, Agent: "scout", Task: key + " go", Cwd: key} }
	for _, tc := range []struct {
		name string
		plan api.Plan
		then map[string][]string
	}{
		{
			name: "a sequence: each step starts the next",
			plan: api.Plan{Steps: []api.Step{at("a"), at("b"), at("c")}},
			then: map[string][]string{"a": {"/repo/b"}, "b": {"/repo/c"}, "c": nil},
		},
		{
			name: "two lanes: each step starts its lane's next",
			plan: api.Plan{Steps: []api.Step{{Parallel: []api.Step{
				{Key: "l1", Steps: []api.Step{at("a1"), at("a2")}},
				{Key: "l2", Steps: []api.Step{at("b1"), at("b2")}},
			}}}},
			then: map[string][]string{"a1": {"/repo/a2"}, "b1": {"/repo/b2"}, "a2": nil, "b2": nil},
		},
		{
			name: "a fan-out starts every branch; a fan-in waits for its last lane",
			plan: api.Plan{Steps: []api.Step{at("a"), {Parallel: []api.Step{at("b"), at("c")}}, at("d")}},
			then: map[string][]string{"a": {"/repo/b", "/repo/c"}, "b": nil, "c": nil},
		},
		{
			name: "past a gate, or to a continuing step, nothing",
			plan: api.Plan{Steps: []api.Step{
				{Key: "w", Agent: "implementer", Task: "w go", Gate: &api.Gate{Command: "make check"}},
				at("r"), {Key: "fix", Continue: "w", Task: "fix go"},
			}},
			then: map[string][]string{"w": nil, "r": nil},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			child := &planChild{runs: map[string]int{}, stepRuns: map[string]int{}}
			env := newPlanEnv(t, child, nil)
			st := runPlan(t, env, api.PlanInput{Plan: tc.plan, Version: api.PlanVersion})
			if st.State != api.StateCompleted {
				t.Fatalf("plan %s", st.State)
			}
			for word, want := range tc.then {
				if got := child.then[word]; !slices.Equal(got, want) {
					t.Errorf("step %s starts %v early, want %v", word, got, want)
				}
			}
		})
	}
}
