package activities

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
)

// sessionLines is a pi session file of two runs: a header, a system
// message, then user/assistant/toolResult messages and a custom entry that
// does not count.
var sessionLines = []string{
	`{"type":"session","version":3,"id":"s1","cwd":"/w"}`,
	`{"type":"message","id":"m0","message":{"role":"system","content":"","sections":{}}}`,
	`{"type":"message","id":"m1","message":{"role":"user","content":"Find the config loader"}}`,
	`{"type":"message","id":"m2","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Looking."},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"config.go"}}],"stopReason":"toolUse"}}`,
	`{"type":"message","id":"m3","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"` + strings.Repeat("x", 600) + `"}],"isError":false}}`,
	`{"type":"custom","id":"e1","customType":"other","data":{"message":"not a message"}}`,
	`{"type":"message","id":"m4","message":{"role":"assistant","content":[{"type":"toolCall","id":"c2","name":"subagent_finalize","arguments":{"status":"SUCCESS","result":"config.go:12"}}],"stopReason":"toolUse"}}`,
	`{"type":"message","id":"m5","message":{"role":"user","content":[{"type":"text","text":"Now the tests"}]}}`,
	`{"type":"message","id":"m6","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"500: upstream down"}}`,
}

func TestFormatTranscript(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(sessionLines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	msgs, err := readMessages(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 6 {
		t.Fatalf("messages = %d, want 6 (system and custom entries do not count)", len(msgs))
	}
	if missing, err := readMessages(filepath.Join(dir, "missing.jsonl")); len(missing) != 0 || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %d messages, error %v; want none and not-exist", len(missing), err)
	}
	tests := []struct {
		name string
		runs []api.RunMark
		want []string
		not  []string
	}{
		{
			name: "one run has no header",
			runs: nil,
			want: []string{"Find the config loader\nLooking.\n→ read: {\"path\":\"config.go\"}\n[tool result]: " + strings.Repeat("x", 500) + "...\n→ subagent_finalize:", "[Error: 500: upstream down]"},
			not:  []string{"=== Run", "hmm", "not a message", "\n---\n"},
		},
		{
			name: "two runs are separated and labelled",
			runs: []api.RunMark{{Turn: 1, State: "completed", FirstMessage: 0}, {Turn: 2, State: "failed", FirstMessage: 4}},
			want: []string{"=== Run 1/2 (completed) ===\nFind the config loader", "\n---\n=== Run 2/2 (failed) ===\nNow the tests\n[Error: 500: upstream down]"},
		},
		{
			name: "marks past the end give empty runs, not a panic",
			runs: []api.RunMark{{Turn: 1, State: "completed"}, {Turn: 2, State: "running", FirstMessage: 99}},
			want: []string{"=== Run 2/2 (running) ==="},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FormatTranscript(msgs, tc.runs, nil)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("transcript lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("transcript holds %q:\n%s", n, got)
				}
			}
		})
	}
}

