package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"sync"

	"github.com/durable-pi/subagents/internal/errcode"
)

// ServeRequest is one line a program writes to `subagents serve`: a verb's
// arguments as it would pass them to the command, and its stdin; or, with
// Cancel, the end of an earlier request (a wait it no longer wants).
type ServeRequest struct {
	ID     int64    `json:"id"`
	Args   []string `json:"args,omitempty"`
	Input  string   `json:"input,omitempty"`
	Cancel bool     `json:"cancel,omitempty"`
}

// ServeReply is one line `subagents serve` writes: a line of a request's
// stdout as the command would print it, or, last, its exit code.
type ServeReply struct {
	ID   int64   `json:"id"`
	Line *string `json:"line,omitempty"`
	Exit *int    `json:"exit,omitempty"`
}

// maxServeLine bounds one request line: a start request is at most
// maxRequestBytes, JSON-quoted once more.
const maxServeLine = 2*maxRequestBytes + 4096

// serveMain is `subagents serve`: one process that answers many verb calls,
// each a JSON line on stdin (ServeRequest), with their output as JSON lines
// on stdout (ServeReply), over one connection to Temporal. The pi extension
// keeps one per parent pi, so a tool call costs no process start and no
// dial. Requests run concurrently; the process ends when stdin closes.
func serveMain(ctx context.Context, args []string, stdio IO) error {
	fs := flag.NewFlagSet("subagents serve", flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	base := &command{verb: "serve", io: stdio}
	base.common(fs)
	if err := fs.Parse(args); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	conn := newSharedConn(base)
	defer conn.close()

	var (
		mu      sync.Mutex
		enc     = json.NewEncoder(stdio.Out)
		cancels = map[int64]context.CancelFunc{}
		wg      sync.WaitGroup
	)
	reply := func(r ServeReply) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(r)
	}
	sc := bufio.NewScanner(stdio.In)
	sc.Buffer(make([]byte, 64<<10), maxServeLine)
	for sc.Scan() {
		var req ServeRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			code := errcode.ExitBadInput
			line := mustJSON(ErrorEnvelope("serve", errcode.Wrap(errcode.InvalidInput, err, "request: "+err.Error())))
			reply(ServeReply{ID: req.ID, Line: &line})
			reply(ServeReply{ID: req.ID, Exit: &code})
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
		rctx, cancel := context.WithCancel(ctx)
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
			out := &lineWriter{emit: func(line string) { reply(ServeReply{ID: req.ID, Line: &line}) }}
			err := serveOne(rctx, req, IO{In: strings.NewReader(req.Input), Out: out, Err: io.Discard, Getenv: stdio.Getenv, Terminal: func() bool { return false }, Compact: true}, conn)
			out.flush()
			code := errcode.ExitOK
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, flag.ErrHelp) {
				code = errcode.ExitCode(err)
			}
			reply(ServeReply{ID: req.ID, Exit: &code})
		}()
	}
	wg.Wait()
	if err := sc.Err(); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "reading requests: "+err.Error())
	}
	return nil
}

// serveOne runs one request's verb; serve cannot serve itself.
func serveOne(ctx context.Context, req ServeRequest, stdio IO, conn *sharedConn) error {
	var err error
	switch {
	case len(req.Args) == 0:
		err = errcode.New(errcode.InvalidInput, "no command given")
	case req.Args[0] == "serve":
		err = errcode.New(errcode.InvalidInput, "serve cannot run inside serve")
	default:
		return runVerb(ctx, req.Args, stdio, conn.dial)
	}
	verb := ""
	if len(req.Args) > 0 {
		verb = req.Args[0]
	}
	_, _ = io.WriteString(stdio.Out, mustJSON(ErrorEnvelope(verb, err))+"\n")
	return err
}

// sharedConn is serve's one Temporal client, dialed at the first request
// that needs it, and again after a failed dial (the server may come up
// later).
type sharedConn struct {
	base *command
	mu   sync.Mutex
	c    *Client
	stop func()
}

func newSharedConn(base *command) *sharedConn { return &sharedConn{base: base} }

func (s *sharedConn) dial(cmd *command, ctx context.Context) (*Client, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		c, stop, err := s.base.dialOwn(ctx)
		if err != nil {
			return nil, nil, err
		}
		s.c, s.stop = c, stop
	}
	// Each verb gets its own copy: it may set per-call fields.
	c := *s.c
	c.TaskQueue = cmd.taskQueue
	return &c, func() {}, nil
}

func (s *sharedConn) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
}

// lineWriter hands on what a verb prints, a line at a time.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.emit(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
