package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
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

// pipeConn is one connection to ServeConn as a socket client sees it: what
// it writes is read by the service, the service's replies come back on r.
// Its writes go in order from a goroutine of their own, as a client's
// kernel buffer would take them: the service answers a line it refuses
// while the client still writes it.
type pipeConn struct {
	sends chan any // []byte, or a chan closed once what came before is read
	r     *bufio.Reader
	done  chan error
}

func servePipe(s *Server, opts ConnOptions) *pipeConn {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &pipeConn{sends: make(chan any, 128), r: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		for v := range p.sends {
			switch v := v.(type) {
			case []byte:
				_, _ = inW.Write(v)
			case chan struct{}:
				close(v)
			}
		}
		_ = inW.Close()
	}()
	go func() {
		err := s.ServeConn(context.Background(), inR, outW, opts)
		_ = outW.Close()
		p.done <- err
	}()
	return p
}

func (p *pipeConn) send(b []byte)               { p.sends <- b }
func (p *pipeConn) sendf(f string, args ...any) { p.send(fmt.Appendf(nil, f, args...)) }
func (p *pipeConn) close()                      { close(p.sends) }

// sync returns once the service has read everything sent before.
func (p *pipeConn) sync(t *testing.T) {
	t.Helper()
	read := make(chan struct{})
	p.sends <- read
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the service does not read")
	}
}

// answer reads replies until id's exit: its lines, its exit and message.
func (p *pipeConn) answer(t *testing.T, id int64) (string, int, string) {
	t.Helper()
	var lines []string
	for {
		rep := readReply(t, p.r)
		if rep.ID != id {
			continue
		}
		if rep.Line != nil {
			lines = append(lines, *rep.Line)
		}
		if rep.Exit != nil {
			return strings.Join(lines, "\n"), *rep.Exit, rep.Error
		}
	}
}

// TestServeConnLongLines: a line over the limit is refused as soon as it
// crosses the limit, while its client still writes it, and its rest is
// skipped without being held: 64 MiB through a 1 MiB limit allocate a few
// MiB, not 64. A line the shared budget has no room for (another
// connection holds it) is refused with SERVICE_UNAVAILABLE; once that line
// ends, the budget is back. Each connection goes on answering.
func TestServeConnLongLines(t *testing.T) {
	s := &Server{MaxLine: 1 << 20, Info: &ServiceInfo{Op: "service", PID: 42, Protocol: ProtocolVersion}}

	t.Run("over the limit", func(t *testing.T) {
		p := servePipe(s, ConnOptions{})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		// The service reads a chunk at a time: it sees the line cross the
		// limit at the latest a chunk after it does.
		p.send([]byte(`{"id":3,"args":["start","--json","--input","-"],"input":"` + strings.Repeat("x", 1<<20+lineChunk)))
		text, exit, said := p.answer(t, 3)
		if exit != errcode.ExitBadInput || !strings.Contains(text, `"code":"INVALID_INPUT"`) || !strings.Contains(said, "longer than the limit of 1048576 bytes") {
			t.Fatalf("a line over the limit, still open: exit %d %q\n%.300s", exit, said, text)
		}
		block := []byte(strings.Repeat("x", 1<<20))
		for range 64 {
			p.send(block)
		}
		p.send([]byte("\"}\n" + `{"id":4,"args":["service"]}` + "\n"))
		if text, exit, _ := p.answer(t, 4); exit != 0 || !strings.Contains(text, `"pid":42`) {
			t.Fatalf("the request after a refused line: exit %d %s", exit, text)
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
			t.Fatalf("reading a 65 MiB line through a 1 MiB limit allocated %d MiB", grew>>20)
		}
		p.close()
		if err := <-p.done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the shared budget", func(t *testing.T) {
		budget := newReadBudget(4 * lineChunk)
		a, b := servePipe(s, ConnOptions{budget: budget}), servePipe(s, ConnOptions{budget: budget})
		long := `{"id":%d,"args":["service"],"input":"` + strings.Repeat("x", 3*lineChunk+lineChunk/2)
		// a holds three chunks of its line (the rest is in its reader's
		// buffer), b's second chunk finds no room.
		a.sendf(long, 1)
		a.sync(t)
		b.sendf(long, 1)
		text, exit, said := b.answer(t, 1)
		if exit != errcode.ExitUnavailable || !strings.Contains(text, `"code":"SERVICE_UNAVAILABLE"`) || !strings.Contains(said, "try again") {
			t.Fatalf("a line past the shared budget: exit %d %q\n%.300s", exit, said, text)
		}
		b.send([]byte("\"}\n"))
		a.send([]byte("\"}\n"))
		if text, exit, _ := a.answer(t, 1); exit != 0 || !strings.Contains(text, `"pid":42`) {
			t.Fatalf("the line that held the budget: exit %d %s", exit, text)
		}
		b.sendf(long+"\"}\n", 2)
		if text, exit, _ := b.answer(t, 2); exit != 0 || !strings.Contains(text, `"pid":42`) {
			t.Fatalf("a long line once the budget is back: exit %d %s", exit, text)
		}
		a.close()
		b.close()
		<-a.done
		<-b.done
		if left := budget.left.Load(); left != 4*lineChunk {
			t.Fatalf("the budget has %d bytes left after both lines, want all %d", left, 4*lineChunk)
		}
	})
}

