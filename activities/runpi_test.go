package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
)

// These tests run the real pi from the lockfile against the scripted model,
// through the SDK's activity test environment.

type harness struct {
	t     *testing.T
	model *scriptedmodel.Server
	acts  *Activities
	cwd   string
}

// waitsMostly marks a test whose time is mostly waiting, on the scripted
// model's delays and its children's timeouts: it runs beside the other
// such tests (t.Parallel), after the package's other tests, which run one
// at a time. One at a time, this package's -race run kept 0.63 of the two
// cores busy over 145 s.
func waitsMostly(t *testing.T) { t.Parallel() }

func newHarness(t *testing.T, tune func(*Config)) *harness {
	t.Helper()
	pi, err := filepath.Abs(filepath.Join("..", "extension", "node_modules", ".bin", "pi"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pi); err != nil {
		t.Fatalf("pi from the lockfile is missing (run `make test`, which runs npm ci): %v", err)
	}
	model, err := scriptedmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	root := t.TempDir()
	agentDir := filepath.Join(root, "agent")
	if err := model.WritePiAgentDir(agentDir); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(root, "work")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Pi:                pi,
		PathPrefix:        filepath.Dir(pi),
		DataDir:           filepath.Join(root, "data"),
		Env:               scriptedmodel.PiEnv(agentDir),
		Home:              "/home/tester",
		HeartbeatInterval: 200 * time.Millisecond,
		KillGrace:         2 * time.Second,
	}
	if tune != nil {
		tune(&cfg)
	}
	acts, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, model: model, acts: acts, cwd: cwd}
}

func (h *harness) input(prompt string) api.RunPiInput {
	return api.RunPiInput{
		SessionID: strings.ReplaceAll(strings.ToLower(h.t.Name()), "/", "-"),
		Agent:     "tester",
		Turn:      1,
		Prompt:    prompt,
		Cwd:       h.cwd,
		Model:     scriptedmodel.ModelRef,
	}
}

// run executes RunPi in the activity test environment.
func (h *harness) run(in api.RunPiInput, stop chan struct{}) (api.RunPiResult, error) {
	h.t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetTestTimeout(time.Minute)
	if stop != nil {
		env.SetWorkerStopChannel(stop)
	}
	env.RegisterActivity(h.acts.RunPi)
	val, err := env.ExecuteActivity(h.acts.RunPi, in)
	var res api.RunPiResult
	if err == nil {
		if err := val.Get(&res); err != nil {
			h.t.Fatal(err)
		}
	}
	return res, err
}

func (h *harness) mustRun(in api.RunPiInput) api.RunPiResult {
	h.t.Helper()
	res, err := h.run(in, nil)
	if err != nil {
		h.t.Fatalf("RunPi: %v", err)
	}
	return res
}

func finalizeCall(args string) scriptedmodel.ToolCall {
	return scriptedmodel.ToolCall{Name: api.FinalizeToolName, Arguments: args}
}

