package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/worker"
)

// Nested delegation (docs/pi.md, "Nesting") with real pi: a child whose
// profile lists `task` delegates with it to the same service.

// newNestingEnv is an env whose worker gives children that delegate this
// project's extension (src/nested.ts of the tree under test) and the
// test's service, with three profiles: lead lists task, leaf lists
// nothing to delegate with, and deep lists task too (run as a grandchild,
// it is at the depth limit). It returns the worker's configuration and
// how to stop it.
func newNestingEnv(t *testing.T) (e *env, cfg worker.Config, stop func()) {
	t.Helper()
	e = newEnv(t)
	agents := filepath.Join(e.agentDir, "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tools := range map[string]string{"lead": "read, task", "leaf": "read", "deep": "read, task"} {
		body := "---\nname: " + name + "\ndescription: " + name + " of the nesting tests\ntools: " + tools + "\n---\nDo the task.\n"
		if err := os.WriteFile(filepath.Join(agents, name+".md"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg = e.workerConfig()
	cfg.DelegationExtension = filepath.Join(parentExtension(t), worker.NestedEntry)
	// What a parent pi of the tests reaches the service with (its address,
	// namespace, task queue, data dir, the subagents command).
	cfg.ServiceEnv = e.parentEnv()
	return e, cfg, e.startWorkerWith(shared.client, cfg)
}

// taskCall is a model step that calls the task tool with one task.
func taskCall(agent, prompt string) scriptedmodel.Step {
	args, _ := json.Marshal(map[string]string{"subagent_type": agent, "description": agent + " task", "prompt": prompt})
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "task", Arguments: string(args)}}}
}

// lastToolResult is the text of the last tool message of a request.
func lastToolResult(r scriptedmodel.Request) string {
	msgs := r.Parsed.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "tool" {
			return msgs[i].Text()
		}
	}
	return ""
}

