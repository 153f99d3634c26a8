package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// refusedSchedule is a schedule request that a fire would fail on, and
// what its refusal says: its code, and words of its reason.
type refusedSchedule struct {
	name string
	args []string
	code errcode.Code
	why  string
}

// expectRefused runs each request as `subagents schedule` in the test's
// folder with env: exit 2 and the code with --json, and the reason on
// stderr for people.
func (e *env) expectRefused(env []string, cases []refusedSchedule) {
	e.t.Helper()
	if env == nil {
		env = e.parentEnv()
	}
	for _, c := range cases {
		out, code := e.scheduleCmd(env, c.args...)
		if code != errcode.ExitBadInput || out.Error == nil || out.Error.Code != c.code || !strings.Contains(out.Error.Message, c.why) {
			e.t.Errorf("%s: exit %d, error %+v; want exit 2, %s saying %q", c.name, code, out.Error, c.code, c.why)
			continue
		}
		exit, stdout, stderr := runSubagentsIn(e.t, e.workDir, env, append([]string{"schedule"}, c.args...)...)
		if exit != errcode.ExitBadInput || !strings.Contains(stderr, c.why) {
			e.t.Errorf("%s, for people: exit %d, stdout %q, stderr %q; want exit 2 and the reason (%q)", c.name, exit, stdout, stderr, c.why)
		}
	}
}

