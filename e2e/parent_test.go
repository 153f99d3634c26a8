package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// parentPi is a real parent pi with our extension loaded (-e ./extension),
// talking to the scripted model, starting delegations on the shared server
// through the subagents binary.
type parentPi struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events *eventLog
	done   chan struct{}
	err    error
}

// eventLog keeps pi's JSON event lines.
type eventLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// parentEnv points the parent pi and the extension at the test's world.
func (e *env) parentEnv() []string {
	return append(e.cliEnv(),
		"SUBAGENTS_BIN="+subagentsBinary(e.t),
		"TEMPORAL_ADDRESS="+shared.server.FrontendAddress(),
		"TEMPORAL_NAMESPACE="+shared.server.Namespace(),
		"SUBAGENTS_TASK_QUEUE="+e.taskQueue,
		"PATH="+e.pi.PathPrefix+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SUBAGENTS_SERVE="+e.serveSetting(),
		// The test's own data dir: no socket of a service running on this
		// machine is used, and none is started (the address answers).
		"SUBAGENTS_DATA_DIR="+e.dataDir,
	)
}

// serveSetting is SUBAGENTS_SERVE for the parent: "1" (the default: one
// `subagents serve` per parent pi) unless the test asked for a process per
// call.
func (e *env) serveSetting() string {
	if e.spawnPerCall {
		return "0"
	}
	return "1"
}

var extensionBuild struct {
	once sync.Once
	dir  string
	err  error
}

// parentExtension is the extension's folder, with its compiled form built
// from the sources under test (as `make build` does): pi loads that file.
func parentExtension(t *testing.T) string {
	t.Helper()
	extensionBuild.once.Do(func() {
		dir, err := filepath.Abs("../extension")
		if err != nil {
			extensionBuild.err = err
			return
		}
		// The Node 22 npm ci put beside pi; node --run finds esbuild there.
		build := exec.Command(filepath.Join(dir, "node_modules", ".bin", "node"), "--run", "build")
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			extensionBuild.err = fmt.Errorf("build the extension: %v\n%s", err, out)
			return
		}
		extensionBuild.dir = dir
	})
	if extensionBuild.err != nil {
		t.Fatal(extensionBuild.err)
	}
	return extensionBuild.dir
}

// startParent starts pi in mode (json or rpc) on sessionFile; in json mode
// prompt is the one prompt, in rpc mode it is sent as the first command.
func (e *env) startParent(mode, sessionFile, prompt string) *parentPi {
	e.t.Helper()
	args := []string{"--mode", mode, "--session", sessionFile, "-e", parentExtension(e.t)}
	if mode == "json" {
		args = append(args, prompt)
	}
	var stderr syncBuffer
	p := e.spawnPi(args, &stderr)
	if mode == "json" {
		_ = p.stdin.Close()
	} else {
		p.send(e.t, map[string]any{"type": "prompt", "message": prompt})
	}
	e.t.Cleanup(func() {
		p.kill()
		<-p.done
		if e.t.Failed() {
			e.t.Logf("parent pi events:\n%.20000s\nstderr:\n%s", p.events, stderr.String())
		}
	})
	return p
}

// spawnPi starts pi with args in the test's folder, with the parent's
// environment, its events read into the parentPi as they come and its
// stderr into stderr; stdin stays open for the caller.
func (e *env) spawnPi(args []string, stderr *syncBuffer) *parentPi {
	e.t.Helper()
	cmd := exec.Command(e.pi.Path, args...)
	cmd.Env = append(append(os.Environ(), e.parentEnv()...), e.parentEnvExtra...)
	cmd.Dir = e.workDir
	// Its own process group, as a terminal gives a foreground job: a kill
	// or signal to the group reaches the subagents commands the extension
	// started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &parentPi{cmd: cmd, events: &eventLog{}, done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	p.stdin, err = cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			p.events.add(sc.Text())
		}
	}()
	go func() { <-scanned; p.err = cmd.Wait(); close(p.done) }()
	return p
}

func (p *parentPi) send(t *testing.T, cmd map[string]any) {
	t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("rpc command: %v", err)
	}
}

