package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// replies collects a connection's replies by request ID.
type replies struct {
	lines map[int64][]string
	exits map[int64]int
}

func parseReplies(t *testing.T, out string) replies {
	t.Helper()
	r := replies{lines: map[int64][]string{}, exits: map[int64]int{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rep ServeReply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			t.Fatalf("reply is not JSON: %q", sc.Text())
		}
		switch {
		case rep.Line != nil:
			r.lines[rep.ID] = append(r.lines[rep.ID], *rep.Line)
		case rep.Exit != nil:
			r.exits[rep.ID] = *rep.Exit
		}
	}
	return r
}

// TestServeConnBadLines: a line over the limit, a line that is not JSON and
// an unknown verb each get INVALID_INPUT under the ID the line carries, and
// the connection answers the next request.
func TestServeConnBadLines(t *testing.T) {
	s := &Server{MaxLine: 1024, dial: func(*command, context.Context) (*client.Client, func(), error) {
		return nil, nil, errcode.New(errcode.ServiceUnavailable, "no Temporal in this test")
	}}
	in := strings.Join([]string{
		`{"id":5,"args":["start","--json"],"input":"` + strings.Repeat("x", 5000) + `"}`,
		`{"id":6,"args":["profiles","--json"]}`,
		`{"id":9, this is not JSON`,
		`{"id":10,"args":["explode","--json"]}`,
		`{"id":11,"args":["status","--json","--","x"]}`,
		`{"id":12,"args":["start","--json"],"input":"bad ` + "\xff" + ` byte"}`,
		``,
	}, "\n") + "\n"
	var out strings.Builder
	if err := s.ServeConn(context.Background(), strings.NewReader(in), &out, ConnOptions{}); err != nil {
		t.Fatal(err)
	}
	r := parseReplies(t, out.String())
	tests := []struct {
		id   int64
		exit int
		has  string
	}{
		{5, errcode.ExitBadInput, "longer than the limit of 1024 bytes"},
		{6, errcode.ExitOK, `"scope": "builtin"`},
		{9, errcode.ExitBadInput, `"code":"INVALID_INPUT"`},
		{10, errcode.ExitBadInput, `unknown command \"explode\"`},
		{11, errcode.ExitUnavailable, "no Temporal in this test"},
		{12, errcode.ExitBadInput, "not valid UTF-8"},
	}
	for _, tt := range tests {
		text := strings.Join(r.lines[tt.id], "\n")
		if got, ok := r.exits[tt.id]; !ok || got != tt.exit || !strings.Contains(text, tt.has) {
			t.Errorf("request %d: exit %d (answered %v), want %d with %q:\n%.300s", tt.id, got, ok, tt.exit, tt.has, text)
		}
	}
	if len(r.exits) != len(tests) {
		t.Errorf("%d exits for %d requests: %v", len(r.exits), len(tests), r.exits)
	}
}

// TestServeConnCancelsOnHangUp: a socket client that hangs up mid-call
// ends its calls; the call's context is cancelled at once.
func TestServeConnCancelsOnHangUp(t *testing.T) {
	cancelled := make(chan struct{})
	s := &Server{dial: func(_ *command, ctx context.Context) (*client.Client, func(), error) {
		<-ctx.Done()
		close(cancelled)
		return nil, nil, ctx.Err()
	}}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var out syncbuf.Buffer
	go func() { done <- s.ServeConn(context.Background(), pr, &out, ConnOptions{CancelOnEOF: true}) }()
	_, _ = io.WriteString(pw, `{"id":1,"args":["wait","--json","--","x"]}`+"\n")
	time.Sleep(50 * time.Millisecond)
	_ = pw.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the call went on after its client hung up")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCallDeadline: a call that is not a wait ends at the service's limit
// with a coded envelope.
func TestCallDeadline(t *testing.T) {
	s := &Server{CallTimeout: 100 * time.Millisecond, dial: func(_ *command, ctx context.Context) (*client.Client, func(), error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}}
	var out strings.Builder
	in := `{"id":3,"args":["status","--json","--","x"]}` + "\n"
	if err := s.ServeConn(context.Background(), strings.NewReader(in), &out, ConnOptions{}); err != nil {
		t.Fatal(err)
	}
	r := parseReplies(t, out.String())
	text := strings.Join(r.lines[3], "\n")
	if r.exits[3] != errcode.ExitUnavailable || !strings.Contains(text, "took longer than the service's limit of 100ms") || strings.Count(text, `"contract_version"`) != 1 {
		t.Fatalf("exit %d:\n%s", r.exits[3], text)
	}
}

func TestListenSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "svc", connection.SocketName)
	ln, err := ListenSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v; want 0600", info.Mode(), err)
	}
	if d, _ := os.Stat(filepath.Dir(path)); d.Mode().Perm() != 0o700 {
		t.Fatalf("socket folder mode %v, want 0700", d.Mode())
	}
	if _, err := ListenSocket(path); !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "already answers") {
		t.Fatalf("a second listener: %v", err)
	}
	// A killed service leaves its socket file: the next start replaces it.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = ln.Close()
	ln2, err := ListenSocket(path)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	_ = ln2.Close()

	notSocket := filepath.Join(dir, "file")
	if err := os.WriteFile(notSocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenSocket(notSocket); !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a plain file: %v", err)
	}
	long := filepath.Join(dir, strings.Repeat("d", 120), connection.SocketName)
	if _, err := ListenSocket(long); !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "longer than the 107") {
		t.Fatalf("a long path: %v", err)
	}
	if os.Getuid() == 0 {
		// Root can hand a folder to another user, as an attacker on a
		// shared machine would prepare one.
		foreign := filepath.Join(dir, "foreign")
		if err := os.Mkdir(foreign, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := ListenSocket(filepath.Join(foreign, connection.SocketName)); !errcode.Is(err, errcode.PermissionDenied) {
			t.Fatalf("a folder of another user: %v", err)
		}
	}
}
