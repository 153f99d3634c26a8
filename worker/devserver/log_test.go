package devserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/server/common/rpc/interceptor"
	"google.golang.org/grpc"

	"github.com/durable-pi/subagents/internal/ports"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// capture is a server logger writing to a buffer at level, as `subagents
// dev` writes to its log.
func capture(level slog.Level) (serverLogger, *syncbuf.Buffer) {
	buf := &syncbuf.Buffer{}
	lv := new(slog.LevelVar)
	lv.Set(level)
	return newServerLogger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), lv), buf
}

// TestWaitingUpdateIsNoSlowCall: an update that waits for its result (a
// `wait` of 16 s) was logged as a "Slow gRPC call" warning by the server's
// slow-request interceptor; it is a debug line now, while a slow call of
// any other method stays a warning. The interceptor is the server's own,
// with a threshold of zero so that every call is slow.
func TestWaitingUpdateIsNoSlowCall(t *testing.T) {
	const service = "/temporal.api.workflowservice.v1.WorkflowService/"
	for _, tc := range []struct {
		method string
		req    any
		want   string // the level the line has at debug; "" for none
	}{
		{"UpdateWorkflowExecution", &workflowservice.UpdateWorkflowExecutionRequest{Namespace: "default",
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "s-1"}}, "DEBUG"},
		{"ExecuteMultiOperation", &workflowservice.ExecuteMultiOperationRequest{Namespace: "default"}, "DEBUG"},
		{"StartWorkflowExecution", &workflowservice.StartWorkflowExecutionRequest{Namespace: "default", WorkflowId: "s-2"}, "WARN"},
		{"SignalWorkflowExecution", &workflowservice.SignalWorkflowExecutionRequest{Namespace: "default",
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "s-3"}}, "WARN"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			for _, level := range []slog.Level{slog.LevelWarn, slog.LevelDebug} {
				logger, buf := capture(level)
				slow := interceptor.NewSlowRequestLoggerInterceptor(logger, func() time.Duration { return 0 })
				_, err := slow.Intercept(context.Background(), tc.req, &grpc.UnaryServerInfo{FullMethod: service + tc.method},
					func(context.Context, any) (any, error) { time.Sleep(time.Millisecond); return nil, nil })
				if err != nil {
					t.Fatal(err)
				}
				out := buf.String()
				shown := tc.want == "WARN" || level == slog.LevelDebug
				if !shown {
					if out != "" {
						t.Errorf("at %s: %s", level, out)
					}
					continue
				}
				if !strings.Contains(out, "level="+tc.want+` msg="Slow gRPC call"`) || !strings.Contains(out, tc.method) {
					t.Errorf("at %s: %q, want a %s line for %s", level, out, tc.want, tc.method)
				}
			}
		})
	}
}

// TestUIHistoryPageIsNoWarning: the UI asks for histories in pages larger
// than the frontend's threshold, and the server warned "GetHistory page
// size is larger than threshold" at every page view; it is a debug line
// now. A real embedded server answers the UI's request.
func TestUIHistoryPageIsNoWarning(t *testing.T) {
	port, err := ports.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncbuf.Buffer{}
	srv, err := Start(context.Background(), Options{
		Port: port, UIPort: -1, Ephemeral: true, ServerLogLevel: slog.LevelDebug,
		Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := sdkclient.DialContext(context.Background(), srv.ClientOptions(sdkclient.Options{Logger: quietSDKLogger{}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// What the UI asks for a workflow's page: 1000 events (a workflow that
	// does not exist answers NotFound after the check).
	_, _ = c.WorkflowService().GetWorkflowExecutionHistory(context.Background(), &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace: srv.Namespace(), Execution: &commonpb.WorkflowExecution{WorkflowId: "no-such-workflow"}, MaximumPageSize: 1000,
	})
	var line string
	for l := range strings.Lines(buf.String()) {
		if strings.Contains(l, "GetHistory page size is larger than threshold") {
			line = l
		}
	}
	if !strings.Contains(line, "level=DEBUG") {
		t.Fatalf("the server's line about the page size: %q, want it at debug", line)
	}
}