// kill ends the parent and what it started, by its process group.
func (p *parentPi) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// wait waits for a json-mode parent to exit by itself.
func (p *parentPi) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("parent pi: %v", p.err)
		}
	case <-time.After(2 * testTimeout):
		t.Fatalf("parent pi did not finish")
	}
}

// waitEvent waits for an event line holding all of subs and returns it.
func (p *parentPi) waitEvent(t *testing.T, subs ...string) string {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		for _, line := range strings.Split(p.events.String(), "\n") {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(line, s)
			}
			if all {
				return line
			}
		}
		select {
		case <-p.done:
			t.Fatalf("parent pi exited before an event with %q: %v", subs, p.err)
		case <-deadline:
			t.Fatalf("no parent event with %q", subs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// call is a parent model step that calls one tool.
func call(name string, args any) scriptedmodel.Step {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	// Undo Go's HTML escaping, so {{match:...}} patterns stay as written.
	s := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b))
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: name, Arguments: s}}}
}

// toolResultText is the text the parent's model got for its latest call of
// a tool, from the request that followed it.
func toolResultText(t *testing.T, reqs []scriptedmodel.Request, step int) string {
	t.Helper()
	for _, r := range reqs {
		if r.StepIdx != step {
			continue
		}
		msgs := r.Parsed.Messages
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == "tool" {
				return msgs[i].Text()
			}
		}
	}
	t.Fatalf("no request at step %d with a tool result", step)
	return ""
}

// userTexts are the user-role texts of a request (pi sends custom messages,
// such as delivered results, as user messages).
func userTexts(r scriptedmodel.Request) []string {
	var out []string
	for _, m := range r.Parsed.Messages {
		if m.Role == "user" {
			out = append(out, m.Text())
		}
	}
	return out
}

func sessionIDOf(t *testing.T, sessionFile string) string {
	t.Helper()
	f, err := os.Open(sessionFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var header struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	line, _ := bufio.NewReader(f).ReadString('\n')
	if err := json.Unmarshal([]byte(line), &header); err != nil || header.Type != "session" || header.ID == "" {
		t.Fatalf("session header %q: %v", line, err)
	}
	return header.ID
}

// openDelegations lists the parent's delegations still waiting for its ack.
func (e *env) openDelegations(parentID string) int {
	e.t.Helper()
	env, _ := e.cli().json(0, "", "list", "--kind", "delegation", "--open", "--parent-session", parentID)
	return env.Count
}

// TestParentPiUsesEveryTool: a parent pi's model calls each tool of the
// extension in turn; the children run through Temporal; the test checks what
// the parent's model received for each call.
func TestParentPiUsesEveryTool(t *testing.T) {
	t.Parallel()
	// The extension calls the command through one `subagents serve`, or,
	// with SUBAGENTS_SERVE=0, as a process per call: the same contract.
	for _, spawn := range []bool{false, true} {
		t.Run(map[bool]string{false: "serve", true: "process-per-call"}[spawn], func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.keepWarm()
			e.spawnPerCall = spawn
			testParentUsesEveryTool(t, e)
		})
	}
}

