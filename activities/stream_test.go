package activities

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
)

// The testdata files are real `pi --mode json` output of pi 0.87.1 against
// the scripted model.
func TestStreamRecordedRuns(t *testing.T) {
	tests := []struct {
		file       string
		text       string
		stop       string
		errMessage string
		failed     bool
		usage      api.Usage
		tools      []api.ToolRow
	}{
		{
			file: "text-reply.jsonl", text: "Hello from the script", stop: "stop",
			usage: api.Usage{Input: 100, Output: 20, Cost: 0.00014, Turns: 1},
		},
		{
			file: "provider-400.jsonl", stop: "error", failed: true, usage: api.Usage{Turns: 1},
			errMessage: `400: {"message":"bad thing"}`,
		},
		{
			file: "bash-tool.jsonl", text: "done", stop: "stop",
			usage: api.Usage{Input: 200, Output: 40, Cost: 0.00028, Turns: 2},
			tools: []api.ToolRow{{ID: "call_0_0", Name: "bash", Args: `{"command":"echo hi"}`, Status: "ok"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var s Stream
			if err := readLines(bytes.NewReader(data), maxLineBytes, apply(&s)); err != nil {
				t.Fatal(err)
			}
			if s.FinalText != tt.text || s.StopReason != tt.stop || s.ErrorMessage != tt.errMessage || s.Failed() != tt.failed {
				t.Fatalf("text %q stop %q error %q failed %v", s.FinalText, s.StopReason, s.ErrorMessage, s.Failed())
			}
			if s.SessionID == "" || !s.Settled || s.BadLines != 0 || s.Events != bytes.Count(data, []byte("\n")) {
				t.Fatalf("session %q settled %v bad %d events %d", s.SessionID, s.Settled, s.BadLines, s.Events)
			}
			if !usageClose(s.Usage, tt.usage) {
				t.Fatalf("usage %+v, want %+v", s.Usage, tt.usage)
			}
			if fmt.Sprint(s.ToolRows) != fmt.Sprint(tt.tools) {
				t.Fatalf("tool rows %+v, want %+v", s.ToolRows, tt.tools)
			}
		})
	}
}

func apply(s *Stream) func([]byte) { return func(b []byte) { s.Apply(b) } }

func usageClose(a, b api.Usage) bool {
	d := a.Cost - b.Cost
	a.Cost, b.Cost = 0, 0
	return a == b && d < 1e-12 && d > -1e-12
}

func TestStreamFinalizeAndEdgeCases(t *testing.T) {
	lines := []string{
		`{"type":"session","id":"s-1"}` + "\r\n",
		"not json at all\n",
		`{"type":"some_future_event","payload":{}}` + "\n",
		`{"type":"tool_execution_start","toolCallId":"c1","toolName":"subagent_finalize","args":{"status":"SUCCESS"}}` + "\n",
		`{"type":"tool_execution_end","toolCallId":"c1","toolName":"subagent_finalize","result":{},"isError":true}` + "\n",
		`{"type":"tool_execution_start","toolCallId":"c2","toolName":"subagent_finalize","args":{"status":"SUCCESS","result":"the answer","verdict":" clean\n"}}` + "\n",
		`{"type":"tool_execution_end","toolCallId":"c2","toolName":"subagent_finalize","result":{},"isError":false}` + "\n",
		`{"type":"tool_execution_start","toolCallId":"c3","toolName":"subagent_finalize","args":{"status":"ERROR","error":"late"}}` + "\n",
		`{"type":"tool_execution_end","toolCallId":"c3","toolName":"subagent_finalize","result":{},"isError":false}` + "\n",
		`{"type":"message_end","message":{"role":"user","content":"ignored"}}` + "\n",
		`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"529 overloaded"}` + "\n",
		`{"type":"auto_retry_end","success":true,"attempt":2}` + "\n",
		// RPC mode's answers to commands are not events; a refusal is kept.
		`{"id":"switch","type":"response","command":"switch_session","success":true}` + "\n",
		`{"id":"prompt","type":"response","command":"prompt","success":false,"error":"Model not found"}` + "\n",
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"stopReason":"toolUse"}}`,
	}
	var s Stream
	if err := readLines(strings.NewReader(strings.Join(lines, "")), maxLineBytes, apply(&s)); err != nil {
		t.Fatal(err)
	}
	if s.AutoRetries != 1 || s.AutoRetryError != "529 overloaded" {
		t.Fatalf("auto retries %d %q", s.AutoRetries, s.AutoRetryError)
	}
	if s.SessionID != "s-1" || s.BadLines != 1 || s.Events != 12 {
		t.Fatalf("session %q bad %d events %d", s.SessionID, s.BadLines, s.Events)
	}
	if s.CommandError != "prompt: Model not found" {
		t.Fatalf("command error %q", s.CommandError)
	}
	if s.Finalize == nil || *s.Finalize != (api.Finalize{Status: "SUCCESS", Result: "the answer", Verdict: "clean"}) {
		t.Fatalf("finalize = %+v: want the first successful call", s.Finalize)
	}
	if len(s.ToolRows) != 3 || s.ToolRows[0].Status != "error" || s.ToolRows[1].Status != "ok" {
		t.Fatalf("tool rows = %+v", s.ToolRows)
	}
	if s.FinalText != "a\nb" || s.StopReason != "toolUse" || s.Failed() || s.Settled {
		t.Fatalf("text %q stop %q failed %v settled %v", s.FinalText, s.StopReason, s.Failed(), s.Settled)
	}
}

func TestStreamHugeLine(t *testing.T) {
	// A tool result of many megabytes arrives as one JSONL record.
	big := strings.Repeat("x", 12<<20)
	input := `{"type":"tool_execution_start","toolCallId":"c","toolName":"read","args":{"path":"` + big + `"}}` + "\n" +
		`{"type":"message_end","message":{"role":"assistant","content":"after the big line","stopReason":"stop"}}` + "\n"
	var s Stream
	if err := readLines(strings.NewReader(input), maxLineBytes, apply(&s)); err != nil {
		t.Fatal(err)
	}
	if s.FinalText != "after the big line" || len(s.ToolRows) != 1 {
		t.Fatalf("text %q rows %d", s.FinalText, len(s.ToolRows))
	}
	if n := len([]rune(s.ToolRows[0].Args)); n != argsPreviewChars {
		t.Fatalf("args preview is %d runes, want %d", n, argsPreviewChars)
	}
}

func TestValidateCwd(t *testing.T) {
	tests := []struct {
		cwd  string
		want string
	}{
		{"/abs/path", ""},
		{"relative/path", "cwd must be an absolute path"},
		{"", "cwd must be an absolute path"},
		{"/abs/../etc", "cwd must not contain '..' path segments"},
		{"/abs/..", "cwd must not contain '..' path segments"},
		{"/abs/..hidden", ""},
	}
	for _, tt := range tests {
		err := api.ValidateCwd(tt.cwd)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("ValidateCwd(%q) = %q, want %q", tt.cwd, got, tt.want)
		}
	}
}

func TestSessionFileLayout(t *testing.T) {
	a := SessionFile("/data", "/repo/one", "scout", "abc")
	b := SessionFile("/data", "/repo/two", "scout", "abc")
	if filepath.Dir(a) == filepath.Dir(b) {
		t.Fatal("different cwds share a session folder")
	}
	if filepath.Base(a) != "scout_abc.jsonl" || !strings.HasPrefix(a, "/data/sessions/") {
		t.Fatalf("session file %s", a)
	}
	if SessionFile("/data", "/repo/one", "scout", "abc") != a {
		t.Fatal("session file path is not stable")
	}
}

// FuzzStreamApply feeds the parser corrupt, truncated and oversized lines:
// it must never panic, count every record it accepts, and keep its rows
// consistent with the tool calls it saw.
func FuzzStreamApply(f *testing.F) {
	for _, name := range []string{"text-reply.jsonl", "bash-tool.jsonl", "provider-400.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"type":"tool_execution_end","toolName":"subagent_finalize","toolCallId":"x"}`))
	f.Add([]byte(`{"type":"message_end","message":{"role":"assistant","content":7,"usage":{"input":-1}}}`))
	f.Add([]byte("{\"type\":\"message_end\"\n\x00\xff{}\n[]\nnull\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Stream
		records := 0
		for _, line := range bytes.Split(data, []byte("\n")) {
			if s.Apply(line) != "" {
				records++
			}
		}
		if records > s.Events {
			t.Fatalf("%d records named, %d events counted", records, s.Events)
		}
		if s.ToolCallCount() != len(s.ToolRows) {
			t.Fatal("tool call count and rows disagree")
		}
		for _, row := range s.ToolRows {
			if row.Status != "running" && row.Status != "ok" && row.Status != "error" {
				t.Fatalf("row status %q", row.Status)
			}
		}
	})
}

