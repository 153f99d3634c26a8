package cli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// A client verb run as a process of its own hands its call to the local
// service when one serves the Temporal it would dial (the socket of
// `subagents dev`, or of `subagents worker --socket`): the service's client
// is connected already and shares its process with the worker, so the
// workflow starts eagerly on it, and the call costs this process a socket
// round trip instead of a connection of its own. Anything else (no service,
// another address, a remote or secured Temporal, a service that cannot say
// what it serves) dials Temporal as before.

// localProbeTimeout bounds the connect to the socket and the service's
// answer about itself: both are local and take well under a millisecond;
// a service too busy to say within this long is passed by for a dial.
const localProbeTimeout = 250 * time.Millisecond

// localCancelGrace is how long a call this process stops (Ctrl-C) may take
// to print its end after the cancel reaches the service, as the command
// itself would; past it, the process leaves and the hang-up cancels it.
const localCancelGrace = 2 * time.Second

// stdinReader is a verb whose options may read the request from stdin.
type stdinReader interface{ readsStdin() bool }

// localService is a connection to the local service that serves what cmd
// would dial, or nil: then the verb dials Temporal itself.
func (cmd *command) localService() *localConn {
	if cmd.io.getenv("SUBAGENTS_SOCKET") == "0" {
		return nil
	}
	opts, err := cmd.conn.ClientOptions()
	if err != nil || opts.ConnectionOptions.TLS != nil || opts.Credentials != nil || !connection.IsLoopback(opts.HostPort) {
		return nil
	}
	dir, err := connection.DefaultDataDir()
	if err != nil {
		return nil
	}
	path := connection.SocketPath(dir)
	if ownedByMe(path) != nil {
		// No socket, or another user's: never hand it this user's call.
		return nil
	}
	conn, err := net.DialTimeout("unix", path, localProbeTimeout)
	if err != nil {
		return nil
	}
	lc := &localConn{conn: conn, replies: bufio.NewReaderSize(conn, 64<<10)}
	_ = conn.SetDeadline(time.Now().Add(localProbeTimeout))
	var info ServiceInfo
	if err := lc.ask(ServeRequest{ID: 1, Args: []string{"service"}}, func(line string) { _ = json.Unmarshal([]byte(line), &info) }); err != nil || info.Protocol < ProtocolVersion ||
		!sameLoopback(info.Address, opts.HostPort) || info.Namespace != cmp.Or(opts.Namespace, "default") || info.TaskQueue != cmd.taskQueue {
		_ = conn.Close()
		return nil
	}
	_ = conn.SetDeadline(time.Time{})
	return lc
}

// localConn is one connection to the local service's socket.
type localConn struct {
	conn    net.Conn
	replies *bufio.Reader
	// exit and said are the last call's exit code and error message.
	exit int
	said string
	// started is the delegation or plan the last call started, as the
	// service said (ServeReply.Started).
	started string
}

// ask sends req and hands each line of its stdout to onLine until its exit.
func (lc *localConn) ask(req ServeRequest, onLine func(string)) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := lc.conn.Write(append(b, '\n')); err != nil {
		return err
	}
	for {
		raw, err := lc.replies.ReadBytes('\n')
		if err != nil {
			return err
		}
		var r ServeReply
		if json.Unmarshal(raw, &r) != nil || r.ID != req.ID {
			continue
		}
		if r.Started != "" {
			lc.started = r.Started
		}
		if r.Line != nil {
			onLine(*r.Line)
		}
		if r.Exit != nil {
			lc.exit, lc.said = *r.Exit, r.Error
			return nil
		}
	}
}

// forward runs args (a verb and its flags, parsed already) on the service as
// this process would run them, printing what it prints; the error carries
// its exit code and message.
func (lc *localConn) forward(ctx context.Context, cmd *command, v verb, args []string) error {
	defer func() { _ = lc.conn.Close() }()
	req := ServeRequest{ID: 2, Args: args, Terminal: cmd.io.terminal(), Indent: !cmd.compact, Env: map[string]string{}, ReportStarted: true}
	var err error
	if req.Dir, err = cmd.io.dir(); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	for _, k := range CallerEnv {
		if val := cmd.io.getenv(k); val != "" {
			req.Env[k] = val
		}
	}
	req.Caller = callerOf(cmd.io.getenv)
	if r, ok := v.(stdinReader); ok && r.readsStdin() {
		b, err := io.ReadAll(io.LimitReader(cmd.io.In, maxRequestBytes+1))
		if err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, "request: "+err.Error())
		}
		req.Input = string(b)
	}
	// Ctrl-C stops the call on the service, which then prints its end as
	// the command would have; a service that does not end it in time is
	// left, and closing the connection cancels the call there.
	stop := context.AfterFunc(ctx, func() {
		b, _ := json.Marshal(ServeRequest{ID: req.ID, Cancel: true})
		_, _ = lc.conn.Write(append(b, '\n'))
		_ = lc.conn.SetReadDeadline(time.Now().Add(localCancelGrace))
	})
	defer stop()
	err = lc.ask(req, func(line string) { _, _ = fmt.Fprintln(cmd.io.Out, line) })
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return lc.ended(cmd, err)
	}
	return exitError(lc.exit, lc.said)
}

// ended is the error of a call whose connection to the service ended before
// its answer: the service stopped under it (`subagents stop`, a restart for
// an upgrade, a crash). What the call waited for goes on when the service
// runs again, as its running children do: the error names it and the wait
// that picks it up, instead of the bare end of the connection.
func (lc *localConn) ended(cmd *command, err error) error {
	var ids []string
	switch {
	case lc.started != "":
		ids = []string{lc.started}
	case cmd.verb == "wait":
		ids = cmd.args
	case (cmd.verb == "send" || cmd.verb == "resume") && len(cmd.args) > 0:
		ids = cmd.args[:1]
	}
	msg := "the subagents service stopped during this call (subagents stop, or it ended)"
	if len(ids) == 0 {
		return errcode.Wrap(errcode.ServiceUnavailable, err,
			msg+"; start it again (subagents dev, or a pi's next delegation starts it) and repeat the call")
	}
	return errcode.Wrap(errcode.ServiceUnavailable, err, fmt.Sprintf(
		"%s: %s %s on at its next start (subagents dev, or a pi's next delegation starts it), and then subagents wait %s picks %s up",
		msg, strings.Join(ids, ", "), agree(len(ids), "goes", "go"), strings.Join(ids, " "), agree(len(ids), "it", "them")))
}

// exitError is the error that makes the command exit with code, saying msg.
func exitError(code int, msg string) error {
	switch code {
	case errcode.ExitOK:
		return nil
	case errcode.ExitPending:
		// The service's message already ends with what ErrPending says.
		msg = strings.TrimSuffix(strings.TrimSuffix(msg, errcode.ErrPending.Error()), ": ")
		if msg == "" {
			return errcode.ErrPending
		}
		return fmt.Errorf("%s: %w", msg, errcode.ErrPending)
	case errcode.ExitBadInput:
		return errcode.New(errcode.InvalidInput, msg)
	case errcode.ExitUnavailable:
		return errcode.New(errcode.ServiceUnavailable, msg)
	default:
		return errcode.New(errcode.Failed, msg)
	}
}

// sameLoopback reports whether two loopback addresses are the same port.
func sameLoopback(a, b string) bool {
	_, pa, errA := net.SplitHostPort(a)
	_, pb, errB := net.SplitHostPort(b)
	return errA == nil && errB == nil && pa == pb && connection.IsLoopback(a) && connection.IsLoopback(b)
}