func testParentUsesEveryTool(t *testing.T, e *env) {
	e.startWorker(shared.client)
	e.model.Script("c-sub", finalizeStep("the loader is config/load.go:12"))
	e.model.Script("c-one", finalizeStep("one: three modules"))
	e.model.Script("c-task", finalizeStep("probe: all green"))
	e.model.Script("c-finder", finalizeStep("auth lives in auth/mw.go"))
	e.model.Script("c-resume", finalizeStep("resumed with context"))
	e.model.Script("c-other", finalizeStep("a session of its own"))
	sessionRe := "one: completed .session: ([0-9a-f-]+)"
	e.model.Script("parent",
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-sub]] Find the config loader."}),
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{
			{"name": "one", "prompt": "[[script:c-one]] Map the modules.", "profile": "scout"},
			{"name": "ghost", "prompt": "Anything.", "profile": "nope"},
		}}),
		call("get_subagent_output", map[string]string{"sessionId": "{{match:" + sessionRe + "}}"}),
		call("get_subagent_session", map[string]string{"sessionId": "{{match:" + sessionRe + "}}"}),
		call("list_subagent_profiles", map[string]any{}),
		call("task", map[string]string{"op": "start", "subagent_type": "scout", "description": "probe", "prompt": "[[script:c-task]] Probe."}),
		call("task", map[string]string{"op": "status", "id": "{{match:task_id: ([0-9a-f-]+)}}"}),
		call("finder", map[string]string{"query": "[[script:c-finder]] Where is auth checked?"}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-resume]] Go on.", "sessionId": "{{match:Session ID:.. .([0-9a-f-]+)}}"}),
		call("subagent", map[string]string{"agent": "explorer", "task": "[[script:c-other]] Go on.", "sessionId": "{{match:Session ID:.. .([0-9a-f-]+)}}"}),
		call("get_subagent_output", map[string]string{"sessionId": "no-such-session"}),
		scriptedmodel.Step{Text: "All done."},
	)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", sessionFile, "[[script:parent]] Use the subagent tools.")
	p.wait(t)
	// Nothing the extension started (serve, or a process per call) is left
	// in the parent's process group, running or unreaped.
	if left := processGroup(p.cmd.Process.Pid); len(left) > 0 {
		t.Fatalf("processes of the parent's group outlived it: %v", left)
	}
	reqs := e.model.RequestsFor("parent")
	if len(reqs) != 12 {
		t.Fatalf("parent made %d model requests, want 12", len(reqs))
	}

	sub := toolResultText(t, reqs, 1)
	for _, want := range []string{"**Status:** SUCCESS\n**Session ID:** `", "`\n\n---\n\nthe loader is config/load.go:12"} {
		if !strings.Contains(sub, want) {
			t.Fatalf("subagent result lacks %q:\n%s", want, sub)
		}
	}
	delegated := toolResultText(t, reqs, 2)
	lines := strings.Split(delegated, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "✓ one: completed (session: ") ||
		!strings.HasPrefix(lines[1], `✗ ghost: error — Unknown profile: "nope". Available profiles: `) {
		t.Fatalf("delegate_to_subagents summary:\n%s", delegated)
	}
	if out := toolResultText(t, reqs, 3); out != "one: three modules" {
		t.Fatalf("get_subagent_output = %q", out)
	}
	if tr := toolResultText(t, reqs, 4); !strings.Contains(tr, "[[script:c-one]] Map the modules.") || !strings.Contains(tr, "→ subagent_finalize:") || !strings.Contains(tr, "[tool result]: ") {
		t.Fatalf("get_subagent_session:\n%s", tr)
	}
	if profs := toolResultText(t, reqs, 5); !strings.Contains(profs, "scout (builtin)") || !strings.Contains(profs, "finder (builtin)") {
		t.Fatalf("list_subagent_profiles:\n%s", profs)
	}
	if task := toolResultText(t, reqs, 6); !strings.HasPrefix(task, "✓ Scout · probe [task_id: ") || !strings.Contains(task, "╰── probe: all green") {
		t.Fatalf("task start:\n%s", task)
	}
	if st := toolResultText(t, reqs, 7); !strings.Contains(st, "✓ Scout · probe") || !strings.Contains(st, "probe: all green") {
		t.Fatalf("task status:\n%s", st)
	}
	if f := toolResultText(t, reqs, 8); !strings.HasPrefix(f, "✓ Finder · finder [task_id: ") || !strings.Contains(f, "auth lives in auth/mw.go") {
		t.Fatalf("finder primary tool:\n%s", f)
	}
	resumed := toolResultText(t, reqs, 9)
	if !strings.Contains(resumed, "**Status:** SUCCESS") || !strings.Contains(resumed, "resumed with context") {
		t.Fatalf("subagent with sessionId:\n%s", resumed)
	}
	// The resumed child saw its first turn: same pi session file.
	childReqs := e.model.RequestsFor("c-resume")
	if len(childReqs) == 0 || !strings.Contains(fmt.Sprint(userTexts(childReqs[0])), "Find the config loader.") {
		t.Fatalf("the resumed child did not get its earlier context")
	}
	// The sessions contract names a session by folder, agent and ID: another
	// agent's sessionId is a session of its own, without the scout's context.
	if other := toolResultText(t, reqs, 10); !strings.Contains(other, "**Status:** SUCCESS") || !strings.Contains(other, "a session of its own") {
		t.Fatalf("subagent with another agent's sessionId:\n%s", other)
	}
	if r := e.model.RequestsFor("c-other"); len(r) == 0 || strings.Contains(fmt.Sprint(userTexts(r[0])), "Find the config loader.") {
		t.Fatalf("another agent's session with the same ID saw the scout's context")
	}
	if nf := toolResultText(t, reqs, 11); !strings.Contains(nf, `Session "no-such-session" not found. The session may have expired or the ID is incorrect.`) {
		t.Fatalf("get_subagent_output of an unknown session:\n%s", nf)
	}
	// Live progress reached pi while the children ran (onUpdate).
	if !strings.Contains(p.events.String(), `"type":"tool_execution_update"`) || !strings.Contains(p.events.String(), "Sub-agents: ") {
		t.Fatal("no live progress (tool_execution_update with the Sub-agents header) while delegate_to_subagents ran")
	}
	// Every delegation's result was received in the session: all acknowledged.
	if n := e.openDelegations(sessionIDOf(t, sessionFile)); n != 0 {
		t.Fatalf("%d delegations still wait for the parent's ack", n)
	}
}

