package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// ServeRequest is one line a program writes to the service (`subagents
// serve` on stdio, or the local service's socket): a verb's arguments as it
// would pass them to the command, and its stdin; or, with Cancel, the end of
// an earlier request (a wait it no longer wants).
type ServeRequest struct {
	ID     int64    `json:"id"`
	Args   []string `json:"args,omitempty"`
	Input  string   `json:"input,omitempty"`
	Cancel bool     `json:"cancel,omitempty"`
	// The caller's side of the call, for a `subagents` command that hands
	// its call to the local service to run as it would itself: its folder
	// (the default cwd of new tasks, and where a relative --input is read),
	// its values of the variables the verbs read (CallerEnv; a key that is
	// missing is unset), whether its stdout is a terminal (live progress),
	// and whether envelopes are printed indented, as the command prints them.
	Dir      string            `json:"dir,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Terminal bool              `json:"terminal,omitempty"`
	Indent   bool              `json:"indent,omitempty"`
	// Caller is the calling pi's own side (CallerPiEnv: where it is in
	// the tree of delegations, and its knobs), sent by the pi extension
	// and by a command that hands its call over. The service never reads
	// its own values of these: a key that is missing is unset.
	Caller map[string]string `json:"caller,omitempty"`
	// ReportStarted asks for a Started reply once the call has started a
	// delegation or a plan: a command that hands over a `run` can then say
	// what to wait for if the service stops under it.
	ReportStarted bool `json:"report_started,omitempty"`
}

// CallerEnv are the variables a client verb reads: a call handed to the
// service carries the caller's values of them (ServeRequest.Env).
var CallerEnv = []string{"SUBAGENTS_TASK_QUEUE", "SUBAGENTS_HOST", "SUBAGENTS_UI_URL"}

// CallerPiEnv are the variables that say who calls (ServeRequest.Caller):
// its claimed depth, whether it is a child, the session it runs as and
// the worker's token for it (profiles/nesting.go), and its per-process
// knobs (profiles.CallerKnobVars). A service started by one pi keeps that
// pi's environment and serves every other: these never come from it.
var CallerPiEnv = append([]string{profiles.DepthEnv, profiles.ChildEnv, profiles.ParentSessionEnv, profiles.TokenEnv}, profiles.CallerKnobVars...)

// ServeReply is one line the service writes: a line of a request's stdout
// as the command would print it, or, last, its exit code.
type ServeReply struct {
	// ID is the request's; 0 answers none: the one line of a connection
	// the service refused (at its limit of connections) before it closes.
	ID   int64   `json:"id"`
	Line *string `json:"line,omitempty"`
	Exit *int    `json:"exit,omitempty"`
	// Error is, with a non-zero Exit, what the command would have said on
	// stderr (its envelope under --json says it too).
	Error string `json:"error,omitempty"`
	// Started is the delegation or plan the call started, before its
	// progress, when the request asked (ServeRequest.ReportStarted).
	Started string `json:"started,omitempty"`
}

// MaxRequestLine bounds one request line. A line carries a verb's stdin
// JSON-quoted once more; the largest that carries something the service can
// start is a delegation at Temporal's payload limit (client.MaxStartBytes,
// 2000 KiB encoded), and quoting it again at most doubles it (each '"' and
// '\' escaped). 8 MiB is twice that again, for a request written by hand
// with indentation. A longer line is answered with INVALID_INPUT once it
// has crossed the limit (within a lineChunk of it, while the client may
// still be writing it), and the rest of it is skipped without being held;
// the connection goes on.
const MaxRequestLine = 8 << 20

// Limits of one call. A call that is not a wait only talks to the frontend
// and answers in milliseconds; two minutes means it is stuck. A wait (and
// `run`, which waits) ends with its own --timeout or its task; a day bounds
// one that names none, far beyond any task's timeout with its extensions.
const (
	DefaultCallTimeout = 2 * time.Minute
	DefaultWaitTimeout = 24 * time.Hour
)

// Server answers the client protocol: each request runs one verb as the
// command would, concurrently, over one shared Temporal client. It is the one
// implementation behind `subagents serve` (stdio) and the local service's
// Unix socket.
type Server struct {
	dial func(*command, context.Context) (*client.Client, func(), error)
	// Getenv is the environment the verbs see (nil: os.Getenv).
	Getenv func(string) string
	// CallTimeout and WaitTimeout bound each call (zero: the defaults).
	CallTimeout, WaitTimeout time.Duration
	// MaxLine bounds a request line (zero: MaxRequestLine).
	MaxLine int
	// The socket's limits (Serve; zero: the defaults in socket.go):
	// connections served at once, bytes of request lines held while they
	// are read across all connections, how long a line may take from its
	// first byte to its end, and how long a reply may wait for its client
	// to take it.
	MaxConns, ReadBudget      int
	LineTimeout, WriteTimeout time.Duration
	// Logger gets the socket's trouble (nil: slog's default logger).
	Logger *slog.Logger
	// Info, when set, answers the `service` request: what this service
	// serves, so that a client can tell it is the one it wants. Its
	// DataDir holds the nesting key that checks a caller's token.
	Info *ServiceInfo
	// CallersEnv says the environment is the one caller's (stdio serve,
	// which each pi starts for itself): a request that carries no Caller
	// reads CallerPiEnv there. A shared service's is nobody's.
	CallersEnv bool
}

// ServiceInfo is the answer to a `service` request.
type ServiceInfo struct {
	ContractVersion string `json:"contract_version"`
	Op              string `json:"op"`
	Address         string `json:"address"`
	Namespace       string `json:"namespace"`
	TaskQueue       string `json:"task_queue"`
	PID             int    `json:"pid"`
	DataDir         string `json:"data_dir,omitempty"`
	// Protocol is the client protocol's version: 2 takes the caller's
	// side of a call (ServeRequest.Dir, Env, Terminal, Indent) and says a
	// failure's message (ServeReply.Error); 3 takes the calling pi's
	// (ServeRequest.Caller). A command hands its calls only to a service
	// of this build's version or later.
	Protocol int `json:"protocol,omitempty"`
	// Version is the service's release (internal/version): a pi extension
	// of another release stops the service at a safe point and starts its
	// own ([install]).
	Version string `json:"version,omitempty"`
	// UIURL is where the service serves the Temporal UI, its --ui-port
	// whatever it is; Headless says it serves none (--headless). Neither:
	// the service does not say (an older one, or `subagents worker
	// --socket`, which serves no UI of its own). `subagents doctor` checks
	// the UI where the service says it is.
	UIURL    string `json:"ui_url,omitempty"`
	Headless bool   `json:"headless,omitempty"`
}

