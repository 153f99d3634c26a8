package cli

import (
	"context"
	"sync"

	"github.com/durable-pi/subagents/client"
)

// serveMain is `subagents serve`: the client protocol (ServeRequest and
// ServeReply, as JSON lines) on stdin and stdout, over one connection to
// the Temporal that the flags name. The pi extension keeps one per parent pi
// when Temporal is remote (a local service answers on its socket instead).
// Requests run concurrently; the process ends when stdin closes and the
// running calls have answered.
func serveMain(ctx context.Context, args []string, stdio IO) error {
	base := &command{verb: "serve", io: stdio}
	if _, err := ParseFlags("serve", args, stdio.Err, base.common); err != nil {
		return err
	}
	conn := &sharedConn{base: base}
	defer conn.close()
	// Each pi starts a serve of its own, with its own environment.
	s := &Server{dial: conn.dial, Getenv: stdio.Getenv, CallersEnv: true}
	return s.ServeConn(ctx, stdio.In, stdio.Out, ConnOptions{})
}

// sharedConn is serve's one Temporal client, dialed at the first request
// that needs it, and again after a failed dial (the server may come up
// later).
type sharedConn struct {
	base *command
	mu   sync.Mutex
	c    *client.Client
	stop func()
}

func (s *sharedConn) dial(cmd *command, ctx context.Context) (*client.Client, func(), error) {
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