// TestParentBackgroundTaskArrivesInALaterTurn: an async task returns at
// once; its result reaches the parent's model in a later turn of the same
// run, as a delivered message, and is acknowledged.
func TestParentBackgroundTaskArrivesInALaterTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	slow := finalizeStep("background: the index is rebuilt")
	slow.DelayMS = 1500
	e.model.Script("c-bg", slow)
	e.model.Script("parent-bg",
		call("task", map[string]any{"op": "start", "async": true, "subagent_type": "scout", "description": "rebuild", "prompt": "[[script:c-bg]] Rebuild the index."}),
		scriptedmodel.Step{Text: "Started it; I will report when it is back."},
		scriptedmodel.Step{Text: "The background task reported back."},
	)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", sessionFile, "[[script:parent-bg]] Rebuild the index in the background.")
	p.wait(t)
	reqs := e.model.RequestsFor("parent-bg")
	if len(reqs) != 3 {
		t.Fatalf("parent made %d requests, want 3", len(reqs))
	}
	started := toolResultText(t, reqs, 1)
	if !strings.Contains(started, "in the background") {
		t.Fatalf("async start answered:\n%s", started)
	}
	var delivered []string
	for _, u := range userTexts(reqs[2]) {
		if strings.Contains(u, "Background sub-agent results") {
			delivered = append(delivered, u)
		}
	}
	if len(delivered) != 1 || !strings.Contains(delivered[0], "✓ rebuild: completed") || !strings.Contains(delivered[0], "background: the index is rebuilt") {
		t.Fatalf("the later turn got %d deliveries: %q", len(delivered), delivered)
	}
	if n := e.openDelegations(sessionIDOf(t, sessionFile)); n != 0 {
		t.Fatalf("%d delegations still wait for the parent's ack", n)
	}
}