func errCode(r api.RunPiResult) errcode.Code {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

func TestRunPiFinalize(t *testing.T) {
	waitsMostly(t)
	h := newHarness(t, nil)
	h.model.Script("success", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"The answer is 42."}`)}})
	h.model.Script("error", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"ERROR","error":"Cannot reach the repo.","result":"partial: found 2 files"}`)}})
	h.model.Script("text-only", scriptedmodel.Step{Text: "I forgot to finalize."})
	h.model.Script("invalid-then-valid",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS"}`)}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"fixed"}`)}},
	)
	h.model.Script("mixed-batch",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{
			{Name: "read", Arguments: `{"path":"notes.txt"}`},
			finalizeCall(`{"status":"SUCCESS","result":"from a mixed batch"}`),
		}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo after"}`}}},
		scriptedmodel.Step{Text: "done"},
	)
	h.model.Script("verdict", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"No findings.","verdict":"clean"}`)}})
	h.model.Script("verdict-of-two-words",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"Two issues.","verdict":"needs changes"}`)}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"Two issues.","verdict":"changes"}`)}},
	)
	if err := os.WriteFile(filepath.Join(h.cwd, "notes.txt"), []byte("some notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		script   string
		finalize *api.Finalize
		output   string
		code     errcode.Code
		check    func(t *testing.T, r api.RunPiResult)
	}{
		{"success", &api.Finalize{Status: "SUCCESS", Result: "The answer is 42."}, "The answer is 42.", "", nil},
		{"error", &api.Finalize{Status: "ERROR", Error: "Cannot reach the repo.", Result: "partial: found 2 files"}, "Cannot reach the repo.\n\npartial: found 2 files", "", nil},
		{"text-only", nil, "I forgot to finalize.", "", nil},
		{"invalid-then-valid", &api.Finalize{Status: "SUCCESS", Result: "fixed"}, "fixed", "", func(t *testing.T, r api.RunPiResult) {
			if len(r.ToolRows) != 2 || r.ToolRows[0].Status != "error" || r.ToolRows[1].Status != "ok" {
				t.Fatalf("tool rows %+v", r.ToolRows)
			}
			reqs := h.model.RequestsFor("invalid-then-valid")
			if len(reqs) != 2 {
				t.Fatalf("model saw %d requests, want 2", len(reqs))
			}
			if !strings.Contains(lastToolText(reqs[1]), `requires a non-empty "result"`) {
				t.Fatalf("the model did not see why its first finalize failed: %q", lastToolText(reqs[1]))
			}
		}},
		{"verdict", &api.Finalize{Status: "SUCCESS", Result: "No findings.", Verdict: "clean"}, "No findings.", "", nil},
		{"verdict-of-two-words", &api.Finalize{Status: "SUCCESS", Result: "Two issues.", Verdict: "changes"}, "Two issues.", "", func(t *testing.T, r api.RunPiResult) {
			reqs := h.model.RequestsFor("verdict-of-two-words")
			if len(reqs) != 2 || !strings.Contains(lastToolText(reqs[1]), `"verdict" must be one word`) {
				t.Fatalf("the model was not told the verdict is one word: %d requests, %q", len(reqs), lastToolText(reqs[len(reqs)-1]))
			}
		}},
		{"mixed-batch", &api.Finalize{Status: "SUCCESS", Result: "from a mixed batch"}, "from a mixed batch", "", func(t *testing.T, r api.RunPiResult) {
			// After the valid finalize, the next tool call is refused.
			var bash *api.ToolRow
			for i := range r.ToolRows {
				if r.ToolRows[i].Name == "bash" {
					bash = &r.ToolRows[i]
				}
			}
			if bash == nil || bash.Status != "error" {
				t.Fatalf("tool call after finalize was not refused: %+v", r.ToolRows)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			in := h.input("[[script:" + tt.script + "]] Do the task.")
			in.SessionID = tt.script
			r := h.mustRun(in)
			r.SessionFile = filepath.Base(r.SessionFile)
			if (r.Finalize == nil) != (tt.finalize == nil) || (r.Finalize != nil && *r.Finalize != *tt.finalize) {
				t.Fatalf("finalize = %+v, want %+v", r.Finalize, tt.finalize)
			}
			if r.Output != tt.output || errCode(r) != tt.code || r.ExitCode != 0 {
				t.Fatalf("output %q code %q exit %d", r.Output, errCode(r), r.ExitCode)
			}
			if r.SessionFile != "tester_"+tt.script+".jsonl" || r.Attempt != 1 || r.Usage.Turns == 0 {
				t.Fatalf("session %s attempt %d usage %+v", r.SessionFile, r.Attempt, r.Usage)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// lastToolText is the text of the last tool result the model was sent.
func lastToolText(r scriptedmodel.Request) string {
	for i := len(r.Parsed.Messages) - 1; i >= 0; i-- {
		if m := r.Parsed.Messages[i]; m.Role == "tool" {
			return m.Text()
		}
	}
	return ""
}

func TestRunPiProviderErrors(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Script("bad-request", scriptedmodel.Step{Status: 400, Body: `{"error":{"message":"model does not support tools"}}`})
	h.model.Script("server-error", scriptedmodel.Step{Status: 500, Body: `{"error":{"message":"upstream exploded"}}`})
	tests := []struct {
		script string
		want   string
	}{
		{"bad-request", `400: {"message":"model does not support tools"`},
		{"server-error", "upstream exploded"},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			in := h.input("[[script:" + tt.script + "]] go")
			in.SessionID = tt.script
			r := h.mustRun(in)
			// pi exits 0 here: the result must still be a failure.
			if r.ExitCode != 0 || r.StopReason != "error" || errCode(r) != errcode.Failed {
				t.Fatalf("exit %d stop %q error %+v", r.ExitCode, r.StopReason, r.Error)
			}
			if !strings.Contains(r.Error.Message, tt.want) || r.Error.Category != errcode.CategoryRuntime {
				t.Fatalf("error %+v does not carry the provider's message %q", r.Error, tt.want)
			}
		})
	}
}

// TestRunPiUnknownModelIsAResult: pi exits 1 for a model of an unknown
// provider; that is the child's failure, returned as a result (no retry).
func TestRunPiUnknownModelIsAResult(t *testing.T) {
	h := newHarness(t, nil)
	in := h.input("[[script:none]] go")
	in.Model = "nosuch/model"
	r := h.mustRun(in)
	if errCode(r) != errcode.Failed || r.ExitCode != 1 || !strings.Contains(r.Error.Message, `Model "nosuch/model" not found`) {
		t.Fatalf("unknown model: exit %d error %+v", r.ExitCode, r.Error)
	}
	if len(h.model.Requests()) != 0 {
		t.Fatal("a request reached the model for an unknown model")
	}
}

func TestRunPiTimeout(t *testing.T) {
	waitsMostly(t)
	h := newHarness(t, nil)
	zero, two := 0, 2
	h.model.Script("hang", scriptedmodel.Step{Hang: true})
	// Twelve tool calls, the first at once and then one a second, then the
	// model hangs. The 8 s timeout passes while they still come: it counts
	// from the run's start, and make test runs this package under -race
	// beside the end-to-end tests, where a cold pi took more than 4 s to
	// its first call (2026-11-29, when the timeout was 4 s).
	busy := []scriptedmodel.Step{}
	for i := range 12 {
		delay := 1000
		if i == 0 {
			delay = 0
		}
		busy = append(busy, scriptedmodel.Step{DelayMS: delay, ToolCalls: []scriptedmodel.ToolCall{
			{Name: "bash", Arguments: fmt.Sprintf(`{"command":"echo step %d"}`, i)},
		}})
	}
	h.model.Script("busy", append(busy, scriptedmodel.Step{Hang: true})...)

	t.Run("hanging model", func(t *testing.T) {
		in := h.input("[[script:hang]] go")
		in.SessionID, in.TimeoutSeconds, in.ExtendDebounceSeconds = "hang", 1, &zero
		start := time.Now()
		r := h.mustRun(in)
		if errCode(r) != errcode.Timeout || r.Error.Message != "Timed out after 1s. Consider resuming with a longer timeout." {
			t.Fatalf("error %+v", r.Error)
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the timeout did not stop the child")
		}
	})
	t.Run("extended while tools run", func(t *testing.T) {
		in := h.input("[[script:busy]] go")
		in.SessionID, in.TimeoutSeconds, in.ExtendDebounceSeconds = "busy", 8, &two
		r := h.mustRun(in)
		if errCode(r) != errcode.Timeout || r.Error.Message != "Timed out after 8s. Consider resuming with a longer timeout." {
			t.Fatalf("error %+v", r.Error)
		}
		// The timeout passed at 8 s, but the child kept calling tools, so it
		// made all twelve calls before it went idle for the 2 s debounce.
		if r.ToolCalls != 12 {
			t.Fatalf("tool calls %d: the timeout was not extended while tools ran", r.ToolCalls)
		}
		if r.DurationMS < 13000 {
			t.Fatalf("killed after %d ms: before the last call's debounce passed", r.DurationMS)
		}
	})
}

func TestRunPiLoopDetection(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Script("loop", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"ls"}`}}, Repeat: true})
	three := 3
	in := h.input("[[script:loop]] go")
	in.LoopingToolCount = &three
	r := h.mustRun(in)
	if errCode(r) != errcode.LoopDetected || r.Error.Message != "Loop detected: sub-agent is repeating the same tool calls" {
		t.Fatalf("error %+v", r.Error)
	}
	if r.ToolCalls != 3 {
		t.Fatalf("stopped after %d calls, want 3", r.ToolCalls)
	}
}

