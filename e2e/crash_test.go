package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// startWorkerProcess runs `subagents worker` against the shared server as a
// process of its own, so that a test can kill it like a crash would.
func (e *env) startWorkerProcess() *exec.Cmd {
	e.t.Helper()
	return e.startWorkerProcessAt(shared.server.FrontendAddress())
}

// startWorkerProcessAt runs the worker process against the server at addr;
// extra flags come last, so they override the harness's.
func (e *env) startWorkerProcessAt(addr string, extra ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(subagentsBinary(e.t), append([]string{"worker",
		"--address", addr, "--namespace", shared.server.Namespace(),
		"--task-queue", e.taskQueue, "--data-dir", e.dataDir,
		// Warm children, as subagents dev keeps: a kill must take them too.
		"--warm-pool", "2"}, extra...)...)
	cmd.Env = append(os.Environ(), e.cliEnv()...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		waitTreeGone(e.t, cmd.Process.Pid)
		if e.t.Failed() {
			e.t.Logf("worker output:\n%s", out)
		}
	})
	deadline := time.Now().Add(testTimeout)
	for !strings.Contains(out.String(), "worker polling task queue") {
		if time.Now().After(deadline) {
			e.t.Fatalf("worker did not start:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cmd
}

// TestWorkerKilledMidRun kills a worker process with SIGKILL while its child
// runs a tool: the pi it started goes away with it, and a new worker
// continues the same session to its result, without running the prompt from
// scratch. Twice: with a child started for the task, and with a warm child
// of the pool (whose session file was a link to its slot when the worker
// died: the next attempt settles it).
func TestWorkerKilledMidRun(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "warm"}[warm], func(t *testing.T) { workerKilledMidRun(t, warm) })
	}
}

func workerKilledMidRun(t *testing.T, warm bool) {
	e := newEnv(t)
	started := filepath.Join(e.workDir, "started.txt")
	// A tool that starts a process of its own session, out of reach of
	// pi's process tree: only the worker's reaper finds it.
	seconds := strconv.Itoa(3000 + os.Getpid()%1000)
	detached := "sleep\x00" + seconds + "\x00" // as /proc's cmdline holds it
	e.model.Script("killed",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo $$ > tool.txt; setsid sleep ` + seconds + ` >/dev/null 2>&1 & echo $PPID > started.txt; sleep 120"}`}}},
		finalizeStep("survived a worker crash"),
	)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort())
	first := e.startWorkerProcessAt(shared.server.FrontendAddress(), "--metrics-addr", metrics)
	if warm {
		// A task of the same kind teaches the pool; the next one takes the
		// child it starts.
		e.model.Script("teach", finalizeStep("taught"))
		if err := e.startSession(shared.client, e.sessionInput("[[script:teach]] Answer.")).Get(e.ctx(), nil); err != nil {
			t.Fatal(err)
		}
		url := "http://" + metrics + "/metrics"
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			page := httpGet(t, url)
			if n, _ := metricValue(page, "subagents_warm_pool_children"); n >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no warm children:\n%s", grepLines(page, "subagents_warm"))
			}
		}
	}
	in := e.sessionInput("[[script:killed]] Work for a long time.")
	run := e.startSession(shared.client, in)
	waitForFile(t, started)
	sessionFile := activities.SessionFile(e.dataDir, in.Cwd, in.Agent, in.SessionID)
	if info, err := os.Lstat(sessionFile); err != nil || (info.Mode()&os.ModeSymlink != 0) != warm {
		t.Fatalf("session file while the child ran: %v %v, want a link to a warm slot: %v", info, err, warm)
	}

	piPid := readPid(t, started)
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", piPid)); !strings.Contains(string(comm), "node") && !strings.Contains(string(comm), "pi") {
		t.Fatalf("the bash tool's parent is %q, not pi", comm)
	}

	for deadline := time.Now().Add(5 * time.Second); len(processesWith(detached)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tool's sleep %s did not start", seconds)
		}
	}
	killedAt := time.Now()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Nothing of the dead worker's child runs on, before any retry: its
	// reaper ended even what the tool started apart from pi.
	for deadline := time.Now().Add(5 * time.Second); len(processesWith(detached)) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed worker's tool left running: %v", processesWith(detached))
		}
	}
	e.startWorkerProcess()
	var res api.SessionResult
	if err := run.Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("recovered %s after the worker was killed", time.Since(killedAt).Round(100*time.Millisecond))
	turn := res.LastTurn.Result
	if turn.Output != "survived a worker crash" || !turn.Continued || turn.Attempt != 2 {
		t.Fatalf("output %q continued %v attempt %d", turn.Output, turn.Continued, turn.Attempt)
	}
	reqs := e.model.RequestsFor("killed")
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2: the prompt ran from scratch", len(reqs))
	}
	if got := reqs[1].Parsed.Messages[len(reqs[1].Parsed.Messages)-1].Text(); got != activities.ContinuationPrompt {
		t.Fatalf("the new worker sent %q, want the continuation prompt", got)
	}
	// Both attempts' messages are in one ordinary file.
	if info, err := os.Lstat(sessionFile); err != nil || !info.Mode().IsRegular() {
		t.Fatalf("session file after the recovery: %v %v", info, err)
	}
	if kinds := strings.Join(entryKinds(t, sessionFile), " "); strings.Count(kinds, "message:user") != 2 || !strings.Contains(kinds, "message:toolResult") {
		t.Fatalf("session file entries: %s", kinds)
	}
	// The pi the killed worker started did not run on beside the new attempt.
	if syscall.Kill(piPid, 0) == nil {
		t.Fatalf("the pi (pid %d) of the killed worker is still running", piPid)
	}
	// Nor did its tool: the retry ended what the dead attempt left.
	toolPid := readPid(t, filepath.Join(e.workDir, "tool.txt"))
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", toolPid)); err == nil && !strings.Contains(string(stat), ") Z ") {
		t.Fatalf("the tool (pid %d) of the killed worker's pi is still running: %s", toolPid, stat)
	}
}

