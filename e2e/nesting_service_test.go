package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// Depth is a fact of the tree, not a claim of the caller (docs/pi.md,
// "Nesting"), and a pi's knobs are its own: real parent pis reach the local
// service the extension starts (its socket), as a user's do, and their
// children delegate through the same socket.

// writeAgent writes a profile of the user's (pi's config dir) with tools.
func writeAgent(t *testing.T, agentDir, name, tools string) {
	t.Helper()
	dir := filepath.Join(agentDir, "agents")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := "---\nname: " + name + "\ndescription: " + name + " of the depth tests\ntools: " + tools + "\n---\nDo the task.\n"
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withExtra runs start with extra after the world's variables in the
// parent's environment, then puts them back.
func (e *env) withExtra(extra []string, start func() *parentPi) *parentPi {
	base := e.parentEnvExtra
	e.parentEnvExtra = append(slices.Clone(base), extra...)
	defer func() { e.parentEnvExtra = base }()
	return start()
}

// detailsText is a tool's result details of a parent, as JSON.
func detailsText(t *testing.T, p *parentPi, tool string) string {
	t.Helper()
	b, err := json.Marshal(toolResultDetails(t, p, tool))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServiceDecidesTheDepth: with the local service running, (1) a pi
// started with PI_SUBAGENT_DEPTH=5, as a nested child's environment would
// have it, is refused with SUBAGENT_DEPTH_EXCEEDED and nothing starts; (2)
// a parent's child `nester` (read, subagent) delegates to `nester`, which
// is at the default limit of 2: its model is offered neither `subagent`
// nor `task`, so the chain stops there and its own `nester` and `scout`
// never run.
func TestServiceDecidesTheDepth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.newLocalWorld()
	writeAgent(t, e.agentDir, "nester", "read, subagent")
	// The service the first parent starts gives its children that
	// delegate the extension under test.
	e.parentEnvExtra = append(e.parentEnvExtra, "SUBAGENTS_EXTENSION_DIR="+parentExtension(t))

	// A top-level pi starts the service and delegates.
	p := e.startParent("json", filepath.Join(t.TempDir(), "first.jsonl"), e.scriptDelegation("first", "the first answer"))
	p.wait(t)
	e.checkDelegation("first", "the first answer")

	// A pi that says it is five levels deep asks the running service.
	p = e.withExtra([]string{"PI_SUBAGENT_DEPTH=5"}, func() *parentPi {
		return e.startParent("json", filepath.Join(t.TempDir(), "deep.jsonl"), e.scriptDelegation("deep", "never answered"))
	})
	p.wait(t)
	// Errorf: the chain below is a case of its own.
	if got := detailsText(t, p, "subagent"); !strings.Contains(got, "SUBAGENT_DEPTH_EXCEEDED") {
		t.Errorf("a pi at depth 5 delegated: %.600s", got)
	}
	if n := len(e.model.RequestsFor("c-deep")); n != 0 {
		t.Errorf("the refused child asked its model %d times", n)
	}

	// The chain: parent -> nester (1) -> nester (2) -> nester (3) -> scout (4).
	deeper := func(agent, next string) scriptedmodel.Step {
		return call("subagent", map[string]any{"agent": agent, "task": "[[script:" + next + "]] Go one level deeper."})
	}
	e.model.Script("parent-chain", deeper("nester", "n1"), scriptedmodel.Step{Text: "Done."})
	e.model.Script("n1", deeper("nester", "n2"), finalizeStep("n1 is done"))
	e.model.Script("n2", deeper("nester", "n3"), finalizeStep("n2 is done"))
	e.model.Script("n3", deeper("scout", "n4"), finalizeStep("n3 is done"))
	e.model.Script("n4", finalizeStep("n4 is done"))
	p = e.startParent("json", filepath.Join(t.TempDir(), "chain.jsonl"), "[[script:parent-chain]] Start the chain.")
	p.wait(t)

	n1, n2 := e.model.RequestsFor("n1"), e.model.RequestsFor("n2")
	if len(n1) == 0 || !slices.Contains(toolNames(n1[0].Parsed), "subagent") {
		t.Fatalf("the depth-1 nester was not offered subagent (%d requests)", len(n1))
	}
	if len(n2) == 0 {
		t.Fatal("the depth-1 nester's child never ran")
	}
	if tools := toolNames(n2[0].Parsed); slices.Contains(tools, "subagent") || slices.Contains(tools, "task") {
		t.Fatalf("the depth-2 nester, at the limit, was offered %v", tools)
	}
	if n3, n4 := len(e.model.RequestsFor("n3")), len(e.model.RequestsFor("n4")); n3 != 0 || n4 != 0 {
		t.Fatalf("levels beyond the limit ran: depth 3 asked its model %d times, depth 4 %d", n3, n4)
	}
	if got := toolResultText(t, e.model.RequestsFor("parent-chain"), 1); !strings.Contains(got, "n1 is done") {
		t.Fatalf("the parent's result: %s", got)
	}
}

// TestKnobsArePerPi: the task contract's OHM_SUBAGENTS_OUTPUT_MAX_CHARS and
// OHM_SUBAGENTS_TASK_MAX_EVENTS belong to the pi that sets them. The pi
// that starts the service caps its task's output at 100; then two pis at
// once on that service: one with 50 and one event, its task gets 50
// characters and one timeline event; the other, with neither set, gets the
// whole output and the default timeline, not the first pi's cap.
func TestKnobsArePerPi(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.newLocalWorld()
	long := strings.Repeat("0123456789", 32) + "seven!!"
	task := func(name string) string {
		e.model.Script("c-"+name, finalizeStep(long))
		e.model.Script("parent-"+name,
			call("task", map[string]any{"op": "start", "subagent_type": "scout", "description": name, "prompt": "[[script:c-" + name + "]] Report at length."}),
			scriptedmodel.Step{Text: "Read it."},
		)
		return "[[script:parent-" + name + "]] Get the long report."
	}
	result := func(p *parentPi) (output string, timeline int) {
		t.Helper()
		d := toolResultDetails(t, p, "task")
		if len(d) != 1 {
			t.Fatalf("%d task results: %s", len(d), detailsText(t, p, "task"))
		}
		out, _ := d[0]["output"].(string)
		var events []any
		if items, _ := d[0]["items"].([]any); len(items) == 1 {
			item, _ := items[0].(map[string]any)
			events, _ = item["timeline"].([]any)
		}
		return out, len(events)
	}

	first := e.withExtra([]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS=100"}, func() *parentPi {
		return e.startParent("json", filepath.Join(t.TempDir(), "first.jsonl"), task("first"))
	})
	first.wait(t)
	if out, _ := result(first); out != long[:100] {
		t.Fatalf("the first pi's task output: %d characters, want its cap of 100", len(out))
	}

	capped := e.withExtra([]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS=50", "OHM_SUBAGENTS_TASK_MAX_EVENTS=1"}, func() *parentPi {
		return e.startParent("json", filepath.Join(t.TempDir(), "capped.jsonl"), task("capped"))
	})
	plain := e.startParent("json", filepath.Join(t.TempDir(), "plain.jsonl"), task("plain"))
	capped.wait(t)
	plain.wait(t)
	if out, events := result(capped); out != long[:50] || events != 1 {
		t.Fatalf("the pi with 50 characters and one event got %d characters and %d events", len(out), events)
	}
	if out, events := result(plain); out != long || events < 2 {
		t.Fatalf("the pi without knobs got %d of %d characters and %d events, want the whole output and the default timeline", len(out), len(long), events)
	}
}

