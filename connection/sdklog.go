package connection

import (
	"context"
	"errors"
	"log/slog"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
)

// NewSDKLogger is the Temporal SDK's logger for the worker and its client,
// writing through l. It lowers to debug what the SDK reports of a
// cancellation a user asked for (`subagents cancel`, Escape in pi, a
// delegation cancelled): the SDK logs the cancelled child run as an
// "Activity error." at ERROR and its last heartbeat as a warning, though
// nothing went wrong.
func NewSDKLogger(l *slog.Logger) sdklog.Logger {
	return quietCancels{sdklog.NewStructuredLogger(l)}
}

// routineOnCancel are the SDK's messages that a cancellation brings.
var routineOnCancel = map[string]bool{"Activity error.": true, "RecordActivityHeartbeat with error": true}

type quietCancels struct{ sdklog.Logger }

func (q quietCancels) Warn(msg string, keyvals ...any) {
	if q.routine(msg, keyvals) {
		q.Logger.Debug(msg, keyvals...)
		return
	}
	q.Logger.Warn(msg, keyvals...)
}

func (q quietCancels) Error(msg string, keyvals ...any) {
	if q.routine(msg, keyvals) {
		q.Logger.Debug(msg, keyvals...)
		return
	}
	q.Logger.Error(msg, keyvals...)
}

// With keeps the lowering on a logger with more fields (the SDK's
// per-activity loggers).
func (q quietCancels) With(keyvals ...any) sdklog.Logger {
	return quietCancels{sdklog.With(q.Logger, keyvals...)}
}

// routine: msg is one a cancellation brings, and the error it carries is
// that cancellation.
func (q quietCancels) routine(msg string, keyvals []any) bool {
	if !routineOnCancel[msg] {
		return false
	}
	for i := 1; i < len(keyvals); i += 2 {
		if err, ok := keyvals[i].(error); ok && (errors.Is(err, context.Canceled) || temporal.IsCanceledError(err)) {
			return true
		}
	}
	return false
}