// TestScheduleCreateChecksWhatAFireWould: schedule create refuses, before
// anything is made, what would fail at every fire or never fire: an
// unknown agent (a task's, a batch's, a plan step's), a saved plan's
// unknown or missing argument, an end before the first fire, a cron field
// out of range, a date no calendar reaches. Each is exit 2 with its code
// and its reason, for people too; the folder has no schedule after them.
// Those that need no service are refused the same with the service down.
// An update is checked the same way and leaves the schedule as it was.
func TestScheduleCreateChecksWhatAFireWould(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	plans := filepath.Join(e.agentDir, "plans")
	if err := os.MkdirAll(plans, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plans, "nightly-review.yaml"), []byte("args:\n  file: {required: true}\nsteps:\n  - task: \"Review {args.file}.\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	batch := filepath.Join(t.TempDir(), "tasks.json")
	if err := os.WriteFile(batch, []byte(`{"tasks": [{"prompt": "Look."}, {"prompt": "Look too.", "profile": "nosuchagent"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := writePlan(t, e, "unknown-step-agent", api.Plan{Name: "unknown-step-agent", Steps: []api.Step{
		{Key: "look", Agent: "scout", Task: "Look."},
		{Key: "judge", Agent: "nosuchagent", Task: "Judge."},
	}})

	offline := []refusedSchedule{
		{name: "a saved plan's unknown argument", args: []string{"create", "--every", "1h", "--plan", "nightly-review", "--arg", "file=cli.go", "--arg", "nosucharg=1"}, code: errcode.InvalidInput, why: "nosucharg"},
		{name: "a saved plan's missing argument", args: []string{"create", "--every", "1h", "--plan", "nightly-review"}, code: errcode.InvalidInput, why: "file"},
		{name: "at, its end before it", args: []string{"create", "--at", "10m", "--end", "5m", "Look."}, code: errcode.InvalidInput, why: "never fire"},
		{name: "every, its end before the first", args: []string{"create", "--every", "1h", "--end", "30m", "Look."}, code: errcode.InvalidInput, why: "never fire"},
		{name: "a cron hour out of range", args: []string{"create", "--cron", "0 25 * * *", "Look."}, code: errcode.InvalidInput, why: "hour"},
		{name: "a cron weekday out of range", args: []string{"create", "--cron", "0 9 * * 8", "Look."}, code: errcode.InvalidInput, why: "day-of-week"},
		{name: "a cron date that never comes", args: []string{"create", "--cron", "0 9 31 2 *", "Look."}, code: errcode.InvalidInput, why: "never fires"},
		{name: "a calendar year Temporal does not read", args: []string{"create", "--calendar", "year=2150", "Look."}, code: errcode.InvalidInput, why: "2000 to 2100"},
	}
	withAgents := []refusedSchedule{
		{name: "an unknown agent", args: []string{"create", "--every", "1h", "--agent", "nosuchagent", "Look."}, code: errcode.UnknownAgent, why: "nosuchagent"},
		{name: "an unknown agent in a batch", args: []string{"create", "--every", "1h", "--input", batch}, code: errcode.UnknownAgent, why: "tasks[1]"},
		{name: "a plan step's unknown agent", args: []string{"create", "--every", "1h", "--plan", plan}, code: errcode.UnknownAgent, why: `step "judge"`},
	}
	e.expectRefused(nil, append(withAgents, offline...))
	if listed := e.mustSchedule(nil, "list", "--cwd", e.workDir); len(listed.Schedules) != 0 {
		t.Fatalf("refused schedules were made: %+v", listed.Schedules)
	}

	// With no service at all: what needs none is refused as bad input, not
	// as the service being down.
	down := append(e.cliEnv(), fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", freePort()), "SUBAGENTS_DATA_DIR="+t.TempDir())
	e.expectRefused(down, offline)

	// An update is checked as a create is, and changes nothing it refuses.
	id := scheduleID("checked")
	e.mustSchedule(nil, "create", "--id", id, "--every", "1h", "--name", "checked", "Look.")
	e.expectRefused(nil, []refusedSchedule{
		{name: "update: an unknown agent", args: []string{"update", id, "--agent", "nosuchagent", "Look again."}, code: errcode.UnknownAgent, why: "nosuchagent"},
		{name: "update: an end before the next fire", args: []string{"update", id, "--end", "30m"}, code: errcode.InvalidInput, why: "never fire"},
		{name: "update: a cron minute out of range", args: []string{"update", id, "--cron", "61 9 * * *"}, code: errcode.InvalidInput, why: "minute"},
		{name: "update: a saved plan's unknown argument", args: []string{"update", id, "--plan", "nightly-review", "--arg", "file=x", "--arg", "nosucharg=1"}, code: errcode.InvalidInput, why: "nosucharg"},
	})
	s := e.mustSchedule(nil, "describe", id).Schedules[0]
	if s.Spec != "every 1h" || s.End != nil || s.Kind != "delegation" || s.Name != "checked" {
		t.Fatalf("refused updates changed the schedule: %+v", s)
	}
	e.mustSchedule(nil, "delete", id)
}

// TestScheduleFromPiChecksFirst: the task tool's op "schedule" is checked
// as the command is: a create whose task names an unknown agent, and one
// whose end comes before its first fire, are tool errors with their codes
// and reasons, and the folder has no schedule after them.
func TestScheduleFromPiChecksFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	op := func(schedule map[string]any) scriptedmodel.Step {
		return call("task", map[string]any{"op": "schedule", "schedule": schedule})
	}
	e.model.Script("pi-bad-schedules",
		op(map[string]any{"action": "create", "every": "1h", "tasks": []map[string]string{{"prompt": "Read the logs.", "agent": "nosuchagent"}}}),
		op(map[string]any{"action": "create", "at": "10m", "end": "5m", "tasks": []map[string]string{{"prompt": "Read the logs."}}}),
		scriptedmodel.Step{Text: "Both refused."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:pi-bad-schedules]] Schedule a log check.")
	p.wait(t)
	ends := toolEnds(p, "task")
	if len(ends) != 2 {
		t.Fatalf("task ended %d times, want 2", len(ends))
	}
	for i, want := range []struct {
		code errcode.Code
		why  string
	}{{errcode.UnknownAgent, "nosuchagent"}, {errcode.InvalidInput, "never fire"}} {
		if end := ends[i]; !end.IsError || !strings.Contains(end.Text, string(want.code)) || !strings.Contains(end.Text, want.why) {
			t.Errorf("call %d: error %v, text %q; want an error with %s saying %q", i+1, end.IsError, end.Text, want.code, want.why)
		}
	}
	if listed := e.mustSchedule(nil, "list", "--cwd", e.workDir); len(listed.Schedules) != 0 {
		t.Fatalf("refused schedules were made: %+v", listed.Schedules)
	}
}

// TestStoppedServiceStaysStopped: a folder has a schedule whose run left
// a result, and the user stops the service (`subagents stop`). A pi then
// started there, which delegates nothing, starts nothing: the service
// stays stopped and the result waits. Once an explicit command starts the
// service (`subagents dev`), the folder's next pi receives it, once.
func TestStoppedServiceStaysStopped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.newLocalWorld()
	env := append(e.parentEnv(), e.parentEnvExtra...)
	e.model.Script("stopped-task", finalizeStep("the logs are clean"))
	e.model.Script("stopped-hi", scriptedmodel.Step{Text: "Hi."})
	e.model.Script("stopped-later", scriptedmodel.Step{Text: "Read it."})

	// A delegation starts the service, as for any new user.
	e.startParent("json", filepath.Join(t.TempDir(), "first.jsonl"), e.scriptDelegation("wake", "the service is up")).wait(t)
	e.checkDelegation("wake", "the service is up")
	if len(w.devProcesses()) != 1 {
		t.Fatalf("the delegation did not start the service: %v", w.devProcesses())
	}
	id := scheduleID("stopped")
	e.mustSchedule(env, "create", "--id", id, "--every", "1h", "[[script:stopped-task]] Scan the logs.")
	e.mustSchedule(env, "trigger", id)
	run := e.waitForSchedule(env, id, "a finished run", func(s client.ScheduleItem) bool { n, idle := finishedRuns(s); return n == 1 && idle }).Runs[0]
	if run.Status != "completed" || run.ResultID == "" {
		t.Fatalf("run %+v", run)
	}

	if code, stdout, stderr := runSubagentsIn(t, e.workDir, env, "stop"); code != 0 {
		t.Fatalf("subagents stop: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if procs := w.devProcesses(); len(procs) != 0 {
		t.Fatalf("the service runs after subagents stop: %v", procs)
	}

	quiet := filepath.Join(t.TempDir(), "quiet.jsonl")
	e.startParent("json", quiet, "[[script:stopped-hi]] Hi.").wait(t)
	if procs := w.devProcesses(); len(procs) != 0 {
		t.Fatalf("a pi that delegated nothing started the stopped service (dev processes %v): its schedules fire again", procs)
	}
	if got := deliveredResults(t, quiet); len(got) != 0 {
		t.Fatalf("the pi received %v with the service stopped", got)
	}

	e.startLocalDev(w, env)
	later := filepath.Join(t.TempDir(), "later.jsonl")
	e.startParent("json", later, "[[script:stopped-later]] Anything new?").wait(t)
	if got := deliveredResults(t, later); len(got) != 1 || got[0] != run.DelegationID {
		t.Fatalf("once the service runs, the folder's pi received %v, want the waiting result %s once", got, run.DelegationID)
	}
	e.mustSchedule(env, "delete", id)
}

// startLocalDev starts `subagents dev` for w as a person would from a
// shell (the extension starts it the same way), and waits until its
// socket answers; the world's cleanup stops it.
func (e *env) startLocalDev(w localWorld, env []string) {
	t := e.t
	t.Helper()
	host, port, err := net.SplitHostPort(w.address)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(t.TempDir(), "dev.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(subagentsBinary(t), "dev", "--data-dir", w.dataDir, "--ip", host, "--port", port)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = w.dataDir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Stopped as the world's cleanup stops it (that one runs after
		// this), then reaped; ended by its pid if it did not stop.
		w.stopService(t)
		select {
		case <-exited:
		case <-time.After(testTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(2 * testTimeout)
	for {
		if c, err := net.Dial("unix", filepath.Join(w.dataDir, "subagents.sock")); err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("subagents dev exited before its socket answered:\n%s", b)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("subagents dev did not answer on its socket")
		}
	}
}