func TestRunPiOutputLimits(t *testing.T) {
	waitsMostly(t)
	t.Run("output cap", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.OutputMaxChars = 100 })
		long := strings.Repeat("é", 250)
		h.model.Script("long", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"` + long + `"}`)}})
		r := h.mustRun(h.input("[[script:long]] go"))
		if !r.OutputTruncated || r.OutputTotalChars != 250 || r.OutputReturnedChars != 100 || len([]rune(r.Output)) != 100 {
			t.Fatalf("truncated %v total %d returned %d len %d", r.OutputTruncated, r.OutputTotalChars, r.OutputReturnedChars, len([]rune(r.Output)))
		}
		if errCode(r) != errcode.OutputTruncated || len([]rune(r.Finalize.Result)) != 100 {
			t.Fatalf("error %+v finalize %d chars", r.Error, len([]rune(r.Finalize.Result)))
		}
		full, err := os.ReadFile(r.ArtifactFile)
		if err != nil || string(full) != long {
			t.Fatalf("artifact does not hold the full output: %v (%d bytes)", err, len(full))
		}
	})
	t.Run("task cap", func(t *testing.T) {
		// Issue 31, item 5: the task's settings (outputMaxChars,
		// OHM_SUBAGENTS_OUTPUT_MAX_CHARS), which Admit reads, beat the
		// worker's cap, smaller or larger.
		for _, cap := range []int{40, 150} {
			h := newHarness(t, func(c *Config) {
				c.OutputMaxChars = 100
				c.Admit = func(api.RunPiInput) (profiles.Admission, error) { return profiles.Admission{OutputMaxChars: cap}, nil }
			})
			long := strings.Repeat("x", 327)
			h.model.Script("own", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"` + long + `"}`)}})
			r := h.mustRun(h.input("[[script:own]] go"))
			if !r.OutputTruncated || r.OutputTotalChars != 327 || r.OutputReturnedChars != cap || len(r.Output) != cap || len(r.Finalize.Result) != cap {
				t.Fatalf("cap %d: truncated %v total %d returned %d output %d finalize %d", cap, r.OutputTruncated, r.OutputTotalChars,
					r.OutputReturnedChars, len(r.Output), len(r.Finalize.Result))
			}
		}
	})
	t.Run("stream hard cap", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MaxStreamBytes = 64 << 10 })
		h.model.Script("flood", scriptedmodel.Step{Text: strings.Repeat("flood ", 40<<10)})
		r := h.mustRun(h.input("[[script:flood]] go"))
		if errCode(r) != errcode.OutputTruncated || !strings.Contains(r.Error.Message, "the child was stopped") {
			t.Fatalf("error %+v", r.Error)
		}
	})
}

