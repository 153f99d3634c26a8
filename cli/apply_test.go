package cli

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

func TestParseApply(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    *applyOptions
		ids     []string
		wantErr bool
	}{
		{"apply", []string{"--json", "a"}, &applyOptions{}, []string{"a"}, false},
		{"discard several", []string{"--discard", "a", "b"}, &applyOptions{discard: true}, []string{"a", "b"}, false},
		{"a flag it has not", []string{"--force", "a"}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, v, err := parse("apply", tt.args, IO{Err: &bytes.Buffer{}, Getenv: func(string) string { return "" }})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				if !errcode.Is(err, errcode.InvalidInput) {
					t.Fatalf("a bad flag is %v, want INVALID_INPUT", err)
				}
				return
			}
			if !reflect.DeepEqual(v, tt.want) || !slices.Equal(cmd.args, tt.ids) {
				t.Fatalf("options %+v args %q", v, cmd.args)
			}
		})
	}
	if !slices.Contains(Verbs, "apply") {
		t.Fatal("apply is not among the client verbs")
	}
}

// TestApplyOutcome: several IDs' answers make one envelope whose status is
// the worst of them, and the exit says a conflict (2, APPLY_CONFLICT)
// before a task without a change (its own code).
func TestApplyOutcome(t *testing.T) {
	item := func(status string, code errcode.Code) client.Item {
		it := client.Item{Status: status}
		if code != "" {
			it.Error = errcode.NewInfo(code, "why")
		}
		return it
	}
	env := func(status string, items ...client.Item) client.Envelope {
		return client.Envelope{Op: "apply", Status: status, Items: items, Text: status}
	}
	tests := []struct {
		name     string
		envs     []client.Envelope
		discard  bool
		status   string
		exitCode int
		code     errcode.Code
	}{
		{"applied", []client.Envelope{env("applied", item("applied", ""), item("empty", ""))}, false, "applied", 0, ""},
		{"a conflict among applied", []client.Envelope{env("applied", item("applied", "")), env("conflict", item("conflict", errcode.ApplyConflict))},
			false, "conflict", 2, errcode.ApplyConflict},
		{"a task still running", []client.Envelope{env("applied", item("applied", "")), env("failed", item("failed", errcode.SessionRunning))},
			false, "failed", 2, errcode.SessionRunning},
		{"a conflict wins over a failure", []client.Envelope{env("failed", item("failed", errcode.InvalidInput)), env("conflict", item("conflict", errcode.ApplyConflict))},
			false, "conflict", 2, errcode.ApplyConflict},
		{"discarded", []client.Envelope{env("discarded", item("discarded", "")), env("discarded", item("discarded", ""))}, true, "discarded", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := combineApply(tt.envs, tt.discard)
			if out.Status != tt.status {
				t.Fatalf("status %q, want %q", out.Status, tt.status)
			}
			err := applyExit(out)
			if got := errcode.ExitCode(err); got != tt.exitCode {
				t.Fatalf("exit %d (%v), want %d", got, err, tt.exitCode)
			}
			if tt.code != "" && errcode.CodeOf(err) != tt.code {
				t.Fatalf("code %s, want %s", errcode.CodeOf(err), tt.code)
			}
		})
	}
}