// ProtocolVersion is this build's Protocol.
const ProtocolVersion = 3

// NewServer serves verbs with c's Temporal client, shared by every call. A
// verb's --task-queue applies; without one, c's queue (the one the
// service's own worker polls) is the default, not the command's.
func NewServer(c *client.Client) *Server {
	return &Server{
		dial: func(cmd *command, _ context.Context) (*client.Client, func(), error) {
			cc := *c
			cc.TaskQueue = cmd.taskQueue
			return &cc, func() {}, nil
		},
		Getenv: func(k string) string {
			if k == "SUBAGENTS_TASK_QUEUE" && c.TaskQueue != "" {
				return c.TaskQueue
			}
			return os.Getenv(k)
		},
	}
}

// ConnOptions say how one connection ends.
type ConnOptions struct {
	// CancelOnEOF ends the connection's running calls when its input ends:
	// a socket client that hangs up wants no answers. Off, calls run to
	// their end after the input ends (stdio serve, whose caller closes
	// stdin to say it has no more requests).
	CancelOnEOF bool
	// LineTimeout, when set and the input has read deadlines (a socket),
	// bounds the time from a line's first byte to its end: a client that
	// trickles a line, or stops in its middle, is answered and its
	// connection closed. The time between lines is not bounded: a pi holds
	// its connection idle between calls, and a wait's answer may take
	// hours.
	LineTimeout time.Duration
	// WriteTimeout, when set and the output has write deadlines and can be
	// closed (a socket), bounds how long one reply waits for the client to
	// take it: past it the client is gone or stuck, and the connection is
	// closed, which ends its calls.
	WriteTimeout time.Duration
	// budget, when set, is shared by the connections of one socket: the
	// bytes of long lines held while they are read.
	budget *readBudget
}

