package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// maxSocketPath is the longest path a Unix socket can bind to on Linux
// (sun_path holds 108 bytes with its NUL).
const maxSocketPath = 107

// dialProbeTimeout bounds the check whether a socket file has a live
// service behind it: a local accept takes microseconds.
const dialProbeTimeout = time.Second

// ListenSocket listens on path for the local service, reachable by this
// user only: the folder is made 0700, the socket is 0600, and a path that
// another user owns is refused (PERMISSION_DENIED), so nobody can put a
// socket of theirs where our clients connect. A socket file with nothing
// behind it (a service that was killed) is replaced; one with a live
// service behind it is an error, as is a path that is not a socket.
func ListenSocket(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, errcode.Errorf(errcode.InvalidInput,
			"socket path %s is %d bytes, longer than the %d a Unix socket allows: use a shorter --data-dir", path, len(path), maxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("socket folder %s: %v", dir, err))
	}
	if err := ownedByMe(dir); err != nil {
		return nil, err
	}
	if info, err := os.Lstat(path); err == nil {
		if err := ownedByMe(path); err != nil {
			return nil, err
		}
		if info.Mode()&fs.ModeSocket == 0 {
			return nil, errcode.Errorf(errcode.InvalidInput, "%s exists and is not a socket: remove it, or use another --data-dir", path)
		}
		if c, err := net.DialTimeout("unix", path, dialProbeTimeout); err == nil {
			_ = c.Close()
			return nil, errcode.Errorf(errcode.InvalidInput, "a subagents service already answers on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("remove the stale socket %s: %v", path, err))
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("listen on %s: %v", path, err))
	}
	// The folder is ours and 0700 when we made it; the socket's own mode
	// keeps it private where the user made the folder more open.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("chmod %s: %v", path, err))
	}
	return ln, nil
}

// ownedByMe refuses a path another user owns.
func ownedByMe(path string) error {
	info, err := os.Lstat(path)
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Getuid() {
		return errcode.Errorf(errcode.PermissionDenied, "%s belongs to user %d, not to this user (%d): refusing to use it", path, st.Uid, os.Getuid())
	}
	return nil
}

// The socket's limits. Its clients are this user's own (the socket is 0600
// in a 0700 folder): a pi holds one connection for its life, a `subagents`
// command one per call. The limits keep a client gone wrong (a loop that
// opens and never closes, a line that never ends) from taking the service
// down with it.
const (
	// maxSocketConns bounds the connections served at once: far more
	// parallel pi sessions and commands than one machine runs. A
	// connection past it gets one SERVICE_UNAVAILABLE line and is closed.
	maxSocketConns = 128
	// socketFDShare: the socket serves at most a quarter of the process's
	// descriptor limit, so a burst of connections leaves the rest to the
	// embedded Temporal (its store, its gRPC connections), the warm pool
	// and the children's pipes (with `ulimit -n 256`: 64 connections).
	socketFDShare = 4
	// socketReadBudget bounds the bytes held in request lines being read,
	// across all connections: four lines at MaxRequestLine at once, far
	// more than real clients send (a request is a few KiB).
	socketReadBudget = 4 * MaxRequestLine
	// socketLineTimeout bounds a line from its first byte to its LF: a
	// local client writes its largest line in milliseconds, so a line
	// still open after this long comes from a client that is stuck or
	// trickling, and would hold its memory and its slot for nothing.
	socketLineTimeout = 30 * time.Second
	// socketWriteTimeout bounds how long one reply waits for its client to
	// take it: the clients read their replies as they come, so two minutes
	// (as long as any call but a wait may take) means the client is gone.
	socketWriteTimeout = 2 * time.Minute
	// refuseWriteTimeout bounds the one line a refused connection gets: it
	// goes to an empty socket buffer, so it never waits in practice.
	refuseWriteTimeout = time.Second
	// A failed accept is retried after acceptBackoffMin, doubling to
	// acceptBackoffMax, as net/http's Server does: out of descriptors,
	// the service waits for some to close instead of spinning or giving up.
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// socketLogEvery: one log line per kind of trouble at most this often,
	// with a count of the ones not logged, so a burst cannot flood the log.
	socketLogEvery = 30 * time.Second
)