// TestDevKilledMidRun kills `subagents dev` (server and worker in one
// process) with SIGKILL while a child runs, and starts it again on the same
// database: the session goes on and completes.
func TestDevKilledMidRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := filepath.Join(e.workDir, "started.txt")
	e.model.Script("dev-killed",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo go > started.txt; sleep 120"}`}}},
		finalizeStep("survived a machine-wide crash"),
	)
	port := freePort()
	args := []string{
		"--port", strconv.Itoa(port), "--headless", "--db-filename", filepath.Join(t.TempDir(), "temporal.db"),
		"--data-dir", e.dataDir, "--task-queue", e.taskQueue,
	}
	p := e.startDev(args...)
	p.waitReady(t)
	c := e.dialAddress(fmt.Sprintf("127.0.0.1:%d", port))
	in := e.sessionInput("[[script:dev-killed]] Work through a crash.")
	e.startSession(c, in)
	waitForFile(t, started)
	c.Close()

	p = e.crashRestart(p, args...)
	c = e.dialAddress(fmt.Sprintf("127.0.0.1:%d", port))
	defer c.Close()
	var res api.SessionResult
	if err := c.GetWorkflow(e.ctx(), in.SessionID, "").Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	turn := res.LastTurn.Result
	if turn.Output != "survived a machine-wide crash" || !turn.Continued {
		t.Fatalf("output %q continued %v attempt %d", turn.Output, turn.Continued, turn.Attempt)
	}
	if n := len(e.model.RequestsFor("dev-killed")); n != 2 {
		t.Fatalf("model saw %d requests, want 2", n)
	}
	p.stop(t)
}

