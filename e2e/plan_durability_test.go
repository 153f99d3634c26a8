package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
)

// TestPlanServiceKilledBetweenStages: pattern 3's lanes on a `subagents
// dev` that is SIGKILLed once both writers have finished and both
// reviewers run, then started again on the same database: the plan
// finishes, and no finished stage ran twice (the model calls say so).
func TestPlanServiceKilledBetweenStages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("kill-api-writer", finalizeStep("api written"))
	e.model.Script("kill-ui-writer", finalizeStep("ui written"))
	for _, lane := range []string{"api", "ui"} {
		// The reviewers (read-only) think long: the service dies while
		// both wait for their answer.
		review := finalizeStep(lane + " review survived the crash")
		review.DelayMS = 4000
		e.model.Script("kill-"+lane+"-review", review)
	}
	port := freePort()
	args := []string{
		"--port", strconv.Itoa(port), "--headless", "--db-filename", filepath.Join(t.TempDir(), "temporal.db"),
		"--data-dir", e.dataDir, "--task-queue", e.taskQueue,
	}
	p := e.startDev(args...)
	p.waitReady(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := e.dialAddress(addr)
	file := e.examplePlan("lanes", "kill", map[string]string{"api": "add GET /hello", "ui": "add a hello button"})
	plan, err := profiles.ReadPlanFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lib := &client.Client{Temporal: c, TaskQueue: e.taskQueue, Address: addr}
	started, err := lib.StartPlan(e.ctx(), client.PlanRequest{Plan: &plan, Cwd: e.workDir})
	if err != nil {
		t.Fatal(err)
	}
	reviewing := func(r scriptedmodel.Request) bool { return strings.HasSuffix(r.Script, "-review") }
	if _, err := e.model.WaitForRequests(e.ctx(), 2, reviewing); err != nil {
		t.Fatalf("the reviewers never started: %v", err)
	}
	c.Close()
	p = e.crashRestart(p, args...)
	c = e.dialAddress(addr)
	defer c.Close()
	var st api.DelegationStatus
	if err := c.GetWorkflow(e.ctx(), started.DelegationID, "").Get(e.ctx(), &st); err != nil {
		t.Fatal(err)
	}
	if st.State != api.StateCompleted {
		t.Fatalf("plan %s: %+v", st.State, st.Plan.Steps)
	}
	for _, tk := range st.Tasks {
		if tk.State != api.StateCompleted {
			t.Fatalf("step %s %s", tk.Name, tk.State)
		}
	}
	if out := st.Tasks[1].Turn.Result.Output; out != "api review survived the crash" {
		t.Fatalf("api review output %q", out)
	}
	calls := e.calls("kill-api-writer", "kill-ui-writer", "kill-api-review", "kill-ui-review")
	// Each writer once; each reviewer twice: the request the crash cut
	// short, and the one its run's retry made.
	if calls["kill-api-writer"] != 1 || calls["kill-ui-writer"] != 1 || calls["kill-api-review"] != 2 || calls["kill-ui-review"] != 2 {
		t.Fatalf("model calls %v", calls)
	}
	recordHistory(t, c, started.DelegationID, "plan-lanes-killed-v1")
	p.stop(t)
}