// TestParentAbortCancelsTheDelegation: the parent aborts (RPC abort, what
// Escape does in the terminal) while a child runs: the child's turn is
// cancelled, the delegation ends and is acknowledged.
func TestParentAbortCancelsTheDelegation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("c-hang", scriptedmodel.Step{Hang: true})
	e.model.Script("parent-abort",
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "stuck", "prompt": "[[script:c-hang]] Think forever."}}}),
		scriptedmodel.Step{Text: "Aborted."},
	)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("rpc", sessionFile, "[[script:parent-abort]] Delegate.")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == "c-hang" }); err != nil {
		t.Fatalf("the child never asked the model: %v", err)
	}
	p.send(t, map[string]any{"type": "abort"})
	parentID := sessionIDOf(t, sessionFile)
	var sessions []string
	deadline := time.Now().Add(testTimeout)
	for {
		list, _ := e.cli().json(0, "", "list", "--parent-session", parentID, "--kind", "session")
		if len(list.Runs) == 1 && list.Runs[0].Status == "cancelled" {
			sessions = append(sessions, list.Runs[0].ID)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child was not cancelled: %+v", list.Runs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, out := e.cli().json(0, "", "status", sessions[0])
	if st.Items[0].Status != "cancelled" || st.Items[0].Error == nil || st.Items[0].Error.Code != "CANCELLED" {
		t.Fatalf("child after the abort: %s", out)
	}
	for e.openDelegations(parentID) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the aborted delegation was never acknowledged")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The slash commands answer through the UI (notify events in RPC mode).
	p.send(t, map[string]any{"type": "prompt", "message": "/subagents"})
	listed := p.waitEvent(t, `"method":"notify"`, sessions[0])
	if !strings.Contains(listed, "delegation delegation-") || !strings.Contains(listed, "/namespaces/default/workflows/") {
		t.Fatalf("/subagents showed: %s", listed)
	}
	p.send(t, map[string]any{"type": "prompt", "message": "/subagent " + sessions[0]})
	one := p.waitEvent(t, `"method":"notify"`, "stuck [task_id: "+sessions[0])
	if !strings.Contains(one, "Task cancelled: Cancelled while running") || !strings.Contains(one, "/workflows/"+sessions[0]) {
		t.Fatalf("/subagent showed: %s", one)
	}
}

// TestParentKilledMidDelegationGetsTheResultOnce: the parent pi is killed
// with SIGKILL while its delegation runs; started again on the same session
// file it receives the result once, and a third start does not get it again.
func TestParentKilledMidDelegationGetsTheResultOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("parent-2", scriptedmodel.Step{Text: "Picking up where I was."}, scriptedmodel.Step{Text: "The migration result is in."})
	e.model.Script("parent-3", scriptedmodel.Step{Text: "Nothing new."})
	sessionFile := e.parentKilledMidDelegation("long", "long job: 42 files migrated")
	parentID := sessionIDOf(t, sessionFile)
	if n := e.openDelegations(parentID); n != 1 {
		t.Fatalf("%d open delegations after the kill, want 1", n)
	}

	second := e.startParent("json", sessionFile, "[[script:parent-2]] Go on.")
	second.wait(t)
	deliveries := func(r scriptedmodel.Request) int {
		n := 0
		for _, u := range userTexts(r) {
			n += strings.Count(u, "long job: 42 files migrated")
		}
		return n
	}
	reqs := e.model.RequestsFor("parent-2")
	if len(reqs) == 0 || deliveries(reqs[len(reqs)-1]) != 1 {
		t.Fatalf("the restarted parent got the result %d times", deliveries(reqs[len(reqs)-1]))
	}
	if n := e.openDelegations(parentID); n != 0 {
		t.Fatalf("%d delegations still wait for the ack", n)
	}

	third := e.startParent("json", sessionFile, "[[script:parent-3]] Anything else?")
	third.wait(t)
	reqs = e.model.RequestsFor("parent-3")
	if len(reqs) != 1 || deliveries(reqs[0]) != 1 {
		t.Fatalf("the third start saw the result %d times (once, from the history)", deliveries(reqs[0]))
	}
	list, _ := e.cli().json(0, "", "list", "--kind", "delegation", "--parent-session", parentID)
	if len(list.Runs) != 1 || list.Runs[0].Open {
		t.Fatalf("delegations of the parent: %+v", list.Runs)
	}
	// A one-task delegation is its session's workflow (version 3), which
	// waits for a send (sticky, as the extension starts them).
	st, _ := e.cli().json(0, "", "status", list.Runs[0].ID)
	if list.Runs[0].ID != api.OneTaskDelegationID(st.Items[0].TaskID) {
		t.Fatalf("delegation %s of task %s", list.Runs[0].ID, st.Items[0].TaskID)
	}
	recordHistory(t, shared.client, st.Items[0].TaskID, "delegation-delivered-v3")
}