// TestStreamEventTimeline: the task contract's event_count counts the structured
// events (not the streaming deltas, not the tool calls), and the timeline
// keeps the latest MaxTimeline of them.
func TestStreamEventTimeline(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "bash-tool.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// Not events of the run: the deltas, and the session header a warm child
	// in RPC mode does not print.
	deltas := bytes.Count(data, []byte(`"type":"message_update"`)) + bytes.Count(data, []byte(`"type":"tool_execution_update"`)) +
		bytes.Count(data, []byte(`"type":"session"`))
	tests := []struct {
		name string
		max  int
		keep int
	}{
		{"no timeline", 0, 0},
		{"capped", 3, 3},
		{"room for all", 1000, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Stream{MaxTimeline: tt.max}
			if err := readLines(bytes.NewReader(data), maxLineBytes, apply(&s)); err != nil {
				t.Fatal(err)
			}
			if s.Captured != s.Events-deltas || s.Captured <= s.ToolCallCount() {
				t.Fatalf("captured %d of %d events (%d deltas), %d tool calls", s.Captured, s.Events, deltas, s.ToolCallCount())
			}
			keep := tt.keep
			if keep < 0 {
				keep = s.Captured
			}
			if len(s.Timeline) != keep {
				t.Fatalf("timeline holds %d, want %d", len(s.Timeline), keep)
			}
			if keep > 0 && s.Timeline[keep-1].Type != "agent_settled" && s.Timeline[keep-1].Type != "agent_end" {
				t.Fatalf("the timeline does not end with the run's last event: %+v", s.Timeline)
			}
		})
	}
}