// TestServerOutageKeepsChild stops the Temporal server (a `subagents dev`
// of its own, SIGKILLed) for longer than the heartbeat timeout while a child
// runs a tool on a worker process that stays up, then starts it again on
// the same database: the child is never stopped, the task completes, and no
// model call is made twice.
func TestServerOutageKeepsChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := filepath.Join(e.workDir, "started.txt")
	e.model.Script("outage",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo go > started.txt; sleep 10; echo slept"}`}}},
		finalizeStep("rode through the outage"),
	)
	port := freePort()
	// The server's own worker polls a queue nobody uses: the worker under
	// test is a process of its own that stays up through the outage.
	serverData := t.TempDir()
	args := []string{
		"--port", strconv.Itoa(port), "--headless", "--db-filename", filepath.Join(t.TempDir(), "temporal.db"),
		"--data-dir", serverData, "--task-queue", e.taskQueue + "-unused", "--warm-pool", "0",
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	server := e.startDev(args...)
	server.waitReady(t)
	// The worker under test, in a data dir of its own, is given the
	// server's key as a user gives it to a worker beside the service.
	copyKey(t, serverData, e.dataDir)
	e.startWorkerProcessAt(addr)
	c := e.dialAddress(addr)
	in := e.sessionInput("[[script:outage]] Work through a server outage.")
	e.startSession(c, in)
	waitForFile(t, started)
	c.Close()

	if err := server.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-server.done
	// Down past the heartbeat timeout (5 s): the attempt is lost to the
	// server, which schedules a retry as soon as it is back.
	time.Sleep(7 * time.Second)
	server = e.startDev(args...)
	server.waitReady(t)
	c = e.dialAddress(addr)
	defer c.Close()
	var res api.SessionResult
	if err := c.GetWorkflow(e.ctx(), in.SessionID, "").Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	turn := res.LastTurn.Result
	if turn.Output != "rode through the outage" || turn.Error != nil {
		t.Fatalf("output %q error %+v", turn.Output, turn.Error)
	}
	reqs := e.model.RequestsFor("outage")
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2 (the tool call, the finalize): a model call was repeated", len(reqs))
	}
	// The one child ran its tool to the end: its output reached the model.
	if last := reqs[1].Parsed.Messages[len(reqs[1].Parsed.Messages)-1].Text(); !strings.Contains(last, "slept") {
		t.Fatalf("the finalize request saw %q, not the tool's whole output", last)
	}
	t.Logf("turn ended on attempt %d (recovered %v, continued %v)", turn.Attempt, turn.Recovered, turn.Continued)
	server.stop(t)
}

func (e *env) dialAddress(addr string) sdkclient.Client {
	e.t.Helper()
	return dialWithKeyOf(e.t, addr, e.dataDir)
}

// copyKey puts the API key of the service of data dir from into data dir to.
func copyKey(t *testing.T, from, to string) {
	t.Helper()
	key, err := os.ReadFile(connection.KeyPath(from))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(connection.KeyPath(to), key, 0o600); err != nil {
		t.Fatal(err)
	}
}