// ServeConn answers the requests read from r on w until r ends, then waits
// for the calls still running. A bad line (not JSON, too long) gets an
// INVALID_INPUT envelope and exit code 2 under its ID when the ID can be
// read, and the connection goes on; a line cut off by opts.LineTimeout is
// answered the same way and ends the connection.
func (s *Server) ServeConn(ctx context.Context, r io.Reader, w io.Writer, opts ConnOptions) error {
	ctx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	var (
		mu      sync.Mutex
		enc     = json.NewEncoder(w)
		cancels = map[int64]context.CancelFunc{}
		wg      sync.WaitGroup
		// broken is set once a reply could not be written in time.
		broken   bool
		writeErr error
	)
	wd, _ := w.(interface{ SetWriteDeadline(time.Time) error })
	wc, _ := w.(io.Closer)
	if opts.WriteTimeout <= 0 || wd == nil || wc == nil {
		wd = nil
	}
	reply := func(r ServeReply) {
		mu.Lock()
		defer mu.Unlock()
		if broken {
			return
		}
		if wd != nil {
			_ = wd.SetWriteDeadline(time.Now().Add(opts.WriteTimeout))
		}
		if err := enc.Encode(r); err != nil && wd != nil {
			// Nobody takes the replies: end the calls, and the read.
			broken, writeErr = true, err
			cancelAll()
			_ = wc.Close()
		}
	}
	refuse := func(id int64, err error) {
		code := errcode.ExitCode(err)
		line := mustJSON(client.ErrorEnvelope("serve", err))
		reply(ServeReply{ID: id, Line: &line})
		reply(ServeReply{ID: id, Exit: &code, Error: err.Error()})
	}
	maxLine := cmp.Or(s.MaxLine, MaxRequestLine)
	lines := newLineReader(r, maxLine, opts)
	defer lines.drop()
	var readErr error
	for {
		line, refused, err := lines.next()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				refuse(idOf(lines.unanswered()), errcode.Errorf(errcode.InvalidInput,
					"request: the line did not end within %s of its first byte: the connection is closed", opts.LineTimeout))
			}
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		if refused != nil {
			refuse(idOf(line), refused)
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !utf8.Valid(line) {
			// JSON would read it with U+FFFD in place of the bad bytes: a
			// prompt the caller did not write.
			refuse(idOf(line), errcode.New(errcode.InvalidInput, "request: not valid UTF-8"))
			continue
		}
		var req ServeRequest
		if err := json.Unmarshal(line, &req); err != nil {
			refuse(idOf(line), errcode.Wrap(errcode.InvalidInput, err, "request: "+err.Error()))
			continue
		}
		if req.Cancel {
			mu.Lock()
			if c := cancels[req.ID]; c != nil {
				c()
			}
			mu.Unlock()
			continue
		}
		limit := s.timeoutOf(req.Args)
		rctx, cancel := context.WithTimeoutCause(ctx, limit,
			errcode.Errorf(errcode.ServiceUnavailable, "%s: the call took longer than the service's limit of %s", verbOf(req.Args), limit))
		mu.Lock()
		cancels[req.ID] = cancel
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				mu.Lock()
				delete(cancels, req.ID)
				mu.Unlock()
				cancel()
			}()
			// Once the connection's calls end as a whole (the service
			// stops, the client hung up), a call says nothing more: its
			// cancel would read as its answer (an exit 0, or a "context
			// canceled" envelope), where the client is to see the
			// connection end (local.go's ended says what goes on).
			out := &lineWriter{emit: func(line string) {
				if ctx.Err() == nil {
					reply(ServeReply{ID: req.ID, Line: &line})
				}
			}}
			stdio := IO{In: strings.NewReader(req.Input), Out: out, Err: io.Discard, Getenv: s.getenvFor(req),
				Terminal: func() bool { return req.Terminal }, Compact: !req.Indent, Dir: req.Dir}
			if s.Info != nil {
				stdio.DataDir = s.Info.DataDir
			}
			if req.ReportStarted {
				stdio.Started = func(id string) { reply(ServeReply{ID: req.ID, Started: id}) }
			}
			err := s.one(rctx, req, stdio)
			out.flush()
			if ctx.Err() != nil {
				return
			}
			code, said := errcode.ExitOK, ""
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, flag.ErrHelp) {
				code, said = errcode.ExitCode(err), err.Error()
			}
			reply(ServeReply{ID: req.ID, Exit: &code, Error: said})
		}()
	}
	if opts.CancelOnEOF {
		cancelAll()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	switch {
	case writeErr != nil:
		return errcode.Wrap(errcode.ServiceUnavailable, writeErr,
			fmt.Sprintf("the client took no reply within %s: the connection is closed", opts.WriteTimeout))
	case readErr != nil:
		return errcode.Wrap(errcode.InvalidInput, readErr, "reading requests: "+readErr.Error())
	}
	return nil
}