// TestServeConnSlowPeers: on a socket, a line that does not end within the
// line timeout from its first byte is answered with INVALID_INPUT and its
// connection closed, while a connection idle between lines is not; a
// client that takes no reply within the write timeout is closed too.
func TestServeConnSlowPeers(t *testing.T) {
	s := &Server{Info: &ServiceInfo{Op: "service", PID: 42, Protocol: ProtocolVersion}}
	opts := ConnOptions{CancelOnEOF: true, LineTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond}
	serve := func() (net.Conn, *bufio.Reader, chan error) {
		client, server := net.Pipe()
		t.Cleanup(func() { _ = client.Close() })
		done := make(chan error, 1)
		go func() {
			err := s.ServeConn(context.Background(), server, server, opts)
			_ = server.Close()
			done <- err
		}()
		_ = client.SetDeadline(time.Now().Add(10 * time.Second))
		return client, bufio.NewReader(client), done
	}

	t.Run("a line that stops in its middle", func(t *testing.T) {
		c, r, done := serve()
		if _, err := io.WriteString(c, `{"id":4,"args":["serv`); err != nil {
			t.Fatal(err)
		}
		p := &pipeConn{r: r}
		text, exit, said := p.answer(t, 4)
		if exit != errcode.ExitBadInput || !strings.Contains(text, `"code":"INVALID_INPUT"`) || !strings.Contains(said, "did not end within 100ms of its first byte") {
			t.Fatalf("a line cut off: exit %d %q\n%s", exit, said, text)
		}
		if err := <-done; !errcode.Is(err, errcode.InvalidInput) {
			t.Fatalf("ServeConn after a line cut off: %v", err)
		}
		if _, err := r.ReadByte(); err == nil {
			t.Fatal("the connection stays open after a line cut off")
		}
	})

	t.Run("idle between lines", func(t *testing.T) {
		c, r, _ := serve()
		time.Sleep(3 * opts.LineTimeout)
		if _, err := io.WriteString(c, `{"id":5,"args":["service"]}`+"\n"); err != nil {
			t.Fatalf("a connection idle between lines was closed: %v", err)
		}
		p := &pipeConn{r: r}
		if text, exit, _ := p.answer(t, 5); exit != 0 || !strings.Contains(text, `"pid":42`) {
			t.Fatalf("after an idle while: exit %d %s", exit, text)
		}
	})

	t.Run("a client that takes no reply", func(t *testing.T) {
		c, _, done := serve()
		if _, err := io.WriteString(c, `{"id":6,"args":["service"]}`+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errcode.Is(err, errcode.ServiceUnavailable) || !strings.Contains(err.Error(), "took no reply within 100ms") {
				t.Fatalf("ServeConn: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a client that reads nothing holds its connection")
		}
	})
}

// TestServeConnSaysNothingOnceItsCallsEnd: when the connection's calls end
// as a whole (the service stops under a wait), a call gives no answer: its
// cancel read as one, an exit 0 (with a "context canceled" envelope) that
// a command handed the call would take for success. Its client sees the
// connection end instead, and says what goes on (local.go's ended).
func TestServeConnSaysNothingOnceItsCallsEnd(t *testing.T) {
	waiting := make(chan struct{})
	s := &Server{dial: func(_ *command, ctx context.Context) (*client.Client, func(), error) {
		close(waiting)
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}}
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out syncbuf.Buffer
	go func() { done <- s.ServeConn(ctx, pr, &out, ConnOptions{}) }()
	_, _ = io.WriteString(pw, `{"id":1,"args":["wait","--json","--","x"]}`+"\n")
	<-waiting
	stop()
	_ = pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out.String() != "" {
		t.Fatalf("the call answered as the service stopped:\n%s", out.String())
	}
}