// TestReadLinesBound: a line past the bound ends the reading with
// errLineTooLong instead of growing without end; shorter lines, the last one
// without a newline included, are read whole.
func TestReadLinesBound(t *testing.T) {
	tests := []struct {
		name  string
		input string
		max   int
		lines []string
		err   error
	}{
		{"short lines", "ab\ncd\nef", 10, []string{"ab\n", "cd\n", "ef"}, nil},
		{"exactly the bound", "abcd\n", 5, []string{"abcd\n"}, nil},
		{"one past it", "ok\nabcdef\nnever\n", 5, []string{"ok\n"}, errLineTooLong},
		{"no newline at all", strings.Repeat("x", 200<<10), 100 << 10, nil, errLineTooLong},
		{"longer than the reader's buffer", strings.Repeat("y", 150<<10) + "\n", 200 << 10, []string{strings.Repeat("y", 150<<10) + "\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := readLines(strings.NewReader(tt.input), tt.max, func(b []byte) { got = append(got, string(b)) })
			if !errors.Is(err, tt.err) || fmt.Sprint(got) != fmt.Sprint(tt.lines) {
				t.Fatalf("err %v lines %d, want %v %d", err, len(got), tt.err, len(tt.lines))
			}
		})
	}
}

// TestProcStopsAnEndlessLine: a child printing without a newline is cut
// at the stream's limit (the overflow signal that stops it) rather than read
// into memory.
func TestProcStopsAnEndlessLine(t *testing.T) {
	p, err := startProc(testReaper(t), "/bin/sh", []string{"-c", "head -c 50000000 /dev/zero | tr '\\0' x; sleep 30"}, t.TempDir(), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.overflow:
	case <-time.After(20 * time.Second):
		t.Fatal("no overflow after 20 s")
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	if err := p.reap(); p.readErr != errLineTooLong {
		t.Fatalf("read error %v (wait %v)", p.readErr, err)
	}
}

// FuzzReadLines: whatever pi prints, the lines read are the input's own
// prefix, cut after each newline, none longer than the bound; the reading
// ends with all of it or errLineTooLong.
func FuzzReadLines(f *testing.F) {
	f.Add([]byte("a\nbb\n"), 3)
	f.Add([]byte("no newline"), 4)
	f.Add([]byte("\n\n\n"), 1)
	f.Add(bytes.Repeat([]byte("z"), 70<<10), 80<<10)
	f.Fuzz(func(t *testing.T, input []byte, max int) {
		if max < 1 || max > 1<<20 {
			return
		}
		var read []byte
		err := readLines(bytes.NewReader(input), max, func(b []byte) {
			if len(b) > max {
				t.Fatalf("a line of %d bytes passed the bound %d", len(b), max)
			}
			if i := bytes.IndexByte(b, '\n'); i >= 0 && i != len(b)-1 {
				t.Fatalf("a line holds a newline before its end: %q", b)
			}
			read = append(read, b...)
		})
		if !bytes.HasPrefix(input, read) {
			t.Fatal("the lines are not the input's prefix")
		}
		switch {
		case err == nil && len(read) != len(input):
			t.Fatalf("read %d of %d bytes without an error", len(read), len(input))
		case err != nil && !errors.Is(err, errLineTooLong):
			t.Fatalf("error %v", err)
		}
	})
}

// TestPreviewSanitizesOnlyItsSource: a preview of arguments of any size is
// the one the whole sanitized text would give, secrets masked whole,
// wherever white space moves them.
func TestPreviewSanitizesOnlyItsSource(t *testing.T) {
	z := NewSanitizer("/home/alice")
	key := "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Repeat(strings.Repeat("A", 64)+"\n", 50) + "-----END RSA PRIVATE KEY-----"
	token := "ghp_" + strings.Repeat("a1B2", 9)
	tests := []struct{ name, args string }{
		{"short", `{"command":"echo ` + token + `"}`},
		{"a token, then much more", `{"command":"echo ` + token + ` ` + strings.Repeat("x", 256<<10) + `"}`},
		{"white space, then a token", `{"command":"` + strings.Repeat(" ", 128<<10) + token + ` ` + strings.Repeat("y", 256<<10) + `"}`},
		{"a key, then much more", `{"content":` + strconvQuote(key) + `,"more":"` + strings.Repeat("z", 256<<10) + `"}`},
		{"a key after white space", `{"content":"` + strings.Repeat(" ", 64<<10) + `",` + `"key":` + strconvQuote(key+strings.Repeat(" ", 128<<10)+"tail") + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole := clip(strings.Join(strings.Fields(z.Sanitize(tt.args)), " "), argsPreviewChars)
			got := preview(z, json.RawMessage(tt.args))
			if got != whole {
				t.Fatalf("preview %q, the whole text's %q", got, whole)
			}
			if strings.Contains(got, token[4:12]) || strings.Contains(got, "AAAAAAAA") {
				t.Fatalf("preview %q keeps a secret", got)
			}
		})
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