// TestNestedDelegationReachesTheChild: a top-level task whose profile
// lists task delegates to a grandchild; the grandchild's result is the
// tool result in the child's next model request, the child's result is the
// top's, and `subagents list --parent-session <child session>` shows the
// nested task. A grandchild whose profile also lists task is at the depth
// limit: its model is offered no delegation tool.
func TestNestedDelegationReachesTheChild(t *testing.T) {
	t.Parallel()
	e, _, _ := newNestingEnv(t)
	e.model.Script("lead", taskCall("deep", "[[script:deep]] Find the answer."), finalizeStep("The lead is done: the answer is 42."))
	e.model.Script("deep", finalizeStep("The answer is 42."))
	c := e.cli()
	env, out := c.json(0, "", "run", "--agent", "lead", "[[script:lead]] Delegate the search.")
	if len(env.Items) != 1 || env.Items[0].Status != string(api.StateCompleted) || env.Items[0].Output != "The lead is done: the answer is 42." {
		t.Fatalf("the top task: %s", out)
	}
	childID := env.Items[0].TaskID

	lead := e.model.RequestsFor("lead")
	if len(lead) != 2 {
		t.Fatalf("the child's model got %d requests, want 2", len(lead))
	}
	if tools := toolNames(lead[0].Parsed); !slices.Contains(tools, "task") || slices.Contains(tools, "subagent") {
		t.Fatalf("the child's tools: %v (its profile lists read and task)", tools)
	}
	if got := lastToolResult(lead[1]); !strings.Contains(got, "The answer is 42.") {
		t.Fatalf("the grandchild's result in the child's next request: %q", got)
	}
	deep := e.model.RequestsFor("deep")
	if len(deep) != 1 {
		t.Fatalf("the grandchild's model got %d requests", len(deep))
	}
	if tools := toolNames(deep[0].Parsed); slices.Contains(tools, "task") {
		t.Fatalf("a grandchild at the depth limit was offered task: %v", tools)
	}

	listed, out := c.json(0, "", "list", "--parent-session", childID)
	if len(listed.Runs) != 1 || listed.Runs[0].Agent != "deep" || listed.Runs[0].ParentSessionID != childID || listed.Runs[0].Status != string(api.StateCompleted) {
		t.Fatalf("list --parent-session %s: %s", childID, out)
	}
	waitDelivered(t, listed.Runs[0].ID)
	// The whole listing draws the grandchild's task under the child's.
	// This folder's runs: the shared server's newest 100 may be other
	// tests' running now.
	_, text, _ := c.run("", "list", "--cwd", e.workDir)
	lines := strings.Split(text, "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, childID) })
	if at < 0 || at+1 >= len(lines) || !strings.Contains(lines[at+1], "└ "+listed.Runs[0].ID) {
		t.Fatalf("list does not draw the nested task under its task:\n%s", text)
	}
	// The top task's status carries the grandchild under the task that
	// started it, in --json and as text.
	st, out := c.json(0, "", "status", childID)
	if len(st.Items) != 1 || len(st.Items[0].Nested) != 1 || st.Items[0].Nested[0].ID != listed.Runs[0].ID ||
		st.Items[0].Nested[0].ParentSessionID != childID || st.Items[0].Nested[0].Status != string(api.StateCompleted) {
		t.Fatalf("status %s does not carry the nested task: %s", childID, out)
	}
	_, text, _ = c.run("", "status", childID)
	if !strings.Contains(text, "↳ "+listed.Runs[0].ID+" · deep · completed") {
		t.Fatalf("status does not draw the nested task under its task:\n%s", text)
	}
	// The UI's summary and details of the grandchild name the task that
	// started it.
	summary, details := uiMetadata(t, e.ctx(), listed.Runs[0].ID)
	if !strings.HasSuffix(summary, " · under task "+childID) || !strings.Contains(details, "started by task `"+childID+"` (nested, depth 1)") {
		t.Fatalf("the grandchild's UI summary %q and details:\n%s", summary, details)
	}
}

// TestDepthBeyondTheLimitIsRefused: a caller at the depth limit (a
// grandchild, depth 2) is refused by the command with
// SUBAGENT_DEPTH_EXCEEDED before anything starts, and a run of depth 3
// written by hand into a workflow's input is refused by the worker with
// the same code.
func TestDepthBeyondTheLimitIsRefused(t *testing.T) {
	t.Parallel()
	e, _, _ := newNestingEnv(t)
	c := e.cli()
	// The command, run as a grandchild's tool runs it, in the test's
	// folder: what it wrongly started would be listed by the folder below.
	code, out, _ := runSubagentsIn(t, e.workDir, append(e.cliEnv(), "PI_SUBAGENT_CHILD=1", "PI_SUBAGENT_DEPTH=2"),
		append(append([]string{"run", "--json"}, c.args...), "--agent", "leaf", "[[script:none]] Too deep.")...)
	if code == 0 || !strings.Contains(out, `"SUBAGENT_DEPTH_EXCEEDED"`) {
		t.Fatalf("a call from depth 2: exit %d\n%s", code, out)
	}
	// In this test's folder: other tests' leaf sessions share the server.
	if listed, out := c.json(0, "", "list", "--agent", "leaf", "--cwd", e.workDir); len(listed.Runs) != 0 {
		t.Fatalf("a refused call started something: %s", out)
	}

	in := e.sessionInput("[[script:none]] Too deep.")
	in.Agent = "leaf"
	in.Child.Profile, in.Child.Tools, in.Child.Depth = "leaf", []string{"read"}, 3
	var res api.SessionResult
	if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	if res.LastTurn == nil || res.LastTurn.Error == nil || res.LastTurn.Error.Code != errcode.DepthExceeded {
		t.Fatalf("a run of depth 3: %+v", res.LastTurn)
	}
	if n := len(e.model.RequestsFor("none")); n != 0 {
		t.Fatalf("a refused run asked the model %d times", n)
	}
}

// TestCancelOfTheTopTaskEndsTheGrandchild: the top task's child waits for
// its grandchild, which runs on; a cancel of the top task ends the child's
// run and, through it, the grandchild's session (cancelled).
func TestCancelOfTheTopTaskEndsTheGrandchild(t *testing.T) {
	t.Parallel()
	e, _, _ := newNestingEnv(t)
	e.model.Script("lead", taskCall("leaf", "[[script:slow]] Work for a long time."), finalizeStep("unreachable"))
	e.model.Script("slow", scriptedmodel.Step{Hang: true})
	c := e.cli()
	started, out := c.json(0, "", "start", "--agent", "lead", "[[script:lead]] Delegate the slow work.")
	if len(started.Items) != 1 {
		t.Fatalf("start: %s", out)
	}
	top := started.Items[0].TaskID
	grandchild := waitForNested(t, c, top)
	// The grandchild's model was asked: it runs.
	deadline := time.Now().Add(testTimeout)
	for len(e.model.RequestsFor("slow")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the grandchild never asked its model")
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.json(0, "", "cancel", top)
	for {
		st, out := c.json(0, "", "status", grandchild)
		if len(st.Items) == 1 && st.Items[0].Status == string(api.StateCancelled) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grandchild after the top's cancel: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitDelivered waits until the child acknowledged the result of the
// nested one-task delegation id (its workflow then closes when its
// session's idle time ends, not thirty days later).
func waitDelivered(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		var st api.SessionStatus
		v, err := shared.client.QueryWorkflow(e2eCtx(t), id, "", api.StatusQuery)
		if err == nil {
			err = v.Get(&st)
		}
		if err == nil && st.Delegation != nil && st.Delegation.Delivered {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child never acknowledged %s: %+v %v", id, st.Delegation, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForNested waits until the session parent started one nested task and
// returns its ID.
func waitForNested(t *testing.T, c *cli, parent string) string {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		listed, _ := c.json(0, "", "list", "--parent-session", parent)
		if len(listed.Runs) == 1 {
			return listed.Runs[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no nested task under %s: %+v", parent, listed.Runs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNestedResultAfterAWorkerRestart: the worker stops while the child
// waits for its grandchild; the next worker runs both again, on their
// session files. The child's retried run takes the grandchild's result,
// which arrived meanwhile, by its session ID: it is in the child's next
// model request exactly once, and the child finishes with it.
func TestNestedResultAfterAWorkerRestart(t *testing.T) {
	t.Parallel()
	e, cfg, stopFirst := newNestingEnv(t)
	e.model.Script("lead", taskCall("leaf", "[[script:slowleaf]] Find the answer slowly."), finalizeStep("The lead is done after the restart."))
	slow := finalizeStep("The answer is 42.")
	slow.DelayMS = 4000
	e.model.Script("slowleaf", slow)
	c := e.cli()
	started, out := c.json(0, "", "start", "--agent", "lead", "[[script:lead]] Delegate the search.")
	if len(started.Items) != 1 {
		t.Fatalf("start: %s", out)
	}
	top := started.Items[0].TaskID
	waitForNested(t, c, top)
	deadline := time.Now().Add(testTimeout)
	for len(e.model.RequestsFor("slowleaf")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the grandchild never asked its model")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The first worker stops (its children with it); a second takes over.
	stopFirst()
	e.startWorkerWith(shared.client, cfg)

	env, out := c.json(0, "", "wait", top)
	if len(env.Items) != 1 || env.Items[0].Status != string(api.StateCompleted) || env.Items[0].Output != "The lead is done after the restart." {
		t.Fatalf("the top task after the restart: %s", out)
	}
	if env.Items[0].RunAttempt < 2 {
		t.Fatalf("the child's run was not retried after the restart: attempt %d", env.Items[0].RunAttempt)
	}
	lead := e.model.RequestsFor("lead")
	last := lead[len(lead)-1]
	seen := 0
	for _, m := range last.Parsed.Messages {
		seen += strings.Count(m.Text(), "The answer is 42.")
	}
	t.Logf("the child's model got %d requests; the grandchild's %d", len(lead), len(e.model.RequestsFor("slowleaf")))
	if seen != 1 {
		t.Fatalf("the grandchild's result is %d times in the child's last request, want once (%d requests)", seen, len(lead))
	}
	waitDelivered(t, waitForNested(t, c, top))
}