func TestRunPiSanitizes(t *testing.T) {
	h := newHarness(t, nil)
	secret := "Found sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA and ghp_0123456789abcdefghijABCDEFGHIJ012345 in /home/tester/project/.env; " +
		"Authorization: Bearer abcdefghijklmnopqrstuvwxyz"
	args, _ := json.Marshal(map[string]string{"status": "SUCCESS", "result": secret})
	h.model.Script("secrets", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(string(args))}})
	r := h.mustRun(h.input("[[script:secrets]] go"))
	artifact, err := os.ReadFile(r.ArtifactFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, leaked := range []string{"sk-ant-api03", "ghp_0123", "/home/tester", "abcdefghijklmnopqrstuvwxyz"} {
		if strings.Contains(r.Output, leaked) || strings.Contains(r.Finalize.Result, leaked) || strings.Contains(string(artifact), leaked) {
			t.Fatalf("%q leaked:\noutput %s\nartifact %s", leaked, r.Output, artifact)
		}
	}
	if !strings.Contains(r.Output, "~/project/.env") || !strings.Contains(r.Output, "[REDACTED anthropic key]") {
		t.Fatalf("output %q", r.Output)
	}
}

// TestRunPiWorkerStopKillsEverything stops the worker while pi runs a
// `sleep` through its bash tool: pi and the sleep are both gone, by pid.
func TestRunPiWorkerStopKillsEverything(t *testing.T) {
	h := newHarness(t, nil)
	pidFile := filepath.Join(h.cwd, "sleep.pid")
	h.model.Script("sleeper", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{
		{Name: "bash", Arguments: `{"command":"sleep 300 & echo $! > sleep.pid; wait"}`},
	}}, scriptedmodel.Step{Text: "never"})
	stop := make(chan struct{})
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(pidFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				close(stop)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(stop)
	}()
	start := time.Now()
	_, err := h.run(h.input("[[script:sleeper]] go"), stop)
	if err == nil || !strings.Contains(err.Error(), "worker stopped") {
		t.Fatalf("err = %v, want a retryable worker-stopped error", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("pi was not stopped promptly")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil || pid <= 0 {
		t.Fatalf("sleep pid %q", b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the sleep (pid %d) that pi's bash started outlived pi", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRunPiFilesAsContext(t *testing.T) {
	h := newHarness(t, nil)
	lines := "one\ntwo\nthree\nfour\nfive\n"
	must(t, os.WriteFile(filepath.Join(h.cwd, "five.txt"), []byte(lines), 0o644))
	must(t, os.WriteFile(filepath.Join(h.cwd, "big.log"), []byte(strings.Repeat("x", 1100*1024)), 0o644))
	must(t, os.WriteFile(filepath.Join(h.cwd, "binary.bin"), []byte{0xff, 0xfe, 0x00, 0x80}, 0o644))
	h.model.Script("files", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"read"}`)}})

	in := h.input("[[script:files]] Summarise the files.")
	in.Files = []api.FileSpec{
		{Path: "five.txt"},
		{Path: "five.txt", Start: 2, End: 3},
		{Path: "five.txt", Head: 1},
		{Path: "five.txt", Tail: 2},
		{Path: filepath.Join(h.cwd, "five.txt"), Start: 5},
		{Path: "missing.txt"},
		{Path: "big.log"},
		{Path: "binary.bin"},
	}
	h.mustRun(in)
	user := h.onlyPrompt("files")
	want := "=== five.txt ===\none\ntwo\nthree\nfour\nfive\n\n" +
		"=== five.txt ===\ntwo\nthree\n\n" +
		"=== five.txt ===\none\n\n" +
		"=== five.txt ===\nfour\nfive\n\n" +
		"=== " + filepath.Join(h.cwd, "five.txt") + " ===\nfive\n\n" +
		"[file not found: missing.txt]\n\n" +
		"[file too large: big.log (1100KB, limit 1024KB)]\n\n" +
		"[could not read file: binary.bin]\n\n" +
		"[[script:files]] Summarise the files."
	if user != want {
		t.Fatalf("prompt the model saw:\n%s\n--- want:\n%s", user, want)
	}
}

// onlyPrompt is the last user message of the one model request script got.
func (h *harness) onlyPrompt(script string) string {
	h.t.Helper()
	reqs := h.model.RequestsFor(script)
	if len(reqs) != 1 {
		h.t.Fatalf("%d requests of %s, want 1", len(reqs), script)
	}
	var user string
	for _, m := range reqs[0].Parsed.Messages {
		if m.Role == "user" {
			user = m.Text()
		}
	}
	return user
}

// TestRunPiLargePrompt: a files[] entry at the documented 1 MiB limit makes
// a prompt far beyond the kernel's 128 KiB per argument; it reaches the
// model whole, and a prompt starting with "-" is still a prompt.
func TestRunPiLargePrompt(t *testing.T) {
	h := newHarness(t, nil)
	big := strings.Repeat("abcdefghij\n", 1024*1024/11)
	must(t, os.WriteFile(filepath.Join(h.cwd, "big.txt"), []byte(big), 0o644))
	h.model.Script("big", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"read it"}`)}})
	in := h.input("--not-a-flag [[script:big]] Read the big file.")
	in.Files = []api.FileSpec{{Path: "big.txt"}}
	r := h.mustRun(in)
	if r.Error != nil || r.Output != "read it" {
		t.Fatalf("result %+v", r)
	}
	user := h.onlyPrompt("big")
	if want := "=== big.txt ===\n" + big + "\n--not-a-flag [[script:big]] Read the big file."; user != want {
		t.Fatalf("the model saw %d bytes, want %d", len(user), len(want))
	}
}