// TestPlanResumeAfterCancel: a plan cancelled while its second step runs,
// then resumed by its ID, keeps the first step's result and runs only the
// cancelled step and the one after it.
func TestPlanResumeAfterCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	goOn := filepath.Join(e.workDir, "go-on")
	e.model.Script("res-a", finalizeStep("a: mapped"))
	e.model.Script("res-b", bashStep("test -f "+goOn+" || sleep 120"), finalizeStep("b: built on a: mapped"))
	e.model.Script("res-c", finalizeStep("c: reviewed"))
	e.startWorker(shared.client)
	plan := api.Plan{Steps: []api.Step{
		{Key: "a", Agent: "scout", Task: "[[script:res-a]] Map."},
		{Key: "b", Agent: "implementer", Task: "[[script:res-b]] Build on {steps.a.output}"},
		{Key: "c", Agent: "reviewer", Task: "[[script:res-c]] Review {steps.b.output}"},
	}}
	file := writePlan(t, e, "resume", plan)
	started, _ := e.cli().json(0, "", "start", "--plan", file)
	ctx := e.ctx()
	if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == "res-b" }); err != nil {
		t.Fatal(err)
	}
	cancelled, _ := e.cli().json(0, "", "cancel", started.DelegationID)
	if cancelled.CancelApplied == nil || !*cancelled.CancelApplied {
		t.Fatalf("cancel %+v", cancelled)
	}
	ended, _ := e.cli().json(1, "", "wait", started.DelegationID)
	if ended.Status != "cancelled" || planItem(t, ended, "a").Status != "completed" || planItem(t, ended, "b").Status != "cancelled" || planItem(t, ended, "c").Status != "cancelled" {
		t.Fatalf("after the cancel: %s %+v", ended.Status, ended.Plan.Steps)
	}

	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	resumed, _ := e.cli().json(0, "", "resume", "--wait", started.DelegationID)
	if resumed.Status != "completed" || resumed.DelegationID != started.DelegationID || resumed.Plan.Attempt != 2 {
		t.Fatalf("resumed %s attempt %d: %+v", resumed.Status, resumed.Plan.Attempt, resumed.Plan.Steps)
	}
	if a := planStep(t, resumed, "a"); !a.Reused || planItem(t, resumed, "a").Output != "a: mapped" {
		t.Fatalf("a %+v", a)
	}
	if b := planStep(t, resumed, "b"); b.Reused || !strings.HasSuffix(b.SessionID, "-b-A2") || planItem(t, resumed, "b").Output != "b: built on a: mapped" {
		t.Fatalf("b %+v", b)
	}
	calls := e.calls("res-a", "res-b", "res-c")
	// a once; b's first run (its bash call, cancelled) and its second (bash, finalize); c once.
	if calls["res-a"] != 1 || calls["res-b"] != 3 || calls["res-c"] != 1 {
		t.Fatalf("model calls %v", calls)
	}
	if r := e.model.RequestsFor("res-b"); !strings.Contains(userText(r[len(r)-1]), "Build on a: mapped") {
		t.Fatal("the resumed step did not get the kept step's result")
	}
	recordHistory(t, shared.client, started.DelegationID, "plan-resumed-v1")
	// A completed plan has nothing to resume.
	again, _ := e.cli().json(2, "", "resume", started.DelegationID)
	if again.Error == nil || again.Error.Code != errcode.InvalidInput || !strings.Contains(again.Error.Message, "nothing to resume") {
		t.Fatalf("resume of a completed plan: %+v", again.Error)
	}
}

// TestPlanBudgetStopsThePlan: a plan whose budget of tool calls is spent
// by its first step starts no further step and says why, with its code.
func TestPlanBudgetStopsThePlan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("bud-a", bashStep("ls"), bashStep("ls -a"), finalizeStep("a: looked twice"))
	e.model.Script("bud-b", finalizeStep("never"))
	e.startWorker(shared.client)
	plan := api.Plan{Budget: &api.Budget{ToolCalls: 2}, Steps: []api.Step{
		{Key: "a", Agent: "scout", Task: "[[script:bud-a]] Look."},
		{Key: "b", Agent: "scout", Task: "[[script:bud-b]] Look again."},
	}}
	env := e.runPlan(1, writePlan(t, e, "budget", plan))
	if env.Status != "failed" || env.Plan.Stopped == nil || env.Plan.Stopped.Code != errcode.BudgetExceeded ||
		!strings.Contains(env.Plan.Stopped.Message, "2 tool calls of a budget of 2") {
		t.Fatalf("plan %s stopped %+v", env.Status, env.Plan.Stopped)
	}
	if a := planItem(t, env, "a"); a.Status != "completed" || a.Output != "a: looked twice" {
		t.Fatalf("a %+v", a)
	}
	b := planItem(t, env, "b")
	if b.Status != string(api.StateSkipped) || b.Error == nil || b.Error.Code != errcode.BudgetExceeded {
		t.Fatalf("b %+v", b)
	}
	if n := len(e.model.RequestsFor("bud-b")); n != 0 {
		t.Fatalf("b ran %d times past the budget", n)
	}
}

