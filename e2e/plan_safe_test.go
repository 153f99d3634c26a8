package e2e

// Gates and plan arguments that cannot be turned against the user, and
// plans checked whole before anything starts (issue 39, sections 4 and 5).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// gateRetryTimeout bounds the wait for a plan whose gate's worker was
// killed: the gate activity's heartbeat timeout (30 s) passes before its
// retry runs, then a restart and a pi run on a loaded machine.
const gateRetryTimeout = 3 * time.Minute

// TestPlanGateDiesWithService: `subagents dev` SIGKILLed while a step's
// gate runs `sleep`: the sleep dies with the service instead of running on
// under init, the gate runs again after the restart, once more, and the
// step's gateRuns counts both runs.
func TestPlanGateDiesWithService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("gate-kill", finalizeStep("written"))
	port := freePort()
	args := []string{
		"--port", strconv.Itoa(port), "--headless", "--db-filename", filepath.Join(t.TempDir(), "temporal.db"),
		"--data-dir", e.dataDir, "--task-queue", e.taskQueue,
	}
	p := e.startDev(args...)
	p.waitReady(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := e.dialAddress(addr)
	// The first run counts itself and sleeps (in a process whose pid it
	// writes down); the second passes.
	gate := `n=$(cat gate-runs 2>/dev/null || echo 0); echo $((n+1)) > gate-runs; ` +
		`if [ "$n" -eq 0 ]; then sh -c 'echo $$ > gate-sleep.pid; exec sleep 300'; fi`
	plan := api.Plan{Steps: []api.Step{{Key: "write", Agent: "implementer", Task: "[[script:gate-kill]] Write it.", Gate: &api.Gate{Command: gate}}}}
	lib := &client.Client{Temporal: c, TaskQueue: e.taskQueue, Address: addr}
	started, err := lib.StartPlan(e.ctx(), client.PlanRequest{Plan: &plan, Cwd: e.workDir})
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(e.workDir, "gate-sleep.pid")
	waitForFile(t, pidFile)
	for deadline := time.Now().Add(5 * time.Second); strings.TrimSpace(fileText(t, pidFile)) == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("gate-sleep.pid stayed empty")
		}
	}
	sleep := readPid(t, pidFile)
	t.Cleanup(func() {
		// Ours, started by the service under test: should it have outlived
		// the service, it goes with the test.
		if pidRunning(sleep) {
			_ = syscall.Kill(sleep, syscall.SIGKILL)
		}
	})
	if !pidRunning(sleep) {
		t.Fatalf("the gate's sleep (pid %d) does not run", sleep)
	}
	c.Close()

	p = e.crashRestart(p, args...)
	waitPidGone(t, sleep, "the gate's sleep, after its service was SIGKILLed")
	c = e.dialAddress(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), gateRetryTimeout)
	defer cancel()
	var st api.DelegationStatus
	if err := c.GetWorkflow(ctx, started.DelegationID, "").Get(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if st.State != api.StateCompleted || st.Plan == nil || len(st.Plan.Steps) != 1 {
		t.Fatalf("plan %s: %+v", st.State, st.Plan)
	}
	if runs := strings.TrimSpace(fileText(t, filepath.Join(e.workDir, "gate-runs"))); runs != "2" || st.Plan.Steps[0].GateRuns != 2 {
		t.Fatalf("the gate ran %s times; gateRuns says %d, want 2", runs, st.Plan.Steps[0].GateRuns)
	}
	if n := len(e.model.RequestsFor("gate-kill")); n != 1 {
		t.Fatalf("the step's child ran %d times, want once", n)
	}
	recordHistory(t, c, started.DelegationID, "plan-gate-killed-v3")
	p.stop(t)
}

// TestPlanArgsAreLiteral: an argument's value reaches the child as the
// user wrote it, even when it looks like a reference: it is not another
// step's output, and `{round}` outside a loop is not refused.
func TestPlanArgsAreLiteral(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	plan := api.Plan{Args: map[string]api.PlanArg{"x": {Required: true}}, Steps: []api.Step{
		{Key: "s1", Agent: "scout", Task: "[[script:lit-s1]] Look."},
		{Key: "s2", Agent: "scout", Task: "[[script:lit-s2]] Use <{args.x}> after {steps.s1.output}."},
	}}
	for i, value := range []string{"{steps.s1.output} {steps.s1.status}", "{round}"} {
		t.Run(value, func(t *testing.T) {
			s1, s2 := fmt.Sprintf("lit-s1-%d", i), fmt.Sprintf("lit-s2-%d", i)
			e.model.Script(s1, finalizeStep("SECRET-OF-S1"))
			e.model.Script(s2, finalizeStep("used"))
			p := plan
			p.Steps = []api.Step{plan.Steps[0], plan.Steps[1]}
			p.Steps[0].Task = strings.Replace(p.Steps[0].Task, "lit-s1", s1, 1)
			p.Steps[1].Task = strings.Replace(p.Steps[1].Task, "lit-s2", s2, 1)
			file := writePlan(t, e, fmt.Sprintf("literal-%d", i), p)
			env := e.runPlan(0, file, "--arg", "x="+value)
			if env.Status != "completed" {
				t.Fatalf("plan %s: %+v", env.Status, env.Error)
			}
			reqs := e.model.RequestsFor(s2)
			if len(reqs) == 0 {
				t.Fatal("step s2 never ran")
			}
			text := userText(reqs[0])
			if want := "Use <" + value + "> after SECRET-OF-S1."; !strings.Contains(text, want) {
				t.Fatalf("s2's task:\n%s\nwant %q", text, want)
			}
			if i == 0 {
				recordHistory(t, shared.client, env.DelegationID, "plan-args-literal-v3")
			}
		})
	}
}

