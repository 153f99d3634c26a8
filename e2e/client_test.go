package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")

// cli runs the subagents binary against the shared server and e's task
// queue, and normalizes what it prints so that golden files hold still.
type cli struct {
	e    *env
	ids  map[string]string
	args []string
}

func (e *env) cli() *cli {
	return &cli{e: e, ids: map[string]string{}, args: []string{
		"--address", shared.server.FrontendAddress(), "--namespace", shared.server.Namespace(), "--task-queue", e.taskQueue,
	}}
}

// demoTimeout bounds `subagents demo`: it starts a service, kills a worker
// under three children and waits for their retries on the next one (the
// RunPi heartbeat timeout and three pi sessions continued), then runs the
// warm-pool tasks and stops. It took 20–46 s in the suite's passing runs
// and past a minute under one run's load.
const demoTimeout = 3 * time.Minute

// commandTimeout is how long a command of the tests may run (argv: its
// verb and arguments): testTimeout; for one told to wait longer
// (`wait --timeout 3m`), that and a margin to print its answer; for the
// demo, demoTimeout. A wait of the cluster test's outage round passed a
// minute under the full suite's load and was killed mid-wait.
func commandTimeout(argv []string) time.Duration {
	if len(argv) > 0 && argv[0] == "demo" {
		return demoTimeout
	}
	for i, a := range argv {
		if a == "--timeout" && i+1 < len(argv) {
			if d, err := time.ParseDuration(argv[i+1]); err == nil && d+30*time.Second > testTimeout {
				return d + 30*time.Second
			}
		}
	}
	return testTimeout
}

// run runs `subagents verb <connection flags> args...` with stdin.
func (c *cli) run(stdin, verb string, args ...string) (code int, stdout, stderr string) {
	c.e.t.Helper()
	// The build (once per test binary, a minute on a loaded machine) is
	// not the command's time.
	bin := subagentsBinary(c.e.t)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout(append([]string{verb}, args...)))
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append([]string{verb}, c.args...), args...)...)
	cmd.Env = append(os.Environ(), c.e.cliEnv()...)
	cmd.Dir = c.e.workDir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			c.e.t.Fatalf("run subagents %s: %v", verb, err)
		}
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// json runs a --json call, checks its exit code and decodes the envelope.
func (c *cli) json(wantCode int, stdin, verb string, args ...string) (client.Envelope, string) {
	c.e.t.Helper()
	code, out, errOut := c.run(stdin, verb, append([]string{"--json"}, args...)...)
	if code != wantCode {
		c.e.t.Fatalf("subagents %s %v: exit %d, want %d\nstdout: %s\nstderr: %s", verb, args, code, wantCode, out, errOut)
	}
	var env client.Envelope
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		c.e.t.Fatalf("subagents %s: stdout is not one envelope: %v\n%s", verb, err, out)
	}
	if env.ContractVersion != client.ContractVersion || env.Backend != "temporal" {
		c.e.t.Fatalf("envelope without contract_version/backend: %s", out)
	}
	return env, out
}

