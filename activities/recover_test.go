package activities

import (
	"os"
	"path/filepath"
	"testing"
)

// Session file lines as pi 0.87.1 writes them (session-format.md).
const (
	lineSession    = `{"type":"session","version":3,"id":"s1","timestamp":"2026-11-22T10:00:00.000Z","cwd":"/repo"}`
	lineUser       = `{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":[{"type":"text","text":"Do it."}]}}`
	lineBashCall   = `{"type":"message","id":"a2","parentId":"a1","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}],"stopReason":"toolUse","usage":{"input":100,"output":10,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.001}}}}`
	lineBashResult = `{"type":"message","id":"a3","parentId":"a2","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"a.go"}],"isError":false}}`
	lineFinCall    = `{"type":"message","id":"a4","parentId":"a3","message":{"role":"assistant","content":[{"type":"toolCall","id":"c2","name":"subagent_finalize","arguments":{"status":"SUCCESS","result":"found a.go"}}],"stopReason":"toolUse","usage":{"input":120,"output":12,"cacheRead":5,"cacheWrite":0,"cost":{"total":0.002}}}}`
	lineFinResult  = `{"type":"message","id":"a5","parentId":"a4","message":{"role":"toolResult","toolCallId":"c2","toolName":"subagent_finalize","content":[{"type":"text","text":"Result recorded."}],"isError":false}}`
	lineFinRefused = `{"type":"message","id":"a5","parentId":"a4","message":{"role":"toolResult","toolCallId":"c2","toolName":"subagent_finalize","content":[{"type":"text","text":"status SUCCESS requires a result"}],"isError":true}}`
	lineText       = `{"type":"message","id":"a6","parentId":"a1","message":{"role":"assistant","content":[{"type":"text","text":"The answer."}],"stopReason":"stop","usage":{"input":50,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.0005}}}}`
	lineError      = `{"type":"message","id":"a7","parentId":"a1","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"500: overloaded"}}`
)

func TestReplayRunFromSessionFile(t *testing.T) {
	tests := []struct {
		name        string
		lines       []string
		from        int
		noFinalize  bool
		ended       bool
		result      string
		usageTurns  int
		toolRows    int
		wantMessage int
	}{
		{"finalized after a tool", []string{lineSession, lineUser, lineBashCall, lineBashResult, lineFinCall, lineFinResult}, 0, false, true, "found a.go", 2, 2, 5},
		{"only this run's part counts", []string{lineSession, lineUser, lineBashCall, lineBashResult, lineFinCall, lineFinResult}, 3, false, true, "found a.go", 1, 1, 5},
		{"interrupted in a tool", []string{lineSession, lineUser, lineBashCall}, 0, false, false, "", 1, 1, 2},
		{"refused finalize is not a result", []string{lineSession, lineUser, lineFinCall, lineFinRefused}, 0, false, false, "", 1, 1, 3},
		{"finalize from an earlier run", []string{lineSession, lineUser, lineFinCall, lineFinResult, lineUser}, 3, false, false, "", 0, 0, 4},
		{"no finalize: final answer", []string{lineSession, lineUser, lineText}, 0, true, true, "", 1, 0, 2},
		{"no finalize: provider error", []string{lineSession, lineUser, lineError}, 0, true, false, "", 0, 0, 2},
		{"no finalize: still calling tools", []string{lineSession, lineUser, lineBashCall, lineBashResult}, 0, true, false, "", 1, 1, 3},
		{"nothing written yet", []string{lineSession}, 0, false, false, "", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			var body string
			for _, l := range tt.lines {
				body += l + "\n"
			}
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			msgs, err := readMessages(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != tt.wantMessage {
				t.Fatalf("%d messages, want %d", len(msgs), tt.wantMessage)
			}
			s := replayRun(msgs[min(tt.from, len(msgs)):], nil)
			if got := runEnded(s, tt.noFinalize); got != tt.ended {
				t.Fatalf("runEnded = %v, want %v (stream %+v)", got, tt.ended, s)
			}
			if tt.result != "" && (s.Finalize == nil || s.Finalize.Result != tt.result || s.Finalize.Status != "SUCCESS") {
				t.Fatalf("finalize %+v, want result %q", s.Finalize, tt.result)
			}
			if s.Usage.Turns != tt.usageTurns || len(s.ToolRows) != tt.toolRows {
				t.Fatalf("usage turns %d, tool rows %d; want %d, %d", s.Usage.Turns, len(s.ToolRows), tt.usageTurns, tt.toolRows)
			}
		})
	}
}

// FuzzReplaySessionFile: whatever a session file holds (cut by a crash,
// written by another pi), reading and replaying it never panics.
func FuzzReplaySessionFile(f *testing.F) {
	for _, seed := range []string{
		lineSession + "\n" + lineUser + "\n" + lineFinCall + "\n" + lineFinResult + "\n",
		lineUser + "\n" + lineBashCall[:len(lineBashCall)/2],
		`{"type":"message","message":{"role":"toolResult","toolCallId":"x","toolName":"subagent_finalize","isError":false}}`,
		`{"type":"message","message":{"role":"assistant","content":"plain text","stopReason":"stop"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		msgs, _ := readMessages(path)
		for _, noFinalize := range []bool{false, true} {
			s := replayRun(msgs, nil)
			_ = runEnded(s, noFinalize)
		}
	})
}