// TestExtensionInstallsAsAPiPackage: `pi install ./extension` makes the
// tools available without -e.
func TestExtensionInstallsAsAPiPackage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ext := parentExtension(t)
	install := exec.Command(e.pi.Path, "install", ext)
	install.Env = append(os.Environ(), e.parentEnv()...)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("pi install: %v\n%s", err, out)
	}
	e.model.Script("installed", call("list_subagent_profiles", map[string]any{}), scriptedmodel.Step{Text: "Listed."})
	run := exec.Command(e.pi.Path, "--mode", "json", "--session", filepath.Join(t.TempDir(), "p.jsonl"), "[[script:installed]] Which profiles are there?")
	run.Env = append(os.Environ(), e.parentEnv()...)
	run.Dir = e.workDir
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("pi with the installed package: %v\n%.4000s", err, out)
	}
	reqs := e.model.RequestsFor("installed")
	if len(reqs) != 2 || !strings.Contains(toolResultText(t, reqs, 1), "oracle (builtin)") {
		t.Fatalf("the installed extension did not answer list_subagent_profiles (%d requests)", len(reqs))
	}
}

// TestExtensionRegistersNothingInAChild: loaded into a child pi
// (PI_SUBAGENT_CHILD=1), the extension offers no delegation tool, so depth
// holds even when a profile loads extensions.
func TestExtensionRegistersNothingInAChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ext := parentExtension(t)
	e.model.Script("child-tools", scriptedmodel.Step{Text: "No tools to delegate with."})
	for _, child := range []bool{false, true} {
		run := exec.Command(e.pi.Path, "--mode", "json", "--session", filepath.Join(t.TempDir(), "c.jsonl"), "-e", ext, "[[script:child-tools]] Which tools?")
		run.Env = append(os.Environ(), e.parentEnv()...)
		if child {
			run.Env = append(run.Env, "PI_SUBAGENT_CHILD=1", "PI_SUBAGENT_DEPTH=1")
		}
		run.Dir = e.workDir
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("pi: %v\n%.4000s", err, out)
		}
		reqs := e.model.RequestsFor("child-tools")
		var tools []string
		for _, tool := range reqs[len(reqs)-1].Parsed.Tools {
			tools = append(tools, tool.Function.Name)
		}
		has := strings.Contains(" "+strings.Join(tools, " ")+" ", " delegate_to_subagents ")
		if has == child {
			t.Fatalf("child=%v: the model was offered %v", child, tools)
		}
	}
}

// parentKilledMidDelegation runs a parent whose model delegates one task
// (script c-NAME, a child that answers after 3 s) and kills it once the
// child has asked its model; it returns the parent's session file.
func (e *env) parentKilledMidDelegation(name, answer string) string {
	e.t.Helper()
	long := finalizeStep(answer)
	long.DelayMS = 3000
	e.model.Script("c-"+name, long)
	e.model.Script("parent-"+name, call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "migrate", "prompt": "[[script:c-" + name + "]] Migrate the files."}}}))
	sessionFile := filepath.Join(e.t.TempDir(), "parent.jsonl")
	first := e.startParent("json", sessionFile, "[[script:parent-"+name+"]] Migrate everything.")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == "c-"+name }); err != nil {
		e.t.Fatalf("the child never started: %v", err)
	}
	first.kill()
	<-first.done
	return sessionFile
}