// dialWithKeyOf connects to the Temporal at addr as this project's callers
// do: with the API key of the local service of dataDir, when it made one
// (a `subagents dev` refuses callers without it).
func dialWithKeyOf(t *testing.T, addr, dataDir string) sdkclient.Client {
	t.Helper()
	c, err := connection.Settings{Address: addr, DataDir: dataDir}.Dial(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// chaosRounds is 3 in `make test`; `make chaos` runs the long form.
var chaosRounds = flag.Int("chaos-rounds", 3, "rounds of TestChaosWorkerKills")

// TestChaosWorkerKills is the short form of the chaos suite: in each round a
// 4-task delegation runs real pi children that call a tool, its worker is
// killed with SIGKILL at a random moment and started again. Every task must
// complete with its own result, reported to the delegation once; every
// session file must be there; and no process of a killed attempt may be
// left running.
func TestChaosWorkerKills(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.cli()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	var kills []string
	began := time.Now()
	for round := range *chaosRounds {
		marker := fmt.Sprintf("chaos-%d-%d", seed, round)
		var w *exec.Cmd
		killAfter := time.Duration(300+rng.Intn(2700)) * time.Millisecond
		e.chaosRound(chaos{c: c, marker: marker, tasks: chaosTasks, killAfter: killAfter,
			start: func() { w = e.startWorkerProcess() },
			kill: func() {
				if err := w.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			},
			restart: func() { e.startWorkerProcess() },
			history: func(id string) []*historypb.HistoryEvent { return historyOf(t, shared.client, id) },
		})
		t.Logf("round %d: killed after %s, all %d tasks completed once", round, killAfter, chaosTasks)
		kills = append(kills, killAfter.Round(time.Millisecond).String())
	}
	reportChaos(t, fmt.Sprintf("### Worker killed mid-delegation\n\n`make chaos` (%s): %d rounds of a 4-task delegation of real pi children (each calls bash for 1.5 s, then finalizes) whose `subagents worker` process was SIGKILLed and started again, in %s. "+
		"Every round: all 4 tasks completed with their own result in turn 1, the delegation got exactly 4 task-done signals, every session file was there, no process of a killed attempt ran on. Kills after: %s.",
		time.Now().UTC().Format("2006-01-02"), *chaosRounds, time.Since(began).Round(time.Second), strings.Join(kills, ", ")))
}

// chaosTasks is how many tasks a chaos round's delegation holds.
const chaosTasks = 4

// chaos is one round of a chaos suite: a delegation of tasks real pi
// children (each calls bash for 1.5 s, then finalizes), started through c
// once start has started what runs it; kill stops that at a moment and
// restart starts it again. history reads a workflow's history from the
// server the round runs on.
type chaos struct {
	c                    *cli
	marker               string
	tasks                int
	killAfter            time.Duration
	start, kill, restart func()
	history              func(id string) []*historypb.HistoryEvent
}

// run runs the round and checks that it happened exactly once: every task
// completed once with its own result in turn 1, the delegation got one
// task-done signal per task, each task's session workflow completed one
// RunPi and its pi session file holds one subagent_finalize result, and no
// process of the killed run is left. It returns the finished envelope.
func (e *env) chaosRound(r chaos) client.Envelope {
	t := e.t
	t.Helper()
	var specs []string
	for i := range r.tasks {
		name := fmt.Sprintf("%s-%d", r.marker, i)
		// A kill can land after the model asked for subagent_finalize and
		// before pi ran it: the continued run is then asked again, and
		// finalizes again, as a real model told to go on would.
		finalize := finalizeStep("result of " + name)
		finalize.Repeat = true
		e.model.Script(name,
			scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: fmt.Sprintf(`{"command":"sleep 1.5 # %s"}`, name)}}},
			finalize)
		specs = append(specs, fmt.Sprintf(`{"name":"t%d","prompt":"[[script:%s]] Work.","cwd":%q,"model":%q}`, i, name, e.workDir, scriptedmodel.ModelRef))
	}
	r.start()
	started, _ := r.c.json(0, `{"tasks":[`+strings.Join(specs, ",")+`]}`, "start", "--input", "-")
	time.Sleep(r.killAfter)
	r.kill()
	r.restart()
	done, out := r.c.json(0, "", "wait", "--timeout", "3m", started.DelegationID)
	if !done.Done || done.Status != "completed" {
		t.Fatalf("%s (killed after %s): %s", r.marker, r.killAfter, out)
	}
	for i, it := range done.Items {
		if want := fmt.Sprintf("result of %s-%d", r.marker, i); it.Output != want || it.Turn != 1 {
			t.Fatalf("%s task %d: output %q turn %d, want %q in turn 1", r.marker, i, it.Output, it.Turn, want)
		}
		if n := finalizeResults(t, it.SessionFile); n != 1 {
			t.Fatalf("%s task %d: %d subagent_finalize results in %s, want 1", r.marker, i, n, it.SessionFile)
		}
		if n := completedActivities(r.history(it.TaskID), api.RunPiActivityName); n != 1 {
			t.Fatalf("%s task %d: %d completed RunPi in the session's history, want 1 (one turn)", r.marker, i, n)
		}
	}
	if n := taskEnds(r.history(started.DelegationID)); n != r.tasks {
		t.Fatalf("%s: the delegation was told of %d task ends, want %d (one each)", r.marker, n, r.tasks)
	}
	if left := processesWith(r.marker); len(left) > 0 {
		t.Fatalf("%s: processes of the killed run still run: %v", r.marker, left)
	}
	return done
}