// TestRunPiResumesSessionFile runs a second turn on the same session file:
// the model sees the first turn's messages.
func TestRunPiResumesSessionFile(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Script("turn1", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"remember 7"}`)}})
	h.model.Script("turn2", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"it was 7"}`)}})
	first := h.input("[[script:turn1]] Remember the number 7.")
	r1 := h.mustRun(first)
	second := first
	second.Turn, second.Prompt = 2, "[[script:turn2]] Which number?"
	r2 := h.mustRun(second)
	if r1.SessionFile != r2.SessionFile || r2.Output != "it was 7" {
		t.Fatalf("session %s vs %s, output %q", r1.SessionFile, r2.SessionFile, r2.Output)
	}
	req := h.model.RequestsFor("turn2")[0]
	var sawFirst bool
	for _, m := range req.Parsed.Messages {
		if m.Role == "user" && strings.Contains(m.Text(), "Remember the number 7.") {
			sawFirst = true
		}
	}
	if !sawFirst {
		t.Fatal("the second turn did not carry the first turn's messages")
	}
	if r1.ArtifactFile == r2.ArtifactFile {
		t.Fatal("two turns share one artifact file")
	}
}

func TestRunPiBadInput(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name   string
		mutate func(*api.RunPiInput)
		want   string
	}{
		{"relative cwd", func(in *api.RunPiInput) { in.Cwd = "work" }, "cwd must be an absolute path"},
		{"dotdot cwd", func(in *api.RunPiInput) { in.Cwd = h.cwd + "/../x" }, "cwd must not contain '..' path segments"},
		{"missing cwd", func(in *api.RunPiInput) { in.Cwd = h.cwd + "/nope" }, "is not a folder on this worker"},
		{"empty prompt", func(in *api.RunPiInput) { in.Prompt = "  " }, "prompt must not be empty"},
		{"bad session id", func(in *api.RunPiInput) { in.SessionID = "../etc" }, "is not valid"},
		{"bad file spec", func(in *api.RunPiInput) { in.Files = []api.FileSpec{{Path: "a", Head: 1, Tail: 1}} }, "use one of start/end, head or tail"},
		{"bad fallback model", func(in *api.RunPiInput) { in.FallbackModels = []string{"scripted/scripted-2", "gpt-4o"} }, `fallback model: model "gpt-4o": want <provider>/<model>[:<thinking>]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := h.input("[[script:x]] go")
			tt.mutate(&in)
			_, err := h.run(in, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "INVALID_INPUT") {
				t.Fatalf("err = %v, want INVALID_INPUT %q", err, tt.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunPiAPIKeyOnlyInEnvironment: a profile's apiKey reaches the child in
// its environment, never on its command line, and never in the result.
func TestRunPiAPIKeyOnlyInEnvironment(t *testing.T) {
	const key = "profile-key-7Qx81"
	argvFile := filepath.Join(t.TempDir(), "argv.txt")
	h := newHarness(t, func(c *Config) {
		// A wrapper records the exact command line, then runs the real pi
		// (pi itself overwrites its process title, so /proc cannot tell).
		wrapper := filepath.Join(t.TempDir(), "pi-wrapper")
		script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argvFile + "\nexec " + c.Pi + " \"$@\"\n"
		must(t, os.WriteFile(wrapper, []byte(script), 0o755))
		c.Pi = wrapper
		c.Admit = func(in api.RunPiInput) (profiles.Admission, error) {
			if in.Profile != "keyed" {
				t.Errorf("asked for the key of %q", in.Profile)
			}
			return profiles.Admission{APIKey: key}, nil
		}
	})
	h.model.Script("key", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash",
		Arguments: `{"command":"echo \"$PI_API_KEY $SCRIPTED_API_KEY\" > env.txt"}`}}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"done"}`)}})
	in := h.input("[[script:key]] go")
	in.Profile = "keyed"
	r := h.mustRun(in)
	env, err := os.ReadFile(filepath.Join(h.cwd, "env.txt"))
	must(t, err)
	argv, err := os.ReadFile(argvFile)
	must(t, err)
	if strings.TrimSpace(string(env)) != key+" "+key {
		t.Fatalf("child environment had %q", env)
	}
	if !strings.Contains(string(argv), "--mode\njson\n") || strings.Contains(string(argv), key) {
		t.Fatalf("child command line %q", argv)
	}
	b, _ := json.Marshal(r)
	if strings.Contains(string(b), key) {
		t.Fatal("the key is in the result")
	}
}

