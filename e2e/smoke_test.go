package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/worker/devserver"
)

// sessionInput is a one-turn session that completes when its turn ends.
func (e *env) sessionInput(prompt string) api.SessionInput {
	return api.SessionInput{
		SessionID:      uuid.NewString(),
		Agent:          "smoke",
		Prompt:         prompt,
		Cwd:            e.workDir,
		Child:          api.RunPiInput{Model: scriptedmodel.ModelRef},
		IdleTTLSeconds: -1,
	}
}

func (e *env) startSession(c sdkclient.Client, in api.SessionInput) sdkclient.WorkflowRun {
	e.t.Helper()
	run, err := c.ExecuteWorkflow(e.ctx(), sdkclient.StartWorkflowOptions{
		ID:        in.SessionID,
		TaskQueue: e.taskQueue,
	}, api.SessionWorkflowName, in)
	if err != nil {
		e.t.Fatalf("start session: %v", err)
	}
	return run
}

// TestSmokeRealPiThroughTemporal runs one session workflow whose activity
// runs the real pi against the scripted model, and checks what came back and
// what the model was sent.
func TestSmokeRealPiThroughTemporal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("smoke", scriptedmodel.Step{Text: "Hello from the scripted model."})
	e.startWorker(shared.client)

	in := e.sessionInput("[[script:smoke]] Say hello.")
	// A profile with finalize: false: the final assistant text is the result.
	in.Child.NoFinalize = true
	var res api.SessionResult
	if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
		t.Fatalf("session: %v", err)
	}

	turn := res.LastTurn.Result
	if turn.Error != nil {
		t.Fatalf("turn failed: %+v", turn.Error)
	}
	if turn.Output != "Hello from the scripted model." || turn.ExitCode != 0 || turn.StopReason != "stop" {
		t.Fatalf("turn = output %q exit %d stop %q", turn.Output, turn.ExitCode, turn.StopReason)
	}
	if turn.Usage.Turns != 1 || turn.Usage.Input != 100 || turn.Usage.Output != 20 || turn.Usage.Cost <= 0 {
		t.Fatalf("usage = %+v", turn.Usage)
	}
	if _, err := os.Stat(turn.SessionFile); err != nil {
		t.Fatalf("session file: %v", err)
	}
	if !strings.Contains(turn.SessionFile, "smoke_"+in.SessionID+".jsonl") {
		t.Fatalf("session file %s does not follow <agent>_<sessionId>.jsonl", turn.SessionFile)
	}

	reqs := e.model.RequestsFor("smoke")
	if len(reqs) != 1 {
		t.Fatalf("model saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || !r.Parsed.Stream || r.Parsed.Model != scriptedmodel.ModelID {
		t.Fatalf("request: path %s stream %v model %q", r.Path, r.Parsed.Stream, r.Parsed.Model)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer scripted-model-key" {
		t.Fatalf("Authorization = %q", got)
	}
	last := r.Parsed.Messages[len(r.Parsed.Messages)-1]
	if last.Role != "user" || last.Text() != in.Prompt {
		t.Fatalf("last message = %s %q, want the prompt", last.Role, last.Text())
	}
	recordHistory(t, shared.client, in.SessionID, "one-turn")
}

