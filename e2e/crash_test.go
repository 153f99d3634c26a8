package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/workflows"
)

// startWorkerProcess runs `subagents worker` against the shared server as a
// process of its own, so that a test can kill it like a crash would.
func (e *env) startWorkerProcess() *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(subagentsBinary(e.t), "worker",
		"--address", shared.server.FrontendAddress(), "--namespace", shared.server.Namespace(),
		"--task-queue", e.taskQueue, "--data-dir", e.dataDir)
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
// scratch.
func TestWorkerKilledMidRun(t *testing.T) {
	e := newEnv(t)
	started := filepath.Join(e.workDir, "started.txt")
	e.model.Script("killed",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo $PPID > started.txt; sleep 120"}`}}},
		finalizeStep("survived a worker crash"),
	)
	first := e.startWorkerProcess()
	in := e.sessionInput("[[script:killed]] Work for a long time.")
	run := e.startSession(shared.client, in)
	waitForFile(t, started)

	piPid := readPid(t, started)
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", piPid)); !strings.Contains(string(comm), "node") && !strings.Contains(string(comm), "pi") {
		t.Fatalf("the bash tool's parent is %q, not pi", comm)
	}

	killedAt := time.Now()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.startWorkerProcess()
	var res workflows.SessionResult
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
	// The pi the killed worker started did not run on beside the new attempt.
	if syscall.Kill(piPid, 0) == nil {
		t.Fatalf("the pi (pid %d) of the killed worker is still running", piPid)
	}
}

// TestDevKilledMidRun kills `subagents dev` (server and worker in one
// process) with SIGKILL while a child runs, and starts it again on the same
// database: the session goes on and completes.
func TestDevKilledMidRun(t *testing.T) {
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
	c := dialAddress(t, fmt.Sprintf("127.0.0.1:%d", port))
	in := e.sessionInput("[[script:dev-killed]] Work through a crash.")
	e.startSession(c, in)
	waitForFile(t, started)
	c.Close()

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	p = e.startDev(args...)
	p.waitReady(t)
	c = dialAddress(t, fmt.Sprintf("127.0.0.1:%d", port))
	defer c.Close()
	var res workflows.SessionResult
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

func dialAddress(t *testing.T, addr string) sdkclient.Client {
	t.Helper()
	c, err := sdkclient.Dial(sdkclient.Options{HostPort: addr, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