// historyOf reads a workflow's whole history through c.
func historyOf(t *testing.T, c sdkclient.Client, id string) []*historypb.HistoryEvent {
	t.Helper()
	it := c.GetWorkflowHistory(e2eCtx(t), id, "", false, 0)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// signalsNamed counts the signals called name in a history.
func signalsNamed(events []*historypb.HistoryEvent, name string) int {
	n := 0
	for _, ev := range events {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == name {
			n++
		}
	}
	return n
}

// taskEnds counts how often a delegation's history was told that one of
// its tasks ended: a session's TaskDone signal, or (version 5) the close of
// the session's run with its turn.
func taskEnds(events []*historypb.HistoryEvent) int {
	n := signalsNamed(events, api.TaskDoneSignal)
	for _, ev := range events {
		if ev.GetChildWorkflowExecutionCompletedEventAttributes() != nil || ev.GetChildWorkflowExecutionFailedEventAttributes() != nil ||
			ev.GetChildWorkflowExecutionCanceledEventAttributes() != nil {
			n++
		}
	}
	return n
}

// completedActivities counts the activities of type name that completed in
// a history (failed, timed-out and retried attempts do not count).
func completedActivities(events []*historypb.HistoryEvent, name string) int {
	kind := map[int64]string{}
	n := 0
	for _, ev := range events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			kind[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && kind[a.GetScheduledEventId()] == name {
			n++
		}
	}
	return n
}

// finalizeResults counts the subagent_finalize tool results in a pi session
// file: the calls pi ran, whatever the model asked.
func finalizeResults(t *testing.T, sessionFile string) int {
	t.Helper()
	b, err := os.ReadFile(sessionFile)
	if err != nil {
		t.Fatalf("session file: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		var entry struct {
			Type    string `json:"type"`
			Message struct {
				Role     string `json:"role"`
				ToolName string `json:"toolName"`
			} `json:"message"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Type == "message" &&
			entry.Message.Role == "toolResult" && entry.Message.ToolName == api.FinalizeToolName {
			n++
		}
	}
	return n
}

func e2eCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// processesWith lists the processes whose command line holds s.
func processesWith(s string) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, d.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// devKills is 1 in `make test`; `make chaos` runs 5.
var devKills = flag.Int("dev-kills", 1, "rounds of TestChaosDevKills")

// TestChaosDevKills is the chaos suite for the whole machine: a 4-task
// delegation of real pi children runs on `subagents dev` (server, UI-less,
// worker, one database file), which is SIGKILLed at a random moment and
// started again on the same file. Every task completes with its own result,
// reported once; every session file is there; no child of the killed
// process runs on.
func TestChaosDevKills(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	port := freePort()
	address := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{
		"--port", strconv.Itoa(port), "--headless", "--db-filename", filepath.Join(t.TempDir(), "temporal.db"),
		"--data-dir", e.dataDir, "--task-queue", e.taskQueue,
	}
	c := &cli{e: e, ids: map[string]string{}, args: []string{"--address", address, "--task-queue", e.taskQueue}}
	var kills []string
	began := time.Now()
	for round := range *devKills {
		var p *devProcess
		killAfter := time.Duration(300+rng.Intn(2700)) * time.Millisecond
		e.chaosRound(chaos{c: c, marker: fmt.Sprintf("devchaos-%d-%d", seed, round), tasks: chaosTasks, killAfter: killAfter,
			start: func() { p = e.startDev(args...); p.waitReady(t) },
			kill: func() {
				if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				<-p.done
			},
			restart: func() { p = e.startDev(args...); p.waitReady(t) },
			history: func(id string) []*historypb.HistoryEvent {
				tc := e.dialAddress(address)
				defer tc.Close()
				return historyOf(t, tc, id)
			},
		})
		p.stop(t)
		t.Logf("round %d: subagents dev killed after %s, all %d tasks completed once", round, killAfter, chaosTasks)
		kills = append(kills, killAfter.Round(time.Millisecond).String())
	}
	reportChaos(t, fmt.Sprintf("### `subagents dev` killed mid-delegation\n\n`make chaos` (%s): %d rounds of the same 4-task delegation on `subagents dev` (server and worker in one process, one database file), SIGKILLed and started again on the same file, in %s. "+
		"Every round: all 4 tasks completed once with their own result, every session file was there, no child of the killed process ran on. Kills after: %s.",
		time.Now().UTC().Format("2006-01-02"), *devKills, time.Since(began).Round(time.Second), strings.Join(kills, ", ")))
}