func TestReadSession(t *testing.T) {
	a, cwd, file := newReader(t)
	if err := os.WriteFile(file, []byte(strings.Join(sessionLines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	long := "secret sk-abcdefghijklmnopqrstuvwxyz0123 in /home/someone/x " + strings.Repeat("y", MaxReadChars)
	if err := os.WriteFile(artifactFile(file, 2), []byte(long), 0o600); err != nil {
		t.Fatal(err)
	}
	// 4.5 MB of multi-byte and escaped text: fewer characters than the cap,
	// far more bytes than Temporal takes.
	wide := strings.Repeat("é€<\"", 600_000)
	if err := os.WriteFile(artifactFile(file, 3), []byte(wide), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		req       api.ReadRequest
		found     bool
		truncated bool
		want      string
		wantErr   string
	}{
		{name: "transcript", req: api.ReadRequest{SessionID: "sess-1", Agent: "scout", Cwd: cwd, What: api.ReadTranscript}, found: true, want: "Find the config loader"},
		{name: "output of a turn, sanitized and capped at its end", req: api.ReadRequest{SessionID: "sess-1", Agent: "scout", Cwd: cwd, What: api.ReadOutput, Turn: 2}, found: true, truncated: true, want: "earlier characters omitted"},
		{name: "output of wide characters, capped by what JSON takes", req: api.ReadRequest{SessionID: "sess-1", Agent: "scout", Cwd: cwd, What: api.ReadOutput, Turn: 3}, found: true, truncated: true, want: "earlier characters omitted"},
		{name: "no artifact for that turn", req: api.ReadRequest{SessionID: "sess-1", Agent: "scout", Cwd: cwd, What: api.ReadOutput, Turn: 1}},
		{name: "no session file on this worker", req: api.ReadRequest{SessionID: "other", Agent: "scout", Cwd: cwd, What: api.ReadTranscript}},
		{name: "relative cwd", req: api.ReadRequest{SessionID: "sess-1", Cwd: "rel", What: api.ReadTranscript}, wantErr: "cwd must be an absolute path"},
		{name: "session ID with a slash", req: api.ReadRequest{SessionID: "../x", Cwd: cwd, What: api.ReadTranscript}, wantErr: "is not valid"},
		{name: "agent that climbs out of the data dir", req: api.ReadRequest{SessionID: "sess-1", Agent: "../../../../tmp/x/notes", Cwd: cwd, What: api.ReadTranscript}, wantErr: `agent "../../../../tmp/x/notes" is not valid`},
		{name: "unknown kind", req: api.ReadRequest{SessionID: "sess-1", Cwd: cwd, What: "both"}, wantErr: `not "both"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := a.ReadSession(context.Background(), tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Found != tc.found || res.Truncated != tc.truncated {
				t.Fatalf("found=%v truncated=%v, want %v %v", res.Found, res.Truncated, tc.found, tc.truncated)
			}
			if !strings.Contains(res.Text, tc.want) {
				t.Fatalf("text lacks %q: %.200s", tc.want, res.Text)
			}
			if strings.Contains(res.Text, "sk-abcdefghijklmnop") || strings.Contains(res.Text, "/home/someone") {
				t.Fatalf("text is not sanitized: %.200s", res.Text)
			}
			if tc.truncated && len([]rune(res.Text)) > MaxReadChars+100 {
				t.Fatalf("text is %d characters, over the cap", len([]rune(res.Text)))
			}
			if b, _ := json.Marshal(res); len(b) > MaxReadBytes+1000 {
				t.Fatalf("the result is %d bytes as JSON, over the cap", len(b))
			}
		})
	}
}

// TestReadOutputPages: an output too long for one answer is read whole,
// page by page, each page within the answer's cap whatever its characters.
func TestReadOutputPages(t *testing.T) {
	a, cwd, file := newReader(t)
	for _, tc := range []struct {
		name, text string
		pages      int
	}{
		{"short", "all of it", 1},
		{"wide characters", strings.Repeat("é€<\"", 300_000), 4},
		{"plain, longer than the character cap", strings.Repeat("y", 2*MaxReadChars+5), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(artifactFile(file, 1), []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			req := api.ReadRequest{SessionID: "sess-1", Agent: "scout", Cwd: cwd, What: api.ReadOutput, Turn: 1, Paged: true}
			pages := 0
			for {
				res, err := a.ReadSession(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if b, _ := json.Marshal(res); len(b) > MaxReadBytes+1000 {
					t.Fatalf("page %d is %d bytes as JSON, over the cap", pages, len(b))
				}
				got.WriteString(res.Text)
				if res.Next == 0 {
					break
				}
				if res.Next <= req.From || pages > 100 {
					t.Fatalf("page %d does not move on: next %d after %d", pages, res.Next, req.From)
				}
				req.From = res.Next
			}
			if got.String() != tc.text {
				t.Fatalf("the pages hold %d characters, want the %d of the output", len([]rune(got.String())), len([]rune(tc.text)))
			}
			if pages != tc.pages {
				t.Fatalf("%d pages, want %d", pages, tc.pages)
			}
		})
	}
}

// newReader is activities on a data dir of their own, a task folder, and
// the path of session sess-1's file (its folder made) in both.
func newReader(t *testing.T) (a *Activities, cwd, file string) {
	t.Helper()
	dataDir, cwd := t.TempDir(), t.TempDir()
	a, err := New(Config{DataDir: dataDir, Home: "/home/someone"})
	if err != nil {
		t.Fatal(err)
	}
	file = SessionFile(dataDir, cwd, "scout", "sess-1")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	return a, cwd, file
}