// Serve accepts connections on ln and answers each with ServeConn (its
// calls cancelled when the client hangs up) until ctx ends; then it closes
// ln and waits for the connections' calls to end. An accept that fails for
// want of resources (descriptors, memory) is retried with backoff and
// logged; a connection past the limit is refused with a line that says so.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("socket", ln.Addr().String())
	maxConns := cmp.Or(s.MaxConns, socketConnLimit())
	slots := make(chan struct{}, maxConns)
	opts := ConnOptions{
		CancelOnEOF:  true,
		LineTimeout:  cmp.Or(s.LineTimeout, socketLineTimeout),
		WriteTimeout: cmp.Or(s.WriteTimeout, socketWriteTimeout),
		budget:       newReadBudget(cmp.Or(s.ReadBudget, socketReadBudget)),
	}
	var (
		wg        sync.WaitGroup
		retry     = acceptRetry{failed: newRateLog(log), recovered: newRateLog(log)}
		full      = newRateLog(log)
		connTrail = newRateLog(log)
	)
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if !temporaryAccept(err) {
				log.Error("socket: accept failed; the socket no longer answers", "error", err)
				_ = ln.Close()
				return errcode.Wrap(errcode.ServiceUnavailable, err, "accept: "+err.Error())
			}
			if !retry.wait(ctx, err) {
				return nil
			}
			continue
		}
		retry.ok()
		select {
		case slots <- struct{}{}:
		default:
			err := errcode.Errorf(errcode.ServiceUnavailable,
				"the subagents service is at its limit of %d connections: try again when a call ends", maxConns)
			full.log(slog.LevelWarn, "socket: connection refused", "error", err)
			refuseConn(conn, err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			// The connection closes when ctx ends too, so a blocked read
			// returns and the calls are cancelled.
			done := context.AfterFunc(ctx, func() { _ = conn.Close() })
			defer done()
			defer conn.Close()
			if err := s.ServeConn(ctx, conn, conn, opts); err != nil && ctx.Err() == nil {
				connTrail.log(slog.LevelWarn, "socket: connection ended", "error", err)
			}
		}()
	}
}

// socketConnLimit is the connections Serve serves at once by default: the
// lower of maxSocketConns and its share of the descriptor limit.
func socketConnLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return maxSocketConns
	}
	return connLimitFor(rl.Cur)
}

func connLimitFor(nofile uint64) int {
	return int(max(1, min(maxSocketConns, nofile/socketFDShare)))
}

// refuseConn answers a connection Serve will not serve with one line, the
// protocol's reply under ID 0 (no request of the client's has one), and
// closes it.
func refuseConn(conn net.Conn, err error) {
	code := errcode.ExitCode(err)
	line := mustJSON(client.ErrorEnvelope("serve", err))
	_ = conn.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	_, _ = io.WriteString(conn, mustJSON(ServeReply{Line: &line, Exit: &code, Error: err.Error()})+"\n")
	_ = conn.Close()
}

// temporaryAccept reports whether a failed accept may succeed later: the
// process or system is out of a resource, or one connection failed before
// it was accepted (the list of accept(2)'s errors to retry).
func temporaryAccept(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM,
		syscall.ENETDOWN, syscall.ENOPROTOOPT, syscall.EHOSTDOWN, syscall.ENONET, syscall.EHOSTUNREACH,
		syscall.EOPNOTSUPP, syscall.ENETUNREACH:
		return true
	}
	return false
}

// acceptRetry is the backoff of failed accepts in a row, and their log.
type acceptRetry struct {
	delay     time.Duration
	failures  int
	since     time.Time
	failed    *rateLog
	recovered *rateLog
}

// wait logs err and sleeps the next backoff; false when ctx ended first.
func (a *acceptRetry) wait(ctx context.Context, err error) bool {
	if a.failures == 0 {
		a.delay, a.since = acceptBackoffMin, time.Now()
	} else {
		a.delay = min(2*a.delay, acceptBackoffMax)
	}
	a.failures++
	a.failed.log(slog.LevelWarn, "socket: accept failed; retrying", "error", err, "retry_in", a.delay, "failures_in_a_row", a.failures)
	t := time.NewTimer(a.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ok ends a run of failures, saying how long it lasted.
func (a *acceptRetry) ok() {
	if a.failures == 0 {
		return
	}
	a.recovered.log(slog.LevelInfo, "socket: accepting again", "failures", a.failures, "after", time.Since(a.since).Round(time.Millisecond))
	a.failures = 0
}

// rateLog logs one kind of trouble at most once per socketLogEvery, with
// the number of times it was not logged since.
type rateLog struct {
	logger  *slog.Logger
	every   time.Duration
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func newRateLog(logger *slog.Logger) *rateLog {
	return &rateLog{logger: logger, every: socketLogEvery}
}

func (r *rateLog) log(level slog.Level, msg string, args ...any) {
	r.mu.Lock()
	if !r.last.IsZero() && time.Since(r.last) < r.every {
		r.skipped++
		r.mu.Unlock()
		return
	}
	if r.skipped > 0 {
		args = append(args, "not_logged_since", r.skipped)
	}
	r.last, r.skipped = time.Now(), 0
	r.mu.Unlock()
	r.logger.Log(context.Background(), level, msg, args...)
}
