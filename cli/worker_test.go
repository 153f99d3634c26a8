package cli

import (
	"os"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

func TestFlagsLogger(t *testing.T) {
	tests := []struct {
		level, format string
		ok            bool
	}{
		{"info", "text", true},
		{"debug", "json", true},
		{"WARN", "JSON", true},
		{"loud", "text", false},
		{"info", "xml", false},
	}
	for _, tt := range tests {
		f := WorkerFlags{LogLevel: tt.level, LogFormat: tt.format}
		_, err := f.Logger(os.Stderr)
		if (err == nil) != tt.ok {
			t.Errorf("Logger(%q, %q) err = %v", tt.level, tt.format, err)
		}
		if err != nil && !errcode.Is(err, errcode.InvalidInput) {
			t.Errorf("err %v has no INVALID_INPUT code", err)
		}
	}
}
