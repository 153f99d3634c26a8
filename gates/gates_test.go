package gates

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
)

// procs are a worker's activities, whose reaper starts the gates (this
// test binary is its own reaper, as every binary that links activities).
func procs(t *testing.T) *activities.Activities {
	t.Helper()
	a, err := activities.New(activities.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// TestRunGateEndsItsLeftovers: what a gate put in the background does not
// outlive it, and a retry's heartbeat mark finds the command's processes.
func TestRunGateEndsItsLeftovers(t *testing.T) {
	dir := t.TempDir()
	a := &Activities{Procs: procs(t)}
	res, err := a.RunGate(context.Background(), api.GateInput{Command: "sleep 300 & echo $! > bg.pid; echo mark=$" + activities.ProcMarkEnv, Cwd: dir, TimeoutSeconds: 10, Step: "s"})
	if err != nil || !res.Passed() || res.Runs != 1 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if !strings.HasPrefix(res.Output, "mark=") || strings.TrimSpace(res.Output) == "mark=" {
		t.Fatalf("the command ran without the reaper's mark: output %q", res.Output)
	}
	b, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); running(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gate's background sleep (pid %d) outlived it", pid)
		}
	}
}

// running: pid exists and is not a zombie.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

func TestRunGate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("here"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", api.GateOutputChars+500) + "END"
	for _, tc := range []struct {
		name     string
		command  string
		timeout  int
		exit     int
		timedOut bool
		output   string
	}{
		{"passes in the step's folder", "cat marker", 10, 0, false, "here"},
		{"fails with its exit code and output", "echo 'FAIL: TestX' >&2; exit 3", 10, 3, false, "FAIL: TestX"},
		{"keeps the end of a long output", "printf '" + long + "'", 10, 0, false, "END"},
		{"is ended past its timeout", "echo started; sleep 30", 1, 0, true, "timed out after 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Activities{Procs: procs(t)}
			res, err := a.RunGate(context.Background(), api.GateInput{Command: tc.command, Cwd: dir, TimeoutSeconds: tc.timeout, Step: "s"})
			if err != nil {
				t.Fatal(err)
			}
			if res.TimedOut != tc.timedOut || (!tc.timedOut && res.ExitCode != tc.exit) {
				t.Fatalf("exit %d timedOut %v, want %d %v (output %q)", res.ExitCode, res.TimedOut, tc.exit, tc.timedOut, res.Output)
			}
			if !strings.Contains(res.Output, tc.output) {
				t.Fatalf("output %q lacks %q", res.Output, tc.output)
			}
			if n := len([]rune(res.Output)); n > api.GateOutputChars+1 {
				t.Fatalf("output is %d characters, over the cap", n)
			}
			if res.Passed() != (tc.exit == 0 && !tc.timedOut) {
				t.Fatalf("Passed() = %v", res.Passed())
			}
		})
	}
}

func TestRunGateMissingFolder(t *testing.T) {
	a := &Activities{Procs: procs(t)}
	_, err := a.RunGate(context.Background(), api.GateInput{Command: "true", Cwd: "/nonexistent/folder", TimeoutSeconds: 5, Step: "s"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/folder") {
		t.Fatalf("err = %v, want one naming the folder", err)
	}
}

// TestRunGateTrust: a project's saved plan runs its gate only where the
// worker's user trusts the project; the user's own plans always do.
func TestRunGateTrust(t *testing.T) {
	root, agentDir := t.TempDir(), t.TempDir()
	project := &api.PlanSource{Name: "check", File: filepath.Join(root, ".pi", "plans", "check.yaml"), Scope: "project"}
	global := &api.PlanSource{Name: "check", File: filepath.Join(agentDir, "plans", "check.yaml"), Scope: "global"}
	trust := func() {
		b := `{"subagents": {"trustedProjects": [` + strconv.Quote(root) + `]}}`
		if err := os.WriteFile(filepath.Join(agentDir, "subagents.json"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		source *api.PlanSource
		setup  func()
		denied bool
	}{
		{"an inline plan", nil, func() {}, false},
		{"the user's own saved plan", global, func() {}, false},
		{"an untrusted project's plan", project, func() {}, true},
		{"a trusted project's plan", project, trust, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			a := &Activities{AgentDir: agentDir, Procs: procs(t)}
			res, err := a.RunGate(context.Background(), api.GateInput{Command: "echo ran", Cwd: root, TimeoutSeconds: 5, Step: "s", Source: tc.source})
			if tc.denied {
				if err == nil || !strings.Contains(err.Error(), "trustedProjects") || !strings.Contains(err.Error(), "PERMISSION_DENIED") && !strings.Contains(err.Error(), "Permission denied") {
					t.Fatalf("err = %v, want PERMISSION_DENIED naming trustedProjects", err)
				}
				return
			}
			if err != nil || !strings.Contains(res.Output, "ran") {
				t.Fatalf("res %+v err %v", res, err)
			}
		})
	}
}

// TestRunGateArgsAreText: a plan argument with shell syntax reaches the
// bound gate command as its text, in the environment, and runs nothing.
func TestRunGateArgsAreText(t *testing.T) {
	dir := t.TempDir()
	p := api.Plan{Args: map[string]api.PlanArg{"x": {}}, Steps: []api.Step{{Key: "s", Agent: "a", Task: "t", Gate: &api.Gate{Command: "printf '[%s]' {args.x}"}}}}
	evil := "1; touch pwned; $(touch pwned2) `touch pwned3` * '\""
	bound, err := api.BindPlanArgs(p, map[string]string{"x": evil})
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Procs: procs(t)}
	res, err := a.RunGate(context.Background(), api.GateInput{Command: bound.Steps[0].Gate.Command, Cwd: dir, TimeoutSeconds: 10, Step: "s", Args: map[string]string{"x": evil}})
	if err != nil || !res.Passed() {
		t.Fatalf("res %+v err %v", res, err)
	}
	if res.Output != "["+evil+"]" {
		t.Fatalf("output %q, want the value as one word", res.Output)
	}
	for _, f := range []string{"pwned", "pwned2", "pwned3"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("the argument ran a command: %s exists", f)
		}
	}
}

