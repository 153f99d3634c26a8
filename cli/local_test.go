package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// TestForwardWhenTheServiceStops (issue 42): `subagents stop` under a `run`
// or `wait` handed to the local service ended the connection, and the
// command said "EOF … start one with make run". It says instead that the
// service stopped, that the work goes on at its next start, and the wait
// that picks it up: for a run, what the service said it started; for a
// wait, its IDs. A call handed over goes with its flags first.
func TestForwardWhenTheServiceStops(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		started  string // what the service says the call started
		wantArgs []string
		want     string
	}{
		{name: "a run", args: []string{"run", "fix", "it", "--agent", "scout"}, started: "delegation-1",
			wantArgs: []string{"run", "--agent", "scout", "--", "fix", "it"},
			want:     "the subagents service stopped during this call (subagents stop, or it ended): delegation-1 goes on at its next start (subagents dev, or a pi's next delegation starts it), and then subagents wait delegation-1 picks it up"},
		{name: "a plan", args: []string{"run", "--plan", "review.yaml"}, started: "plan-1",
			wantArgs: []string{"run", "--plan", "review.yaml", "--"}, want: "and then subagents wait plan-1 picks it up"},
		{name: "a wait of two", args: []string{"wait", "a", "b", "--timeout", "1h"},
			wantArgs: []string{"wait", "--timeout", "1h", "--", "a", "b"}, want: ": a, b go on at its next start (subagents dev, or a pi's next delegation starts it), and then subagents wait a b picks them up"},
		{name: "a status", args: []string{"status", "a"},
			wantArgs: []string{"status", "--", "a"}, want: "the subagents service stopped during this call (subagents stop, or it ended); start it again (subagents dev, or a pi's next delegation starts it) and repeat the call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out syncbuf.Buffer
			stdio := IO{In: strings.NewReader(""), Out: &out, Err: io.Discard, Dir: t.TempDir(), Getenv: func(string) string { return "" }}
			cmd, v, err := parse(tt.args[0], tt.args[1:], stdio)
			if err != nil {
				t.Fatal(err)
			}
			mine, service := net.Pipe()
			got := make(chan ServeRequest, 1)
			go func() {
				// The service takes the call, says what it started and a
				// line of progress, and stops.
				defer service.Close()
				var req ServeRequest
				line, _ := bufio.NewReader(service).ReadBytes('\n')
				_ = json.Unmarshal(line, &req)
				got <- req
				enc := json.NewEncoder(service)
				if tt.started != "" {
					_ = enc.Encode(ServeReply{ID: req.ID, Started: tt.started})
				}
				progress := "task-1 scout: running"
				_ = enc.Encode(ServeReply{ID: req.ID, Line: &progress})
			}()
			lc := &localConn{conn: mine, replies: bufio.NewReader(mine)}
			err = lc.forward(context.Background(), cmd, v, cmd.argv)
			req := <-got
			if !slices.Equal(req.Args, tt.wantArgs) || !req.ReportStarted {
				t.Errorf("the service got args %q (report_started %v), want %q", req.Args, req.ReportStarted, tt.wantArgs)
			}
			if !errcode.Is(err, errcode.ServiceUnavailable) || !strings.Contains(err.Error(), tt.want) ||
				strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "make run") {
				t.Fatalf("err = %v\nwant SERVICE_UNAVAILABLE with %q", err, tt.want)
			}
			if out.String() != "task-1 scout: running\n" {
				t.Errorf("printed %q", out.String())
			}
		})
	}
}