// TestInvalidPlansAreRefused: plans that cannot run are refused before any
// child starts, with a coded error naming the step.
func TestInvalidPlansAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	var many []api.Step
	for i := range api.MaxPlanSteps + 1 {
		many = append(many, api.Step{Key: fmt.Sprintf("s%d", i), Agent: "scout", Task: "[[script:never]] x"})
	}
	for _, tc := range []struct {
		name string
		plan api.Plan
		exit int
		code errcode.Code
		text string
	}{
		{"unknown agent", api.Plan{Steps: []api.Step{{Key: "a", Agent: "scout", Task: "[[script:never]] x"}, {Key: "b", Agent: "code-wizard", Task: "[[script:never]] y"}}},
			2, errcode.UnknownAgent, `step "b": Unknown profile: "code-wizard"`},
		{"a cycle", api.Plan{Steps: []api.Step{{Parallel: []api.Step{{Key: "a", Agent: "scout", Task: "[[script:never]] {steps.b.output}"}, {Key: "b", Agent: "scout", Task: "[[script:never]] {steps.a.output}"}}}}},
			2, errcode.InvalidInput, "a cycle: a → b → a"},
		{"a missing step", api.Plan{Steps: []api.Step{{Key: "a", Agent: "scout", Task: "[[script:never]] {steps.ghost.output}"}}},
			2, errcode.InvalidInput, `refers to step "ghost", which the plan does not have`},
		{"too many steps", api.Plan{Steps: many}, 2, errcode.InvalidInput, "a plan holds at most 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := e.cli().json(tc.exit, "", "run", "--plan", writePlan(t, e, strings.ReplaceAll(tc.name, " ", "-"), tc.plan))
			var got *errcode.Info
			if env.Error != nil {
				got = env.Error
			} else if env.Plan != nil {
				got = env.Plan.Stopped
			}
			if got == nil || got.Code != tc.code || !strings.Contains(got.Message, tc.text) {
				t.Fatalf("error %+v, want %s with %q", got, tc.code, tc.text)
			}
		})
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("%d model calls: a refused plan started a child", n)
	}
}

// writePlan writes plan as a JSON plan file named name.json beside the
// work dir.
func writePlan(t *testing.T, e *env, name string, plan api.Plan) string {
	t.Helper()
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(filepath.Dir(e.workDir), name+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlanStepBudgetStopsItsChild: a step whose child asks for more tool
// calls than its budget is stopped by the worker and fails with
// BUDGET_EXCEEDED; its lane's next step is skipped, nothing else runs it.
func TestPlanStepBudgetStopsItsChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("sb-a", bashStep("ls"), bashStep("ls -a"), bashStep("ls -l"), finalizeStep("never reached"))
	e.model.Script("sb-b", finalizeStep("never"))
	e.startWorker(shared.client)
	plan := api.Plan{Steps: []api.Step{
		{Key: "a", Agent: "implementer", Task: "[[script:sb-a]] Look around.", Budget: &api.Budget{ToolCalls: 2}},
		{Key: "b", Agent: "scout", Task: "[[script:sb-b]] Then this."},
	}}
	env := e.runPlan(1, writePlan(t, e, "step-budget", plan))
	a := planItem(t, env, "a")
	if a.Status != "failed" || a.Error == nil || a.Error.Code != errcode.BudgetExceeded || !strings.Contains(a.Error.Message, "of a budget of 2") {
		t.Fatalf("a %+v", a)
	}
	if b := planItem(t, env, "b"); b.Status != string(api.StateSkipped) {
		t.Fatalf("b %+v", b)
	}
	if calls := e.calls("sb-a", "sb-b"); calls["sb-a"] != 3 || calls["sb-b"] != 0 {
		t.Fatalf("model calls %v: the child was not stopped at its budget", calls)
	}
}