// TestEmbeddedServerIsDurable stops the embedded server and starts it again
// on the same database file: the finished workflow is still in visibility
// with its result, and one started before the restart runs to completion.
func TestEmbeddedServerIsDurable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("durable", scriptedmodel.Step{Text: "Survived."})
	db := t.TempDir() + "/temporal.db"

	start := func() (*devserver.Server, sdkclient.Client) {
		srv, err := devserver.Start(e.ctx(), devserver.Options{
			Port: freePort(), UIPort: -1, DBFile: db,
			SearchAttributes: api.SearchAttributes(), Logger: testLogger(),
		})
		if err != nil {
			t.Fatalf("start server on %s: %v", db, err)
		}
		c, err := dial(srv)
		if err != nil {
			srv.Stop()
			t.Fatal(err)
		}
		return srv, c
	}

	srv, c := start()
	stopWorker := e.startWorker(c)
	finished := e.sessionInput("[[script:durable]] Finish before the restart.")
	finished.Child.NoFinalize = true
	var before api.SessionResult
	if err := e.startSession(c, finished).Get(e.ctx(), &before); err != nil {
		t.Fatal(err)
	}
	stopWorker()
	// Started with no worker polling: it is still running when the server stops.
	pending := e.sessionInput("[[script:durable]] Finish after the restart.")
	pending.Child.NoFinalize = true
	e.startSession(c, pending)
	c.Close()
	srv.Stop()

	srv, c = start()
	defer srv.Stop()
	defer c.Close()

	resp, err := c.ListWorkflow(e.ctx(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", finished.SessionID),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Executions) != 1 || resp.Executions[0].Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("finished workflow after restart: %v", resp.Executions)
	}
	var after api.SessionResult
	if err := c.GetWorkflow(e.ctx(), finished.SessionID, "").Get(e.ctx(), &after); err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, after), mustJSON(t, before); a != b {
		t.Fatalf("result changed across the restart:\nbefore %s\nafter  %s", b, a)
	}

	e.startWorker(c)
	var res api.SessionResult
	if err := c.GetWorkflow(e.ctx(), pending.SessionID, "").Get(e.ctx(), &res); err != nil {
		t.Fatalf("pending workflow after restart: %v", err)
	}
	if res.LastTurn.Result.Output != "Survived." {
		t.Fatalf("pending workflow output %q", res.LastTurn.Result.Output)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCrashedAttemptContinuesSession stops the worker while the child runs a
// tool; the retried attempt on a new worker continues the same pi session
// (the model sees the earlier messages) instead of starting over.
func TestCrashedAttemptContinuesSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := filepath.Join(e.workDir, "started.txt")
	e.model.Script("crash",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo started > started.txt; sleep 60"}`}}},
		finalizeStep("continued"),
	)
	in := e.sessionInput("[[script:crash]] Do the long task.")
	res := e.stopWorkerWhen(in, started)
	turn := res.LastTurn.Result
	if turn.Output != "continued" || !turn.Continued || turn.Attempt != 2 || turn.Error != nil {
		t.Fatalf("turn: output %q continued %v attempt %d error %+v", turn.Output, turn.Continued, turn.Attempt, turn.Error)
	}
	reqs := e.model.RequestsFor("crash")
	if len(reqs) != 2 {
		t.Fatalf("model saw %d requests, want 2 (no start from scratch)", len(reqs))
	}
	msgs := reqs[1].Parsed.Messages
	if last := msgs[len(msgs)-1]; last.Role != "user" || last.Text() != activities.ContinuationPrompt {
		t.Fatalf("last message of the retried attempt: %s %q", last.Role, last.Text())
	}
	var sawOriginal, sawToolCall bool
	for _, m := range msgs {
		sawOriginal = sawOriginal || (m.Role == "user" && m.Text() == in.Prompt)
		sawToolCall = sawToolCall || (m.Role == "assistant" && len(m.ToolCalls) > 0)
	}
	if !sawOriginal || !sawToolCall {
		t.Fatalf("the retried attempt did not carry the earlier messages (prompt %v, tool call %v)", sawOriginal, sawToolCall)
	}
	recordHistory(t, shared.client, in.SessionID, "crash-continuation")
}

// TestFinalizedAttemptIsNotRunAgain stops the worker after the child called
// subagent_finalize but before pi exited: the retried attempt finds the
// result in the session file and returns it without asking the model again.
func TestFinalizedAttemptIsNotRunAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ext, err := filepath.Abs(filepath.Join("testdata", "extensions", "slow-settle.ts"))
	if err != nil {
		t.Fatal(err)
	}
	e.model.Script("finalized",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo worked"}`}}},
		finalizeStep("done before the crash"),
	)
	// The worker runs only the extensions a profile grants.
	e.writeProfile("settler", "---\nname: settler\nextensions: "+ext+"\n---\nYou settle slowly.\n")
	in := e.sessionInput("[[script:finalized]] Work, then finalize.")
	in.Child.Profile, in.Child.Extensions = "settler", []string{ext}
	res := e.stopWorkerWhen(in, filepath.Join(e.workDir, "settling.txt"))
	turn := res.LastTurn.Result
	if turn.Output != "done before the crash" || !turn.Recovered || turn.Attempt != 2 || turn.Error != nil || res.State != api.StateCompleted {
		t.Fatalf("turn: state %s output %q recovered %v attempt %d error %+v", res.State, turn.Output, turn.Recovered, turn.Attempt, turn.Error)
	}
	if n := len(e.model.RequestsFor("finalized")); n != 2 {
		t.Fatalf("model saw %d requests, want the 2 of the first attempt only", n)
	}
	// The turn's usage counts the first attempt's two model calls once.
	if u := res.LastTurn.Usage; u.Turns != 2 || u.Input == 0 {
		t.Fatalf("turn usage %+v, want the 2 calls of the interrupted attempt", u)
	}
	if len(turn.ToolRows) != 2 || turn.ToolRows[0].Name != "bash" || turn.ToolRows[1].Name != api.FinalizeToolName {
		t.Fatalf("tool rows %+v", turn.ToolRows)
	}
	if b, err := os.ReadFile(turn.ArtifactFile); err != nil || string(b) != "done before the crash" {
		t.Fatalf("artifact %s: %q %v", turn.ArtifactFile, b, err)
	}
}

