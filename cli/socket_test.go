package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// stubListener fails its first accepts with errs, then hands out the
// connections sent on conns until it is closed.
type stubListener struct {
	mu     sync.Mutex
	errs   []error
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newStubListener(errs ...error) *stubListener {
	return &stubListener{errs: errs, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *stubListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *stubListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *stubListener) Addr() net.Addr { return &net.UnixAddr{Name: "stub.sock", Net: "unix"} }

// acceptErr is a failed accept as the net package returns it.
func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", errno)}
}

// infoServer answers `service` and nothing that needs Temporal.
func infoServer(log *syncbuf.Buffer) *Server {
	return &Server{
		Info:   &ServiceInfo{Op: "service", PID: 42, Protocol: ProtocolVersion},
		Logger: slog.New(slog.NewTextHandler(log, nil)),
	}
}

// askService sends a `service` request on c and returns the first reply.
func askService(t *testing.T, c net.Conn) ServeReply {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(`{"id":1,"args":["service"]}` + "\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	return readReply(t, bufio.NewReader(c))
}

// tryService is askService that reports a connection the service closed
// instead of failing the test.
func tryService(c net.Conn) (ServeReply, bool) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var rep ServeReply
	if _, err := c.Write([]byte(`{"id":1,"args":["service"]}` + "\n")); err != nil {
		return rep, false
	}
	b, err := bufio.NewReader(c).ReadBytes('\n')
	return rep, err == nil && json.Unmarshal(b, &rep) == nil
}

func readReply(t *testing.T, r *bufio.Reader) ServeReply {
	t.Helper()
	b, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read a reply: %v", err)
	}
	var rep ServeReply
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("reply is not JSON: %q", b)
	}
	return rep
}

// TestServeRetriesAcceptErrors: an accept that fails for want of
// descriptors or memory is retried with backoff and logged once for the
// run of failures, and the next connection is served; an accept error that
// will not pass ends Serve with a coded error and an error in the log.
func TestServeRetriesAcceptErrors(t *testing.T) {
	tests := []struct {
		name    string
		errs    []error
		served  bool
		logHas  []string
		logOnce string
	}{
		{
			name:    "out of descriptors",
			errs:    []error{acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE)},
			served:  true,
			logHas:  []string{"too many open files", "retry_in=5ms", `msg="socket: accepting again" socket=stub.sock failures=4`},
			logOnce: "accept failed; retrying",
		},
		{
			name:    "system out of files, then a connection aborted",
			errs:    []error{acceptErr(syscall.ENFILE), acceptErr(syscall.ECONNABORTED), acceptErr(syscall.ENOBUFS)},
			served:  true,
			logHas:  []string{"too many open files in system", "failures=3"},
			logOnce: "accept failed; retrying",
		},
		{
			name:   "a listener that is broken for good",
			errs:   []error{acceptErr(syscall.EBADF)},
			logHas: []string{"level=ERROR", "the socket no longer answers"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log syncbuf.Buffer
			s := infoServer(&log)
			ln := newStubListener(tt.errs...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- s.Serve(ctx, ln) }()
			if tt.served {
				client, server := net.Pipe()
				defer client.Close()
				select {
				case ln.conns <- server:
				case err := <-served:
					t.Fatalf("Serve ended after the accept errors: %v\n%s", err, log.String())
				case <-time.After(5 * time.Second):
					t.Fatalf("Serve did not accept again\n%s", log.String())
				}
				if rep := askService(t, client); rep.ID != 1 || rep.Line == nil || !strings.Contains(*rep.Line, `"pid":42`) {
					t.Fatalf("the connection after the errors: %+v", rep)
				}
				cancel()
				if err := <-served; err != nil {
					t.Fatalf("Serve: %v", err)
				}
			} else if err := <-served; !errcode.Is(err, errcode.ServiceUnavailable) {
				t.Fatalf("Serve: %v, want SERVICE_UNAVAILABLE", err)
			}
			out := log.String()
			for _, want := range tt.logHas {
				if !strings.Contains(out, want) {
					t.Errorf("log without %q:\n%s", want, out)
				}
			}
			if tt.logOnce != "" && strings.Count(out, tt.logOnce) != 1 {
				t.Errorf("%q logged %d times, want once for a run of failures:\n%s", tt.logOnce, strings.Count(out, tt.logOnce), out)
			}
		})
	}
}