// TestRunGateCountsRuns: Runs counts the command's starts, read back from
// the heartbeat a retry finds, not the attempt number; an error carries
// the count (none for a trust refusal or a start that failed at once).
func TestRunGateCountsRuns(t *testing.T) {
	dir, agentDir := t.TempDir(), t.TempDir()
	a := &Activities{AgentDir: agentDir, Procs: procs(t)}
	untrusted := &api.PlanSource{Name: "check", File: filepath.Join(dir, ".pi", "plans", "check.yaml"), Scope: "project"}
	for _, tc := range []struct {
		name string
		beat *gateBeat // the heartbeat an earlier attempt left, nil: none
		in   api.GateInput
		runs int
		err  bool
	}{
		{"a first attempt", nil, api.GateInput{Command: "true", Cwd: dir}, 1, false},
		{"a retry after one run", &gateBeat{Runs: 1}, api.GateInput{Command: "true", Cwd: dir}, 2, false},
		{"a retry after a beat without a count", &gateBeat{Pgid: 1}, api.GateInput{Command: "true", Cwd: dir}, 2, false},
		{"a start that fails after two runs", &gateBeat{Runs: 2}, api.GateInput{Command: "true", Cwd: "/nonexistent/folder"}, 2, true},
		{"a start that fails at once", nil, api.GateInput{Command: "true", Cwd: "/nonexistent/folder"}, 0, true},
		{"a trust refusal", nil, api.GateInput{Command: "true", Cwd: dir, Source: untrusted}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(a.RunGate)
			if tc.beat != nil {
				env.SetHeartbeatDetails(*tc.beat)
			}
			tc.in.Step, tc.in.TimeoutSeconds = "s", 10
			val, err := env.ExecuteActivity(a.RunGate, tc.in)
			if tc.err {
				var app *temporal.ApplicationError
				var n api.GateRunCount
				if !errors.As(err, &app) || app.Details(&n) != nil || n.Runs != tc.runs {
					t.Fatalf("err %v: runs %d, want %d", err, n.Runs, tc.runs)
				}
				return
			}
			var res api.GateResult
			if err != nil || val.Get(&res) != nil || res.Runs != tc.runs {
				t.Fatalf("res %+v err %v, want %d runs", res, err, tc.runs)
			}
		})
	}
}

// TestRunGateCountsItsRunBeforeItStarts: the run is recorded, through the
// worker's client (the server has it when the call returns), before the
// command starts, so that a worker killed a moment after the start leaves
// its retry the count; a start that fails takes the count back. Before,
// only the SDK's batched heartbeat after the start carried it, and a
// service SIGKILLed under load as the command began counted one run less
// than ran (TestPlanGateDiesWithService: "the gate ran 2 times; gateRuns
// says 1").
func TestRunGateCountsItsRunBeforeItStarts(t *testing.T) {
	dir := t.TempDir()
	var recorded []string
	p, err := activities.New(activities.Config{DataDir: t.TempDir(), Heartbeat: func(_ context.Context, _ []byte, details ...any) error {
		b := details[0].(gateBeat)
		_, statErr := os.Stat(filepath.Join(dir, "ran"))
		recorded = append(recorded, fmt.Sprintf("runs %d, command ran: %v", b.Runs, statErr == nil))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	a := &Activities{AgentDir: t.TempDir(), Procs: p}
	for _, tc := range []struct {
		name string
		in   api.GateInput
		want []string
	}{
		{"a run", api.GateInput{Command: "touch ran", Cwd: dir}, []string{"runs 1, command ran: false"}},
		{"a start that fails", api.GateInput{Command: "true", Cwd: "/nonexistent/folder"}, []string{"runs 1, command ran: false", "runs 0, command ran: false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recorded = nil
			_ = os.Remove(filepath.Join(dir, "ran"))
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(a.RunGate)
			tc.in.Step, tc.in.TimeoutSeconds = "s", 10
			_, _ = env.ExecuteActivity(a.RunGate, tc.in)
			if strings.Join(recorded, "; ") != strings.Join(tc.want, "; ") {
				t.Fatalf("recorded %q, want %q", recorded, tc.want)
			}
		})
	}
}