// TestParentTaskToolLifecycle: the task contract's task ops from a real parent pi,
// past start and status: a wait that gives up (task_wait_timeout), a send
// to a running task, a cancel, and a lookup of an unknown task
// (task_expired), each with the contract's code and category while the
// unified code stays in the details; then the subagent tool refusing an
// agent that writes (the SingleResult contract).
func TestParentTaskToolLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	slow := finalizeStep("first: scanned")
	slow.DelayMS = 2500
	e.model.Script("c-slow", slow)
	e.model.Script("c-more", finalizeStep("second: the tests pass"))
	id := "{{match:background: ([0-9a-f-]+)}}"
	e.model.Script("parent-life",
		call("task", map[string]any{"op": "start", "async": true, "subagent_type": "scout", "description": "scan", "prompt": "[[script:c-slow]] Scan."}),
		call("task", map[string]any{"op": "wait", "id": id, "timeout_ms": 200}),
		call("task", map[string]any{"op": "send", "id": id, "prompt": "[[script:c-more]] Now run the tests."}),
		call("task", map[string]any{"op": "cancel", "ids": []string{id}}),
		call("task", map[string]any{"op": "status", "id": "no-such-task"}),
		call("subagent", map[string]any{"agent": "implementer", "task": "Fix it."}),
		scriptedmodel.Step{Text: "Done."},
		scriptedmodel.Step{Text: "Noted."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-life]] Scan, then test.")
	p.wait(t)
	reqs := e.model.RequestsFor("parent-life")
	details := toolResultDetails(t, p, "task")
	if len(details) < 5 {
		t.Fatalf("%d task results", len(details))
	}

	waited := toolResultText(t, reqs, 2)
	if !strings.HasPrefix(waited, "Error (task_wait_timeout): the task is still running") {
		t.Fatalf("wait with timeout_ms:\n%s", waited)
	}
	if d := details[1]; d["error_category"] != "timeout" || d["wait_status"] != "timeout" || d["error"].(map[string]any)["unified_code"] != "SUBAGENT_TIMEOUT" {
		t.Fatalf("wait details: %v", d)
	}
	if sent := toolResultText(t, reqs, 3); !strings.Contains(sent, "second: the tests pass") {
		t.Fatalf("send to a running task:\n%s", sent)
	}
	if d := details[3]; d["op"] != "cancel" || d["cancel_applied"] == nil || d["prior_status"] == nil {
		t.Fatalf("cancel details: %v", d)
	}
	if nf := toolResultText(t, reqs, 5); !strings.HasPrefix(nf, "Error (task_expired): ") {
		t.Fatalf("status of an unknown task:\n%s", nf)
	}
	if d := details[4]; d["error_category"] != "not_found" || d["error"].(map[string]any)["unified_code"] != "SESSION_NOT_FOUND" {
		t.Fatalf("unknown task details: %v", d)
	}
	// The SingleResult contract: the subagent tool runs read-only agents unless
	// allowWrite is set; the model is told how to go on.
	if w := toolResultText(t, reqs, 6); !strings.Contains(w, "PERMISSION_DENIED") || !strings.Contains(w, `agent "implementer" can write files (edit, write)`) || !strings.Contains(w, "use the task tool") {
		t.Fatalf("subagent with a writing agent:\n%s", w)
	}
}

// toolResultDetails is the details of each result of tool, in order, from
// the parent's JSON events.
func toolResultDetails(t *testing.T, p *parentPi, tool string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(p.events.String(), "\n") {
		var ev struct {
			Type     string `json:"type"`
			ToolName string `json:"toolName"`
			Result   struct {
				Details map[string]any `json:"details"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "tool_execution_end" && ev.ToolName == tool {
			out = append(out, ev.Result.Details)
		}
	}
	return out
}

// TestParentTerminatedLeavesItsWorkRunning: a parent pi ended by SIGTERM
// (a service manager, a worker stopping a child that delegates) while a
// task call waits is no cancel: pi aborts its tool calls as it goes, and
// the work runs on to its end, its result waiting for the session. A
// parent aborted by its user cancels (TestParentAbortCancelsTheDelegation).
func TestParentTerminatedLeavesItsWorkRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	long := finalizeStep("long job: done after the parent left")
	long.DelayMS = 3000
	e.model.Script("c-term", long)
	e.model.Script("parent-term", call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "migrate", "prompt": "[[script:c-term]] Migrate the files."}}}))
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", sessionFile, "[[script:parent-term]] Migrate everything.")
	if _, err := e.model.WaitForRequests(e.ctx(), 1, func(r scriptedmodel.Request) bool { return r.Script == "c-term" }); err != nil {
		t.Fatalf("the child never started: %v", err)
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.done
	list, out := e.cli().json(0, "", "list", "--kind", "delegation", "--parent-session", sessionIDOf(t, sessionFile))
	if len(list.Runs) != 1 {
		t.Fatalf("delegations of the parent: %s", out)
	}
	env, out := e.cli().json(0, "", "wait", list.Runs[0].ID)
	if env.Status != "completed" || len(env.Items) != 1 || env.Items[0].Output != "long job: done after the parent left" {
		t.Fatalf("the work after the parent's SIGTERM: %s", out)
	}
}