// runToGrandchild runs a top task `lead` (depth 1) whose child `deep`
// (depth 2, the default limit) finishes, and returns the child's and the
// grandchild's sessions and the worker's nesting key.
func runToGrandchild(t *testing.T, e *env, c *cli) (child, grandchild, key string) {
	t.Helper()
	e.model.Script("lead", taskCall("deep", "[[script:deep]] Find the answer."), finalizeStep("The lead is done."))
	e.model.Script("deep", finalizeStep("The answer is 42."))
	env, out := c.json(0, "", "run", "--agent", "lead", "[[script:lead]] Delegate the search.")
	if len(env.Items) != 1 || env.Items[0].Status != "completed" {
		t.Fatalf("the top task: %s", out)
	}
	raw, err := os.ReadFile(filepath.Join(e.dataDir, connection.NestingKeyName))
	if err != nil {
		t.Fatalf("the worker's nesting key: %v", err)
	}
	return env.Items[0].TaskID, waitForNested(t, c, env.Items[0].TaskID), strings.TrimSpace(string(raw))
}

// TestACallerCannotLieAboutItsSession: a grandchild's session (depth 2)
// is what Temporal records; a call that names it with the worker's token
// is refused at the limit even when it claims depth 0, before and after the
// worker restarts (the key is a file); naming it without the token, or
// with the token of another session, is PERMISSION_DENIED; nothing starts.
func TestACallerCannotLieAboutItsSession(t *testing.T) {
	t.Parallel()
	e, cfg, stop := newNestingEnv(t)
	c := e.cli()
	child, grandchild, key := runToGrandchild(t, e, c)
	tokenOf := func(session string) string { return connection.SessionToken(key, session) }
	// In the test's folder, as the other calls: a run it wrongly started
	// would be this folder's, which the list at the end asks for (the
	// shared server holds other tests' leaf runs).
	try := func(env ...string) string {
		t.Helper()
		code, out, _ := runSubagentsIn(t, e.workDir, append(e.cliEnv(), env...),
			append(append([]string{"start", "--json"}, c.args...), "--agent", "leaf", "[[script:never]] Too deep.")...)
		if code == 0 {
			t.Fatalf("a call as %v started work:\n%s", env, out)
		}
		return out
	}
	as := func(session, token string) []string {
		return []string{"PI_SUBAGENT_PARENT_SESSION=" + session, "PI_SUBAGENT_TOKEN=" + token, "PI_SUBAGENT_DEPTH=0"}
	}
	if out := try(as(grandchild, tokenOf(grandchild))...); !strings.Contains(out, `"SUBAGENT_DEPTH_EXCEEDED"`) {
		t.Fatalf("the grandchild's session, claiming depth 0:\n%s", out)
	}
	if out := try("PI_SUBAGENT_PARENT_SESSION="+grandchild, "PI_SUBAGENT_DEPTH=0"); !strings.Contains(out, `"PERMISSION_DENIED"`) {
		t.Fatalf("the grandchild's session without its token:\n%s", out)
	}
	if out := try(as(grandchild, tokenOf(child))...); !strings.Contains(out, `"PERMISSION_DENIED"`) {
		t.Fatalf("the grandchild's session with the child's token:\n%s", out)
	}
	stop()
	e.startWorkerWith(shared.client, cfg)
	if out := try(as(grandchild, tokenOf(grandchild))...); !strings.Contains(out, `"SUBAGENT_DEPTH_EXCEEDED"`) {
		t.Fatalf("after the worker's restart:\n%s", out)
	}
	if listed, out := c.json(0, "", "list", "--agent", "leaf", "--cwd", e.workDir); len(listed.Runs) != 0 {
		t.Fatalf("a refused call started something: %s", out)
	}
	if n := len(e.model.RequestsFor("never")); n != 0 {
		t.Fatalf("a refused call's child asked its model %d times", n)
	}
}