// TestAcceptBackoff: the wait between failed accepts doubles from 5 ms to
// at most a second, and starts over after a success.
func TestAcceptBackoff(t *testing.T) {
	var log syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	a := acceptRetry{failed: newRateLog(logger), recovered: newRateLog(logger)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the waits return at once; the delays are what they would be
	var got []time.Duration
	for range 10 {
		a.wait(ctx, acceptErr(syscall.EMFILE))
		got = append(got, a.delay)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	a.ok()
	a.wait(ctx, acceptErr(syscall.EMFILE))
	if a.delay != acceptBackoffMin {
		t.Fatalf("after a success the delay is %s, want %s", a.delay, acceptBackoffMin)
	}
	if n := strings.Count(log.String(), "accept failed"); n != 1 {
		t.Fatalf("%d log lines for 11 failures within a second, want 1:\n%s", n, log.String())
	}
}

// TestServeRefusesPastTheConnectionLimit: with its connections all taken,
// the service answers a new one with one SERVICE_UNAVAILABLE line that
// names the limit, closes it and logs it; once a connection ends, a new one
// is served.
func TestServeRefusesPastTheConnectionLimit(t *testing.T) {
	var log syncbuf.Buffer
	s := infoServer(&log)
	s.MaxConns = 2
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := ListenSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	var held []net.Conn
	for range 2 {
		c := dial()
		if rep := askService(t, c); rep.Line == nil || !strings.Contains(*rep.Line, `"pid":42`) {
			t.Fatalf("a connection within the limit: %+v", rep)
		}
		held = append(held, c)
	}

	over := dial()
	_ = over.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(over)
	rep := readReply(t, r)
	if rep.ID != 0 || rep.Exit == nil || *rep.Exit != errcode.ExitUnavailable || rep.Line == nil ||
		!strings.Contains(*rep.Line, `"code":"SERVICE_UNAVAILABLE"`) || !strings.Contains(rep.Error, "at its limit of 2 connections") {
		t.Fatalf("a connection past the limit: %+v", rep)
	}
	if _, err := r.ReadBytes('\n'); err == nil {
		t.Fatal("a refused connection stays open")
	}
	if out := log.String(); !strings.Contains(out, "socket: connection refused") || !strings.Contains(out, "at its limit of 2 connections") {
		t.Fatalf("the refusal is not in the log:\n%s", out)
	}

	_ = held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Until the server has seen the close, a connection is refused,
		// and closed at once: its write may find the pipe broken.
		rep, ok := tryService(dial())
		if ok && rep.ID == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one ended: %+v", rep)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConnLimitFor: the socket takes a quarter of the descriptor limit, at
// most maxSocketConns and at least one.
func TestConnLimitFor(t *testing.T) {
	tests := []struct {
		nofile uint64
		want   int
	}{
		{256, 64},
		{1024, 128},
		{20000, 128},
		{math.MaxUint64, 128}, // unlimited
		{3, 1},
	}
	for _, tt := range tests {
		if got := connLimitFor(tt.nofile); got != tt.want {
			t.Errorf("connLimitFor(%d) = %d, want %d", tt.nofile, got, tt.want)
		}
	}
}

func TestTemporaryAccept(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{acceptErr(syscall.EMFILE), true},
		{acceptErr(syscall.ENFILE), true},
		{acceptErr(syscall.ENOMEM), true},
		{acceptErr(syscall.ECONNABORTED), true},
		{acceptErr(syscall.EBADF), false},
		{acceptErr(syscall.EINVAL), false},
		{errors.New("something else"), false},
	}
	for _, tt := range tests {
		if got := temporaryAccept(tt.err); got != tt.want {
			t.Errorf("temporaryAccept(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