var (
	uuidPattern     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	cwdHashPattern  = regexp.MustCompile(`sessions/[0-9a-f]{8,}/`)
	elapsedPattern  = regexp.MustCompile(`"(elapsed_ms|durationMs|at_ms)": [0-9]+`)
	timePattern     = regexp.MustCompile(`"(started|closed)": "[^"]+"`)
	portPattern     = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
	readIDPattern   = regexp.MustCompile(`read-<ID-[0-9]+>-<ID-[0-9]+>`)
	listTimePattern = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d`)
	secondsPattern  = regexp.MustCompile(`\(\d+\.\ds · `)
	// Whether a run found a warm child depends on how soon the pool's
	// refill ended: a fact of timing, like elapsed_ms.
	warmPattern = regexp.MustCompile(`\n\s*"warm": true,`)
)

// normalize replaces what changes from run to run: IDs (numbered in order
// of appearance across the test), folders, ports, times.
func (c *cli) normalize(s string) string {
	s = uuidPattern.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := c.ids[id]; !ok {
			c.ids[id] = fmt.Sprintf("<ID-%d>", len(c.ids)+1)
		}
		return c.ids[id]
	})
	s = strings.ReplaceAll(s, c.e.dataDir, "$DATA")
	s = strings.ReplaceAll(s, c.e.workDir, "$WORK")
	s = cwdHashPattern.ReplaceAllString(s, "sessions/$$CWDHASH/")
	s = elapsedPattern.ReplaceAllString(s, `"$1": 0`)
	s = timePattern.ReplaceAllString(s, `"$1": "$$TIME"`)
	s = portPattern.ReplaceAllString(s, "127.0.0.1:$$PORT")
	s = readIDPattern.ReplaceAllString(s, "read-$$ID")
	s = secondsPattern.ReplaceAllString(s, "($$SECONDS · ")
	s = warmPattern.ReplaceAllString(s, "")
	return listTimePattern.ReplaceAllString(s, "$$TIME")
}

// golden compares normalized output with testdata/cli/name; -update
// rewrites it.
func (c *cli) golden(name, got string) {
	c.e.t.Helper()
	got = c.normalize(got)
	path := filepath.Join("testdata", "cli", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			c.e.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			c.e.t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		c.e.t.Fatalf("%v (run go test ./e2e -run %s -update to create it)", err, c.e.t.Name())
	}
	if got != string(want) {
		c.e.t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestClientVerbs drives every verb of the command as a program would, with
// --json, through one delegation's life: start a batch with an unknown
// profile, wait, status, output (capped and full), a follow-up turn, the
// transcript of both, list by parent, the parent's ack, cancel of an idle
// and of a running task, a wait that times out, and the error envelopes.
func TestClientVerbs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.outputMaxChars = 60
	long := "alpha: the loader is config/load.go:12; " + strings.Repeat("details ", 12)
	e.model.Script("alpha", finalizeStep(long))
	e.model.Script("beta",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "read", Arguments: `{"path":"notes.txt"}`}}},
		finalizeStep("beta: notes say ship it"))
	e.model.Script("hang", scriptedmodel.Step{Hang: true})
	e.model.Script("gamma", finalizeStep("hi"))
	if err := os.WriteFile(filepath.Join(e.workDir, "notes.txt"), []byte("ship it\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.startWorker(shared.client)
	c := e.cli()

	req := fmt.Sprintf(`{"tasks":[
		{"name":"alpha","prompt":"[[script:alpha]] Find the config loader.","cwd":%q,"model":%q},
		{"name":"ghost","prompt":"Anything.","profile":"nope","cwd":%q}
	],"parent_session_id":"parent-1","deliver":true}`, e.workDir, scriptedmodel.ModelRef, e.workDir)
	started, out := c.json(0, req, "start", "--input", "-")
	c.golden("start.json", out)
	alpha := started.Items[0].TaskID

	waited, out := c.json(1, "", "wait", "--timeout", "60s", started.DelegationID)
	c.golden("wait-delegation.json", out)
	if !waited.Done || waited.WaitStatus != "completed" || waited.BatchStatus != "partial" || waited.Items[1].Error.Code != "UNKNOWN_AGENT" {
		t.Fatalf("wait: %s", out)
	}

	_, out = c.json(0, "", "status", alpha)
	c.golden("status-session.json", out)
	capped, out := c.json(0, "", "output", alpha)
	c.golden("output.json", out)
	full, _ := c.json(0, "", "output", "--full", alpha)
	if !capped.Items[0].OutputTruncated || len([]rune(capped.Text)) != 60 || full.Text != long || full.Items[0].OutputTruncated {
		t.Fatalf("output capped %q (truncated %v), full %q", capped.Text, capped.Items[0].OutputTruncated, full.Text)
	}
	// A page of the full output, from a character on; the last page says
	// no next one.
	page, out := c.json(0, "", "output", "--full", "--from", "10", alpha)
	if page.Text != string([]rune(long)[10:]) || page.NextFrom != 0 {
		t.Fatalf("output --full --from 10: %s", out)
	}
	if bad, out := c.json(2, "", "output", "--from", "10", alpha); bad.Error == nil || bad.Error.Code != "INVALID_INPUT" {
		t.Fatalf("--from without --full: %s", out)
	}

	// A session goes on only with its own agent (the sessions contract).
	refused, out := c.json(2, "", "send", "--agent", "scout", alpha, "[[script:beta]] Now read the notes.")
	if refused.Error == nil || refused.Error.Code != "INVALID_INPUT" ||
		!strings.Contains(refused.Error.Message, `belongs to agent "default", not "scout": continue it with agent "default"`) {
		t.Fatalf("send with another agent: %s", out)
	}
	sent, out := c.json(0, "", "send", "--wait", "--agent", "default", alpha, "[[script:beta]] Now read the notes.")
	c.golden("send.json", out)
	if sent.TaskID != alpha || sent.Items[0].Turn != 2 || sent.Items[0].Output != "beta: notes say ship it" {
		t.Fatalf("send: %s", out)
	}
	transcript, out := c.json(0, "", "transcript", alpha)
	c.golden("transcript.json", out)
	for _, want := range []string{"=== Run 1/2 (completed) ===", "\n---\n=== Run 2/2 (completed) ===", "→ read: {\"path\":\"notes.txt\"}", "[tool result]: ship it"} {
		if !strings.Contains(transcript.Text, want) {
			t.Fatalf("transcript lacks %q:\n%s", want, transcript.Text)
		}
	}

	listed, out := c.json(0, "", "list", "--parent-session", "parent-1")
	c.golden("list.json", out)
	if listed.Count != 2 {
		t.Fatalf("list: %s", out)
	}
	acked, out := c.json(0, "", "ack", "--by", "parent-1", started.DelegationID)
	c.golden("ack.json", out)
	if !acked.Delivered {
		t.Fatalf("ack: %s", out)
	}
	// The delegation completes in the workflow task after the ack, and
	// visibility follows: on a busy machine, a moment later.
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(100 * time.Millisecond) {
		open, _ := c.json(0, "", "list", "--parent-session", "parent-1", "--kind", "delegation", "--open")
		if open.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the acknowledged delegation is still open: %+v", open.Runs)
		}
	}
	_, out = c.json(0, "", "cancel", alpha)
	c.golden("cancel-idle.json", out)

	slow, _ := c.json(0, "", "start", "--name", "slow", "--model", scriptedmodel.ModelRef, "[[script:hang]] Wait for nothing.")
	timedOut, out := c.json(4, "", "wait", "--timeout-ms", "1500", slow.TaskID)
	if timedOut.WaitStatus != "timeout" || timedOut.Done {
		t.Fatalf("wait with timeout: %s", out)
	}
	// A send to a running session queues the next turn.
	queued, out := c.json(0, "", "send", slow.TaskID, "[[script:gamma]] Then say hi.")
	if queued.AcceptedTurn != 2 || queued.DelegationID != "" {
		t.Fatalf("send to a running session: %s", out)
	}
	cancelled, out := c.json(0, "", "cancel", slow.TaskID)
	if cancelled.CancelApplied == nil || !*cancelled.CancelApplied || cancelled.PriorStatus != "running" {
		t.Fatalf("cancel of a running task: %s", out)
	}
	final, out := c.json(0, "", "wait", "--timeout", "30s", slow.TaskID)
	if final.Items[0].Turn != 2 || final.Items[0].Output != "hi" {
		t.Fatalf("the queued turn after the cancel: %s", out)
	}
	transcript, _ = c.json(0, "", "transcript", slow.TaskID)
	if !strings.Contains(transcript.Text, "=== Run 1/2 (cancelled) ===") {
		t.Fatalf("the cancelled turn in the transcript:\n%s", transcript.Text)
	}

	// run: start and wait, plain progress lines when not on a terminal.
	code, text, errText := c.run("", "run", "--model", scriptedmodel.ModelRef, "--name", "quick", "[[script:gamma]] Say hi.")
	if code != 0 || !strings.Contains(text, "✓ default · quick") || !strings.Contains(text, "╰── hi (") {
		t.Fatalf("run: exit %d\n%s\n%s", code, text, errText)
	}

	// Errors: one envelope on stdout, the code in the exit status.
	_, out = c.json(2, "", "status", "no-such-session")
	c.golden("error-not-found.json", out)
	_, out = c.json(2, `{"tasks":[{"prompt":"x","cwd":"relative/dir"}]}`, "start", "--input", "-")
	c.golden("error-bad-cwd.json", out)
	_, out = c.json(2, `{"tasks":[{"prompt":"x"}],"surprise":1}`, "start", "--input", "-")
	c.golden("error-unknown-field.json", out)
	dead := &cli{e: e, ids: c.ids, args: []string{"--address", "127.0.0.1:" + strconv.Itoa(freePort()), "--task-queue", e.taskQueue}}
	unavailable, _ := dead.json(3, "", "status", alpha)
	if unavailable.Error.Code != "SERVICE_UNAVAILABLE" || !strings.Contains(unavailable.Error.Message, "subagents dev") {
		t.Fatalf("unreachable Temporal: %+v", unavailable.Error)
	}

	// What a person sees without --json.
	code, text, _ = c.run("", "status", alpha)
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	c.golden("status-session.txt", text)
	_, text, _ = c.run("", "list", "--parent-session", "parent-1")
	c.golden("list.txt", text)
}

// TestBadInputTable: every malformed request the command can get is one
// coded error envelope (exit 2, or the task's own coded failure), and the
// service goes on serving.
func TestBadInputTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("after", finalizeStep("still serving"))
	agents := filepath.Join(e.workDir, ".pi", "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"both.md": "---\nname: both\napproved_tools: [read]\ndenied_tools: [bash]\n---\nx\n",
		"deep.md": "---\nname: deep\nthinkingLevel: extreme\n---\nx\n",
	} {
		if err := os.WriteFile(filepath.Join(agents, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.startWorker(shared.client)
	c := e.cli()
	w := e.workDir
	many := make([]string, 17)
	for i := range many {
		many[i] = fmt.Sprintf(`{"prompt":"p","cwd":%q}`, w)
	}
	huge := strings.Repeat("x", 17<<20)
	tests := []struct {
		name, request, code, message string
	}{
		{"not JSON", `{"tasks":`, "INVALID_INPUT", "request: "},
		{"tasks missing", `{}`, "INVALID_INPUT", "got none"},
		{"tasks of the wrong type", `{"tasks":"all"}`, "INVALID_INPUT", "cannot unmarshal"},
		{"17 tasks", `{"tasks":[` + strings.Join(many, ",") + `]}`, "INVALID_INPUT", "1 to 16 tasks, got 17"},
		{"empty prompt", fmt.Sprintf(`{"tasks":[{"prompt":"  ","cwd":%q}]}`, w), "INVALID_INPUT", "prompt must not be empty"},
		{"relative cwd", `{"tasks":[{"prompt":"p","cwd":"src"}]}`, "INVALID_INPUT", "cwd must be an absolute path"},
		{"cwd with ..", `{"tasks":[{"prompt":"p","cwd":"/tmp/../etc"}]}`, "INVALID_INPUT", "'..'"},
		{"negative timeout", fmt.Sprintf(`{"tasks":[{"prompt":"p","cwd":%q,"timeout":-5}]}`, w), "INVALID_INPUT", "timeout must be at least 1 second"},
		{"agent and profile disagree", fmt.Sprintf(`{"tasks":[{"prompt":"p","cwd":%q,"agent":"a","profile":"b"}]}`, w), "INVALID_INPUT", "disagree"},
		{"bad file entry", fmt.Sprintf(`{"tasks":[{"prompt":"p","cwd":%q,"files":[{"path":"a","head":1,"tail":2}]}]}`, w), "INVALID_INPUT", "use one of"},
		{"unknown field", `{"tasks":[],"op":"explode"}`, "INVALID_INPUT", `unknown field "op"`},
		{"concurrency 17", fmt.Sprintf(`{"tasks":[{"prompt":"p","cwd":%q}],"max_concurrency":17}`, w), "INVALID_INPUT", "maxConcurrency must be 1 to 16"},
		{"oversize request", `{"tasks":[{"prompt":"` + huge + `"}]}`, "INVALID_INPUT", "request: "},
		{"unknown session to resume", fmt.Sprintf(`{"tasks":[{"prompt":"p","cwd":%q,"resume":"no-such-session"}]}`, w), "SESSION_NOT_FOUND", `Cannot resume: session "no-such-session" not found.`},
		{"host that cannot be a queue", fmt.Sprintf(`{"tasks":[{"prompt":"p","cwd":%q}],"host":"a b"}`, w), "INVALID_INPUT", "cannot name a task queue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, out := c.json(2, tc.request, "start", "--input", "-")
			if env.Error == nil || string(env.Error.Code) != tc.code || !strings.Contains(env.Error.Message, tc.message) {
				t.Fatalf("got %.600s, want %s %q", out, tc.code, tc.message)
			}
		})
	}
	// Refused by the profile, not by the request: the task fails with the
	// profile's coded error, its sibling runs.
	env, out := c.json(1, fmt.Sprintf(`{"tasks":[{"name":"ambiguous","prompt":"p","cwd":%q,"profile":"both"},{"name":"fine","prompt":"[[script:after]] go","cwd":%q,"model":%q}]}`,
		w, w, scriptedmodel.ModelRef), "run", "--input", "-")
	if env.Items[0].Error == nil || env.Items[0].Error.Code != "INVALID_INPUT" || env.Items[1].Output != "still serving" {
		t.Fatalf("profile with a whitelist and a blacklist: %s", out)
	}
	// A profile with a thinking level pi does not know: that task fails
	// with its coded error.
	env, out = c.json(1, fmt.Sprintf(`{"tasks":[{"name":"deep","prompt":"p","cwd":%q,"profile":"deep"}]}`, w), "run", "--input", "-")
	if e := env.Items[0].Error; e == nil || e.Code != "INVALID_INPUT" || !strings.Contains(e.Message, `thinkingLevel "extreme" must be one of`) {
		t.Fatalf("profile with a bad thinking level: %s", out)
	}
	// An operation the command does not have.
	env, out = c.json(2, "", "explode")
	if env.Error == nil || env.Error.Code != "INVALID_INPUT" || !strings.Contains(env.Error.Message, `unknown command "explode"`) {
		t.Fatalf("unknown operation: %s", out)
	}
	// Bytes that are not UTF-8 in a prompt become U+FFFD; the task runs.
	env, out = c.json(0, fmt.Sprintf("{\"tasks\":[{\"prompt\":\"[[script:after]] \xff\xfe go\",\"cwd\":%q,\"model\":%q}]}", w, scriptedmodel.ModelRef), "run", "--input", "-")
	if env.Items[0].Output != "still serving" {
		t.Fatalf("a prompt with bytes that are not UTF-8: %s", out)
	}
}

// TestBatchRejectsItemsOnTheirOwn: the task contract's batch accounting as the start
// envelope gives it: an empty prompt and an unknown profile are that item's
// errors, counted as rejected at once, and the valid item runs.
func TestBatchRejectsItemsOnTheirOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("good", finalizeStep("good done"))
	e.startWorker(shared.client)
	c := e.cli()
	req := fmt.Sprintf(`{"tasks":[
		{"name":"good","prompt":"[[script:good]] Look.","cwd":%q},
		{"name":"ghost","prompt":"Anything.","profile":"nope","cwd":%q},
		{"name":"blank","prompt":"  ","cwd":%q}
	], "tool": "task"}`, e.workDir, e.workDir, e.workDir)
	started, out := c.json(0, req, "start", "--input", "-")
	if *started.AcceptedCount != 1 || *started.RejectedCount != 2 || started.BatchStatus != "partial" {
		t.Fatalf("start: %s", out)
	}
	if it := started.Items[1]; it.Error == nil || it.Error.Code != "UNKNOWN_AGENT" || !strings.Contains(it.Error.Message, `Unknown profile: "nope"`) {
		t.Fatalf("ghost: %s", out)
	}
	if it := started.Items[2]; it.Error == nil || it.Error.Code != "INVALID_INPUT" || !strings.Contains(it.Error.Message, "prompt must not be empty") {
		t.Fatalf("blank: %s", out)
	}
	waited, out := c.json(1, "", "wait", "--timeout", "60s", started.DelegationID)
	if waited.Items[0].Status != "completed" || !strings.Contains(waited.Items[0].Output, "good done") || *waited.RejectedCount != 2 || waited.BatchStatus != "partial" {
		t.Fatalf("wait: %s", out)
	}
	// In the Temporal UI the session reads as its task: summary and details.
	summary, details := uiMetadata(t, e.ctx(), started.Items[0].TaskID)
	if summary != "good (default)" || !strings.Contains(details, "[[script:good]] Look.") || !strings.Contains(details, "cwd: `"+e.workDir+"`") || !strings.Contains(details, started.DelegationID) {
		t.Fatalf("UI metadata: %q\n%s", summary, details)
	}
}

// TestOneTaskDelegationByItsID: a delegation of one new task runs as its
// session's workflow alone (workflow code version 3), and its delegation
// ID still answers every delegation verb: status and list while it runs,
// ack refused until it has ended, cancel, wait, ack; its session answers as
// a session, and a delegation verb of a session refuses it.
func TestOneTaskDelegationByItsID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("one-hang", scriptedmodel.Step{Hang: true})
	e.startWorker(shared.client)
	c := e.cli()
	req := fmt.Sprintf(`{"tasks":[{"name":"lone","prompt":"[[script:one-hang]] Think.","cwd":%q,"model":%q}],"parent_session_id":"parent-one","deliver":true}`,
		e.workDir, scriptedmodel.ModelRef)
	started, out := c.json(0, req, "start", "--input", "-")
	task := started.Items[0].TaskID
	if started.DelegationID != api.OneTaskDelegationID(task) {
		t.Fatalf("start: %s", out)
	}
	if _, err := shared.client.DescribeWorkflowExecution(e.ctx(), started.DelegationID, ""); err == nil {
		t.Fatal("a workflow of the delegation's own ID runs: want only its session's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == "one-hang" }); err != nil {
		t.Fatalf("the child never asked the model: %v", err)
	}
	running, out := c.json(0, "", "status", started.DelegationID)
	if running.Done || running.Status != "running" || running.Items[0].TaskID != task || running.Items[0].Status != "running" {
		t.Fatalf("status while it runs: %s", out)
	}
	open := func() []client.ListItem {
		l, _ := c.json(0, "", "list", "--kind", "delegation", "--open", "--parent-session", "parent-one")
		return l.Runs
	}
	deadline := time.Now().Add(testTimeout)
	for runs := open(); len(runs) != 1 || runs[0].ID != started.DelegationID || runs[0].Kind != "delegation"; runs = open() {
		if time.Now().After(deadline) {
			t.Fatalf("list --kind delegation --open: %+v", runs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if early, out := c.json(2, "", "ack", started.DelegationID); early.Error == nil || early.Error.Code != "SESSION_RUNNING" {
		t.Fatalf("ack while it runs: %s", out)
	}
	if refused, out := c.json(2, "", "send", started.DelegationID, "more"); refused.Error == nil || refused.Error.Code != "INVALID_INPUT" {
		t.Fatalf("send to a delegation ID: %s", out)
	}
	cancelled, out := c.json(0, "", "cancel", started.DelegationID)
	if cancelled.CancelApplied == nil || !*cancelled.CancelApplied || cancelled.PriorStatus != "running" {
		t.Fatalf("cancel: %s", out)
	}
	done, out := c.json(1, "", "wait", "--timeout", "60s", started.DelegationID)
	if !done.Done || done.Status != "cancelled" || done.Items[0].Error == nil || done.Items[0].Error.Code != "CANCELLED" || done.Delivered {
		t.Fatalf("wait after the cancel: %s", out)
	}
	again, out := c.json(0, "", "cancel", started.DelegationID)
	if again.CancelApplied == nil || *again.CancelApplied {
		t.Fatalf("a second cancel: %s", out)
	}
	acked, out := c.json(0, "", "ack", "--by", "parent-one", started.DelegationID)
	if !acked.Delivered {
		t.Fatalf("ack: %s", out)
	}
	for runs := open(); len(runs) != 0; runs = open() {
		if time.Now().After(deadline) {
			t.Fatalf("still open after its ack: %+v", runs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The session stays for a send (sticky), as a delegation's session does.
	session, out := c.json(0, "", "status", task)
	if session.Items[0].Status != "cancelled" {
		t.Fatalf("the session after its delegation: %s", out)
	}
	all, out := c.json(0, "", "list", "--kind", "delegation", "--parent-session", "parent-one")
	if len(all.Runs) != 1 || all.Runs[0].ID != started.DelegationID || all.Runs[0].Open {
		t.Fatalf("list --kind delegation: %s", out)
	}
}

// uiMetadata is what the Temporal UI shows of a workflow above its
// history: its summary and its details.
func uiMetadata(t *testing.T, ctx context.Context, workflowID string) (summary, details string) {
	t.Helper()
	desc, err := shared.client.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	meta := desc.GetExecutionConfig().GetUserMetadata()
	if err := converter.GetDefaultDataConverter().FromPayload(meta.GetSummary(), &summary); err != nil {
		t.Fatal(err)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(meta.GetDetails(), &details); err != nil {
		t.Fatal(err)
	}
	return summary, details
}