// TestAStickySessionStartsAtTheCallersDepth: a child (depth 1) whose
// `subagent` call names a new sessionId starts that session one level
// below itself, as any delegation of its: the grandchild, whose profile
// lists task, is at the limit and is offered no delegation tool.
func TestAStickySessionStartsAtTheCallersDepth(t *testing.T) {
	t.Parallel()
	e, _, _ := newNestingEnv(t)
	writeAgent(t, e.agentDir, "keeper", "read, subagent")
	e.model.Script("keeper", call("subagent", map[string]any{"agent": "deep", "task": "[[script:kept]] Find the answer.", "sessionId": "kept-session-1"}),
		finalizeStep("The keeper is done."))
	e.model.Script("kept", finalizeStep("The answer is 42."))
	env, out := e.cli().json(0, "", "run", "--agent", "keeper", "[[script:keeper]] Keep a session.")
	if len(env.Items) != 1 || env.Items[0].Status != "completed" {
		t.Fatalf("the top task: %s", out)
	}
	kept := e.model.RequestsFor("kept")
	if len(kept) == 0 {
		t.Fatal("the sticky session never ran")
	}
	if tools := toolNames(kept[0].Parsed); slices.Contains(tools, "task") {
		t.Fatalf("the sticky session a depth-1 child started was offered %v", tools)
	}
}

