package connection

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
)

// TestSDKLoggerQuietOnCancel: a cancelled child run is no error in the log;
// a real activity error, and other warnings, stay as the SDK logs them.
func TestSDKLoggerQuietOnCancel(t *testing.T) {
	tests := []struct {
		name  string
		log   func(l interface{ Error(string, ...any) })
		level string
	}{
		{"cancelled activity", func(l interface{ Error(string, ...any) }) {
			l.Error("Activity error.", "ActivityType", "RunPi", "Error", temporal.NewCanceledError())
		}, "DEBUG"},
		{"context cancelled", func(l interface{ Error(string, ...any) }) {
			l.Error("Activity error.", "Error", context.Canceled)
		}, "DEBUG"},
		{"real activity error", func(l interface{ Error(string, ...any) }) {
			l.Error("Activity error.", "Error", errors.New("pi exited 1"))
		}, "ERROR"},
		{"another error", func(l interface{ Error(string, ...any) }) {
			l.Error("Workflow panic", "Error", context.Canceled)
		}, "ERROR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := NewSDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
			tc.log(l)
			if !strings.Contains(buf.String(), "level="+tc.level) {
				t.Fatalf("logged %q, want level %s", buf.String(), tc.level)
			}
		})
	}
	var buf bytes.Buffer
	l := NewSDKLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Warn("RecordActivityHeartbeat with error", "Error", temporal.NewCanceledError())
	if buf.Len() != 0 {
		t.Fatalf("a heartbeat refused after a cancel was logged at info or above: %q", buf.String())
	}
}
