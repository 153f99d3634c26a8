package devserver

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger lets the embedded server log through slog, so the server's
// lines share the process's format (text or JSON) and destination.
type serverLogger struct {
	log   *slog.Logger
	level *slog.LevelVar
}

var _ log.Logger = serverLogger{}

func newServerLogger(l *slog.Logger, level *slog.LevelVar) serverLogger {
	return serverLogger{log: l, level: level}
}

// expectedWarnings are the server's warnings about a choice this package
// made on purpose: the HTTP API is off by default (see Options.HTTPPort),
// and a user of the dev server has no Nexus endpoints to miss.
var expectedWarnings = []string{"HTTP API port has not been set"}

// routineWarnings are the server's warnings about what a user of the dev
// server does every minute, logged at debug instead: each UI page that
// shows a history asks for a page larger than the frontend's threshold
// (the frontend caps it and answers), and an update that waits for its
// result (the `wait` and `send` updates the client and the extension call)
// is held open until the session's turn ends, which the slow-request
// logger, exempting only long polls by name, takes for a slow call.
var routineWarnings = map[string]func(tags []tag.Tag) bool{
	"GetHistory page size is larger than threshold": func([]tag.Tag) bool { return true },
	"Slow gRPC call": func(tags []tag.Tag) bool {
		for _, t := range tags {
			if t.Key() == "method" {
				m, _ := t.Value().(string)
				return waitingMethods[m[strings.LastIndexByte(m, '/')+1:]]
			}
		}
		return false
	},
}

// waitingMethods are the frontend's calls that wait for a workflow by
// design: an update (alone or with a start) answers when its handler
// returns. The long polls themselves (PollWorkflowExecutionUpdate, a
// history read that waits for a new event) the server never reports.
var waitingMethods = map[string]bool{"UpdateWorkflowExecution": true, "ExecuteMultiOperation": true}

func (l serverLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if routine, ok := routineWarnings[msg]; ok && level == slog.LevelWarn && routine(tags) {
		level = slog.LevelDebug
	}
	if level < l.level.Level() {
		return
	}
	for _, w := range expectedWarnings {
		if strings.HasPrefix(msg, w) {
			return
		}
	}
	attrs := make([]slog.Attr, 0, len(tags))
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	l.log.LogAttrs(context.Background(), level, msg, attrs...)
}

func (l serverLogger) Debug(msg string, tags ...tag.Tag)  { l.emit(slog.LevelDebug, msg, tags) }
func (l serverLogger) Info(msg string, tags ...tag.Tag)   { l.emit(slog.LevelInfo, msg, tags) }
func (l serverLogger) Warn(msg string, tags ...tag.Tag)   { l.emit(slog.LevelWarn, msg, tags) }
func (l serverLogger) Error(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

// Panic and Fatal keep the contract the server's code relies on: it calls
// them only where it cannot go on.
func (l serverLogger) Panic(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	panic(msg)
}

func (l serverLogger) Fatal(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	os.Exit(1)
}

// With returns a logger with tags prepended to every line.
func (l serverLogger) With(tags ...tag.Tag) log.Logger {
	args := make([]any, 0, len(tags))
	for _, t := range tags {
		args = append(args, slog.Any(t.Key(), t.Value()))
	}
	return serverLogger{log: l.log.With(args...), level: l.level}
}

// quietSDKLogger drops the SDK client's logs for the short-lived admin client
// used at start; failures surface as returned errors.
type quietSDKLogger struct{}

func (quietSDKLogger) Debug(string, ...any) {}
func (quietSDKLogger) Info(string, ...any)  {}
func (quietSDKLogger) Warn(string, ...any)  {}
func (quietSDKLogger) Error(string, ...any) {}