// getenvFor is the environment req's verb sees: the caller's values of
// CallerEnv when it sent them, the service's otherwise; the caller's of
// CallerPiEnv always (the service's own only where it is the caller's).
func (s *Server) getenvFor(req ServeRequest) func(string) string {
	base := s.Getenv
	if base == nil {
		base = os.Getenv
	}
	return func(k string) string {
		switch {
		case slices.Contains(CallerPiEnv, k):
			if req.Caller == nil && s.CallersEnv {
				return base(k)
			}
			return req.Caller[k]
		case req.Env != nil && slices.Contains(CallerEnv, k):
			return req.Env[k]
		}
		return base(k)
	}
}

// timeoutOf is the deadline of one call by its verb.
func (s *Server) timeoutOf(args []string) time.Duration {
	if len(args) > 0 && (args[0] == "wait" || args[0] == "run") {
		if s.WaitTimeout > 0 {
			return s.WaitTimeout
		}
		return DefaultWaitTimeout
	}
	if s.CallTimeout > 0 {
		return s.CallTimeout
	}
	return DefaultCallTimeout
}

// one runs one request's verb; the service cannot serve itself.
func (s *Server) one(ctx context.Context, req ServeRequest, stdio IO) error {
	var err error
	switch {
	case len(req.Args) == 0:
		err = errcode.New(errcode.InvalidInput, "no command given")
	case req.Args[0] == "serve":
		err = errcode.New(errcode.InvalidInput, "serve cannot run inside serve")
	case req.Args[0] == "service" && s.Info != nil:
		_, _ = io.WriteString(stdio.Out, mustJSON(s.Info)+"\n")
		return nil
	default:
		return runVerb(ctx, req.Args, stdio, s.dial)
	}
	_, _ = io.WriteString(stdio.Out, mustJSON(client.ErrorEnvelope(verbOf(req.Args), err))+"\n")
	return err
}

func verbOf(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// idPattern finds a request's ID at the start of a line that is not a
// request, so that the error reaches the call that sent it.
var idPattern = regexp.MustCompile(`^\s*\{\s*"id"\s*:\s*(-?\d{1,18})\b`)

func idOf(line []byte) int64 {
	m := idPattern.FindSubmatch(line)
	if m == nil {
		return 0
	}
	id, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return id
}