// TestPlanStartChecksWhole: a plan that cannot run is refused by `run
// --plan` before anything starts: exit 2 with its code, the reason printed
// in text mode too, no plan workflow in `list`, no child.
func TestPlanStartChecksWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	review := api.Step{Key: "review", Agent: "reviewer", Task: "[[script:never]] Review.", Verdicts: []string{"clean", "changes"}}
	for _, tc := range []struct {
		name string
		plan api.Plan
		code errcode.Code
		text string
	}{
		{"an unknown agent", api.Plan{Steps: []api.Step{{Key: "a", Agent: "scout", Task: "[[script:never]] x"}, {Key: "b", Agent: "nosuchagent", Task: "[[script:never]] y"}}},
			errcode.UnknownAgent, `step "b": Unknown profile: "nosuchagent"`},
		{"a misspelt step field", api.Plan{Steps: []api.Step{{Key: "s1", Agent: "scout", Task: "[[script:never]] x"}, {Key: "s2", Agent: "scout", Task: "[[script:never]] {steps.s1.bogus}"}}},
			errcode.InvalidInput, `{steps.s1.bogus} is not a reference`},
		{"an until verdict the step may not give", api.Plan{Steps: []api.Step{{Key: "rounds", Loop: &api.Loop{Max: 2, Until: api.Until{Step: "review", Verdict: "approved"}}, Steps: []api.Step{review}}}},
			errcode.InvalidInput, `waits for verdict "approved" of step "review"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writePlan(t, e, "check-"+strings.ReplaceAll(tc.name, " ", "-"), tc.plan)
			parent := "check-" + strings.ReplaceAll(tc.name, " ", "-")
			env, _ := e.cli().json(2, "", "run", "--parent-session", parent, "--plan", file)
			if env.Error == nil || env.Error.Code != tc.code || !strings.Contains(env.Error.Message, tc.text) {
				t.Fatalf("error %+v, want %s with %q", env.Error, tc.code, tc.text)
			}
			code, out, errOut := e.cli().run("", "run", "--parent-session", parent, "--plan", file)
			if code != 2 || !strings.Contains(out+errOut, tc.text) {
				t.Fatalf("text mode: exit %d, want 2 and the reason %q\nstdout: %s\nstderr: %s", code, tc.text, out, errOut)
			}
			if listed, out := e.cli().json(0, "", "list", "--parent-session", parent); listed.Count != 0 {
				t.Fatalf("a refused plan is listed: %s", out)
			}
		})
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("%d model calls: a refused plan started a child", n)
	}
}

// TestPlanGateArgIsText: an argument with shell syntax reaches a gate
// command as its text and runs nothing; a cwd argument that leaves the
// plan's folder is refused at start (exit 2, INVALID_INPUT), no child runs.
func TestPlanGateArgIsText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("gate-arg", finalizeStep("done"))
	out, pwned := filepath.Join(t.TempDir(), "gate-arg.txt"), filepath.Join(t.TempDir(), "pwned")
	plan := api.Plan{Args: map[string]api.PlanArg{"x": {Required: true}}, Steps: []api.Step{
		{Key: "s1", Agent: "scout", Task: "[[script:gate-arg]] Look.", Gate: &api.Gate{Command: "printf '[%s]' {args.x} > " + out}},
	}}
	value := "1; touch " + pwned + "; $(touch " + pwned + ")"
	env := e.runPlan(0, writePlan(t, e, "gate-arg", plan), "--arg", "x="+value)
	if env.Status != "completed" {
		t.Fatalf("plan %s: %+v", env.Status, env.Error)
	}
	if got := fileText(t, out); got != "["+value+"]" {
		t.Fatalf("the gate got %q, want the value as one word", got)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("the argument ran a command in the gate")
	}

	before := len(e.model.Requests())
	up := api.Plan{Args: map[string]api.PlanArg{"dir": {Required: true}}, Steps: []api.Step{
		{Key: "s1", Agent: "scout", Task: "[[script:never]] Look.", Cwd: "{args.dir}"},
	}}
	refused := e.runPlan(2, writePlan(t, e, "cwd-arg", up), "--arg", "dir=../..")
	if refused.Error == nil || refused.Error.Code != errcode.InvalidInput || !strings.Contains(refused.Error.Message, "`..` part") {
		t.Fatalf("error %+v, want INVALID_INPUT naming the `..` part", refused.Error)
	}
	if n := len(e.model.Requests()); n != before {
		t.Fatalf("%d model calls: a refused plan started a child", n-before)
	}
}
