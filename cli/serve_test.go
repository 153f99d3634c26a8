package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// TestServe drives `subagents serve` as the extension does: one JSON line
// per request, replies tagged with the request's ID, an exit code last.
func TestServe(t *testing.T) {
	requests := strings.Join([]string{
		`{"id":1,"args":["profiles","--json"]}`,
		`not json`,
		`{"id":2,"args":["explode","--json"]}`,
		`{"id":3,"args":["serve"]}`,
		`{"id":4,"args":["status","--json","--","some-id"]}`,
	}, "\n") + "\n"
	var out strings.Builder
	// Port 1 refuses connections: a verb that needs Temporal gets
	// SERVICE_UNAVAILABLE, and serve goes on answering the others.
	err := clientMain(context.Background(), []string{"serve", "--address", "127.0.0.1:1"}, IO{
		In: strings.NewReader(requests), Out: &out, Err: io.Discard, Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := map[int64][]string{}
	exits := map[int64]int{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r ServeReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply is not JSON: %q", sc.Text())
		}
		if _, done := exits[r.ID]; done {
			t.Fatalf("request %d: a reply after its exit: %s", r.ID, sc.Text())
		}
		switch {
		case r.Line != nil:
			lines[r.ID] = append(lines[r.ID], *r.Line)
		case r.Exit != nil:
			exits[r.ID] = *r.Exit
		}
	}
	tests := []struct {
		id   int64
		exit int
		code string // the envelope's error code, "" for none
		has  string
	}{
		{1, 0, "", `"scope": "builtin"`},
		{0, 2, "INVALID_INPUT", "request: "},
		{2, 2, "INVALID_INPUT", `unknown command \"explode\"`},
		{3, 2, "INVALID_INPUT", "serve cannot run inside serve"},
		{4, 3, "SERVICE_UNAVAILABLE", "cannot reach Temporal at 127.0.0.1:1"},
	}
	for _, tt := range tests {
		text := strings.Join(lines[tt.id], "\n")
		var env client.Envelope
		if err := json.Unmarshal([]byte(text), &env); err != nil {
			t.Fatalf("request %d: output is not one envelope: %v\n%s", tt.id, err, text)
		}
		code := ""
		if env.Error != nil {
			code = string(env.Error.Code)
		}
		if exits[tt.id] != tt.exit || code != tt.code || !strings.Contains(text, tt.has) {
			t.Errorf("request %d: exit %d code %q, want %d %q with %q:\n%.400s", tt.id, exits[tt.id], code, tt.exit, tt.code, tt.has, text)
		}
	}
}

// A cancel line ends a request that is still running (a wait the caller no
// longer wants); serve answers it with its exit code and stays up.
func TestServeCancel(t *testing.T) {
	pr, pw := io.Pipe()
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- clientMain(context.Background(), []string{"serve", "--address", "127.0.0.1:1"}, IO{In: pr, Out: &out, Err: io.Discard, Getenv: func(string) string { return "" }})
	}()
	// A wait on an address that refuses is quick to fail; cancel races it,
	// and either way the request must end with one exit line.
	_, _ = io.WriteString(pw, `{"id":7,"args":["wait","--json","--","x"]}`+"\n")
	_, _ = io.WriteString(pw, `{"id":7,"cancel":true}`+"\n")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), `"id":7,"exit"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no exit for the cancelled request:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