// TestRunPiRefusedByAdmit: a run the worker's policy refuses fails with the
// policy's code, is not retried, and never starts pi nor touches the
// session file.
func TestRunPiRefusedByAdmit(t *testing.T) {
	started := filepath.Join(t.TempDir(), "started")
	h := newHarness(t, func(c *Config) {
		wrapper := filepath.Join(t.TempDir(), "pi-wrapper")
		must(t, os.WriteFile(wrapper, []byte("#!/bin/sh\ntouch "+started+"\nexec "+c.Pi+" \"$@\"\n"), 0o755))
		c.Pi = wrapper
		c.Admit = func(in api.RunPiInput) (profiles.Admission, error) {
			return profiles.Admission{}, errcode.New(errcode.PermissionDenied, "extension /tmp/evil.ts is not granted")
		}
	})
	in := h.input("[[script:none]] go")
	in.Extensions = []string{"/tmp/evil.ts"}
	_, err := h.run(in, nil)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(errcode.PermissionDenied) || !app.NonRetryable() {
		t.Fatalf("RunPi: %v, want a non-retryable %s", err, errcode.PermissionDenied)
	}
	if _, err := os.Stat(started); err == nil {
		t.Fatal("pi was started for a refused run")
	}
	if _, err := os.Stat(SessionFile(h.acts.cfg.DataDir, in.Cwd, in.Agent, in.SessionID)); err == nil {
		t.Fatal("a refused run made a session file")
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Fatalf("the model saw %d requests", n)
	}
}