// TestACallerAtTheLimitStartsNoPlanOrSchedule: a caller that runs as a
// grandchild's session (depth 2, the default limit), with that session's
// token as its worker gave it and no claim of depth (PI_SUBAGENT_DEPTH and
// PI_SUBAGENT_CHILD unset, as a child's bash may leave them), starts no
// plan, resumes no top-level plan (not even with its own steps) and makes
// no schedule: each is SUBAGENT_DEPTH_EXCEEDED, and nothing starts.
func TestACallerAtTheLimitStartsNoPlanOrSchedule(t *testing.T) {
	t.Parallel()
	e, _, _ := newNestingEnv(t)
	c := e.cli()
	_, grandchild, key := runToGrandchild(t, e, c)
	asGrandchild := []string{"PI_SUBAGENT_PARENT_SESSION=" + grandchild, "PI_SUBAGENT_TOKEN=" + connection.SessionToken(key, grandchild)}
	refused := func(what, out string) {
		t.Helper()
		if !strings.Contains(out, `"SUBAGENT_DEPTH_EXCEEDED"`) {
			t.Fatalf("%s as the grandchild:\n%s", what, out)
		}
	}

	// A top-level plan, cancelled while its step runs, is there to resume.
	goOn := filepath.Join(e.workDir, "go-on")
	e.model.Script("lim-b", bashStep("test -f "+goOn+" || sleep 120"), finalizeStep("b: done"))
	started, _ := c.json(0, "", "start", "--plan", writePlan(t, e, "top", api.Plan{Steps: []api.Step{
		{Key: "b", Agent: "implementer", Task: "[[script:lim-b]] Build."},
	}}))
	if _, err := e.model.WaitForRequests(e.ctx(), 1, func(r scriptedmodel.Request) bool { return r.Script == "lim-b" }); err != nil {
		t.Fatal(err)
	}
	c.json(0, "", "cancel", started.DelegationID)
	c.json(1, "", "wait", started.DelegationID)
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := len(e.model.RequestsFor("lim-b"))

	own := writePlan(t, e, "own", api.Plan{Steps: []api.Step{{Key: "x", Agent: "leaf", Task: "[[script:never]] Too deep."}}})
	run := func(args ...string) string {
		t.Helper()
		code, out, _ := runSubagentsIn(t, e.workDir, append(e.parentEnv(), asGrandchild...), args...)
		if code == 0 {
			t.Fatalf("subagents %v as the grandchild started work:\n%s", args, out)
		}
		return out
	}
	refused("a plan", run(append(append([]string{"start", "--json"}, c.args...), "--plan", own)...))
	refused("resume", run(append(append([]string{"resume", "--json"}, c.args...), started.DelegationID)...))
	refused("resume with its own steps", run(append(append([]string{"resume", "--json"}, c.args...), "--plan", own, started.DelegationID)...))
	sched, code := e.scheduleCmd(append(e.parentEnv(), asGrandchild...), "create", "--every", "1h", "--agent", "leaf", "[[script:never]] Too deep.")
	if code == 0 || sched.Error == nil || string(sched.Error.Code) != "SUBAGENT_DEPTH_EXCEEDED" {
		t.Fatalf("schedule create as the grandchild: exit %d, %+v", code, sched.Error)
	}

	if ended, _ := c.json(1, "", "wait", started.DelegationID); ended.Status != "cancelled" || ended.Plan.Attempt != 1 {
		t.Fatalf("the top-level plan after the refused resumes: %s, attempt %d", ended.Status, ended.Plan.Attempt)
	}
	if n := len(e.model.RequestsFor("lim-b")); n != before {
		t.Fatalf("the plan's step asked its model %d more times after the refused resumes", n-before)
	}
	if n := len(e.model.RequestsFor("never")); n != 0 {
		t.Fatalf("a refused call's child asked its model %d times", n)
	}
	if listed := e.mustSchedule(nil, "list", "--cwd", e.workDir); len(listed.Schedules) != 0 {
		t.Fatalf("a refused create made a schedule: %+v", listed.Schedules)
	}
}

// TestAMessageToARunningSessionNeedsNoProof: a send that only queues a
// message on a running session starts no work, so a caller's stale token
// (its session gone) does not block it; the same caller starting work is
// still refused.
func TestAMessageToARunningSessionNeedsNoProof(t *testing.T) {
	t.Parallel()
	e, _, _ := newNestingEnv(t)
	slow := finalizeStep("done slowly")
	slow.DelayMS = 6000
	e.model.Script("slowone", slow)
	e.model.Script("next", finalizeStep("the next turn"))
	c := e.cli()
	started, _ := c.json(0, "", "start", "--agent", "leaf", "[[script:slowone]] Take your time.")
	if _, err := e.model.WaitForRequests(e.ctx(), 1, func(r scriptedmodel.Request) bool { return r.Script == "slowone" }); err != nil {
		t.Fatal(err)
	}
	stale := append(e.cliEnv(), "PI_SUBAGENT_PARENT_SESSION=a-session-long-gone", "PI_SUBAGENT_TOKEN=stale")
	code, out, errOut := runSubagents(t, stale, append(append([]string{"send", "--json"}, c.args...), started.TaskID, "[[script:next]] Then this.")...)
	var sent struct {
		AcceptedTurn int `json:"accepted_turn"`
	}
	if err := json.Unmarshal([]byte(out), &sent); code != 0 || err != nil || sent.AcceptedTurn != 2 {
		t.Fatalf("a message to the running session: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	code, out, _ = runSubagents(t, stale, append(append([]string{"start", "--json"}, c.args...), "--agent", "leaf", "[[script:never]] New work.")...)
	if code == 0 || !strings.Contains(out, `"PERMISSION_DENIED"`) {
		t.Fatalf("new work with the stale token: exit %d\n%s", code, out)
	}
}