// stopWorkerWhen runs session in on a worker that is stopped once file
// appears (the child wrote it), then on a new worker to its end.
func (e *env) stopWorkerWhen(in api.SessionInput, file string) api.SessionResult {
	e.t.Helper()
	stopFirst := e.startWorker(shared.client)
	run := e.startSession(shared.client, in)
	waitForFile(e.t, file)
	stopFirst()
	e.startWorker(shared.client)
	var res api.SessionResult
	if err := run.Get(e.ctx(), &res); err != nil {
		e.t.Fatal(err)
	}
	return res
}

// waitForFile waits until path exists and holds something.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		// A shell's `echo ... > file` creates the file before it writes
		// (a pid that a test reads next): wait for what it writes too.
		if info, err := os.Stat(path); err == nil && info.Size() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared with content", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCrashBeforeSessionFileRunsPromptAgain: when the worker stops before pi
// wrote its session file, the retried attempt runs the original prompt.
func TestCrashBeforeSessionFileRunsPromptAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	slow := finalizeStep("second time lucky")
	slow.DelayMS = 2000
	e.model.Script("early", slow)
	stopFirst := e.startWorker(shared.client)
	in := e.sessionInput("[[script:early]] Answer slowly.")
	run := e.startSession(shared.client, in)
	if _, err := e.model.WaitForRequests(e.ctx(), 1, func(r scriptedmodel.Request) bool { return r.Script == "early" }); err != nil {
		t.Fatal(err)
	}
	stopFirst()
	e.startWorker(shared.client)
	var res api.SessionResult
	if err := run.Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	if turn := res.LastTurn.Result; turn.Output != "second time lucky" || turn.Continued || turn.Attempt != 2 {
		t.Fatalf("output %q continued %v attempt %d", turn.Output, turn.Continued, turn.Attempt)
	}
	reqs := e.model.RequestsFor("early")
	last := reqs[len(reqs)-1].Parsed.Messages
	if got := last[len(last)-1].Text(); got != in.Prompt {
		t.Fatalf("the retried attempt sent %q, want the original prompt", got)
	}
}

// TestCancelKillsChildAndItsTools cancels a running session: its heartbeat
// showed progress, and pi and the `sleep` its bash tool started are gone.
func TestCancelKillsChildAndItsTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pidFile := filepath.Join(e.workDir, "sleep.pid")
	e.model.Script("cancel", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{
		{Name: "bash", Arguments: `{"command":"sleep 300 & echo $! > sleep.pid; wait"}`},
	}})
	e.startWorker(shared.client)
	in := e.sessionInput("[[script:cancel]] Run something long.")
	run := e.startSession(shared.client, in)
	waitForFile(t, pidFile)

	// The heartbeat carries the running tool row.
	var progress api.Progress
	deadline := time.Now().Add(testTimeout)
	for len(progress.ToolRows) == 0 {
		desc, err := shared.client.DescribeWorkflowExecution(e.ctx(), in.SessionID, "")
		if err != nil {
			t.Fatal(err)
		}
		if pa := desc.GetPendingActivities(); len(pa) == 1 && pa[0].GetHeartbeatDetails() != nil {
			if err := converterGet(pa[0].GetHeartbeatDetails(), &progress); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat with progress")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if row := progress.ToolRows[0]; row.Name != "bash" || row.Status != "running" || progress.TimeoutSeconds != 600 {
		t.Fatalf("progress %+v", progress)
	}

	pid := readPid(t, pidFile)
	if err := shared.client.CancelWorkflow(e.ctx(), in.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	var res api.SessionResult
	err := run.Get(e.ctx(), &res)
	var cancelled *temporal.CanceledError
	if !errors.As(err, &cancelled) {
		t.Fatalf("err = %v, want the session cancelled", err)
	}
	// The cancelled turn keeps what the child did before it was stopped.
	if err := cancelled.Details(&res); err != nil {
		t.Fatal(err)
	}
	turn := res.LastTurn
	if res.State != api.StateCancelled || turn == nil || turn.Error.Code != errcode.Cancelled {
		t.Fatalf("result %+v", res)
	}
	if turn.Usage.Turns != 1 || len(turn.Result.ToolRows) != 1 || turn.Result.ToolRows[0].Name != "bash" {
		t.Fatalf("partial turn: usage %+v rows %+v", turn.Usage, turn.Result.ToolRows)
	}
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the sleep (pid %d) survived the cancellation", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	recordHistory(t, shared.client, in.SessionID, "cancelled")
}

func converterGet(p *commonpb.Payloads, v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(p, v)
}