// TestRunPiCeiling: a child that never stops calling tools is extended past
// its timeout (the delegate contract) only up to max_runtime, then ends with
// SUBAGENT_TIMEOUT; and the ceiling is the timeout plus ten minutes unless
// max_runtime says otherwise, never below the timeout.
func TestRunPiCeiling(t *testing.T) {
	waitsMostly(t)
	h := newHarness(t, nil)
	h.model.Script("busy", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"sleep 0.2"}`}}, Repeat: true})
	in := h.input("[[script:busy]] Keep busy.")
	// The timeout must pass while the child calls tools, so that the
	// debounce would extend it: 8 s leaves a cold pi start on a loaded
	// machine time for its first call (make test runs this package under
	// -race beside the end-to-end tests, where one took more than 4 s); at
	// 1 s the child had none yet in CI and was stopped by the timeout itself.
	timeout, ceiling, off, debounce := 8, 11, 0, 60
	in.TimeoutSeconds, in.MaxRuntimeSeconds, in.LoopingToolCount, in.ExtendDebounceSeconds = timeout, &ceiling, &off, &debounce
	start := time.Now()
	r := h.mustRun(in)
	took := time.Since(start)
	if errCode(r) != errcode.Timeout || r.ToolCalls < 3 {
		t.Fatalf("error %+v after %d tool calls", r.Error, r.ToolCalls)
	}
	// Past the timeout, so the debounce did extend it; without the ceiling
	// the 60 s debounce would keep it going.
	if took < 8*time.Second || took > 30*time.Second {
		t.Fatalf("ran %s, want between its 8 s timeout and soon after its 11 s ceiling", took)
	}
	three := 3
	tests := []struct {
		timeout int
		max     *int
		want    time.Duration
	}{
		{60, nil, 60*time.Second + api.DefaultMaxExtension},
		{60, &three, 60 * time.Second},
		{1, &three, 3 * time.Second},
	}
	for _, tt := range tests {
		if got := (api.RunPiInput{TimeoutSeconds: tt.timeout, MaxRuntimeSeconds: tt.max}).Ceiling(); got != tt.want {
			t.Fatalf("Ceiling(%d, %v) = %s, want %s", tt.timeout, tt.max, got, tt.want)
		}
	}
}

// TestServerUnreachable: only a cancel whose cause says the server could
// not be reached lets a child run on; the workflow's cancel, an attempt the
// server no longer knows, and a deadline stop it.
func TestServerUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
		want  bool
	}{
		{"server down", serviceerror.NewUnavailable("connection refused"), true},
		{"heartbeat RPC timed out", serviceerror.NewDeadlineExceeded("deadline"), true},
		{"wrapped", fmt.Errorf("heartbeat: %w", serviceerror.NewUnavailable("x")), true},
		{"workflow cancelled it", temporal.NewCanceledError(), false},
		{"attempt timed out and retried", serviceerror.NewNotFound("invalid activityID or activity already timed out"), false},
		{"namespace gone", serviceerror.NewNamespaceNotFound("default"), false},
		{"plain cancel", context.Canceled, false},
		{"deadline", context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(tc.cause)
			if got := serverUnreachable(ctx); got != tc.want {
				t.Fatalf("serverUnreachable = %v, want %v", got, tc.want)
			}
		})
	}
	if serverUnreachable(context.Background()) {
		t.Fatal("a live context is not an outage")
	}
}
