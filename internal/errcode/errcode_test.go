package errcode

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestCodeOf(t *testing.T) {
	cause := fs.ErrNotExist
	tests := []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, ""},
		{"plain error is a runtime failure", errors.New("boom"), Failed},
		{"coded", New(UnknownAgent, "Unknown profile"), UnknownAgent},
		{"wrapped coded", fmt.Errorf("start: %w", New(Timeout, "Timed out")), Timeout},
		{"errorf keeps cause", Errorf(InvalidInput, "read: %w", cause), InvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CodeOf(tt.err); got != tt.want {
				t.Fatalf("CodeOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorfWrapsCause(t *testing.T) {
	err := Errorf(InvalidInput, "open db: %w", fs.ErrPermission)
	if !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("cause lost: %v", err)
	}
	if err.Error() != "open db: permission denied" {
		t.Fatalf("message = %q", err.Error())
	}
	if !Is(fmt.Errorf("x: %w", err), InvalidInput) {
		t.Fatal("Is did not find the code through a wrap")
	}
}

func TestEveryCodeHasACategory(t *testing.T) {
	valid := map[Category]bool{
		CategoryInvalidInput: true, CategoryNotFound: true, CategoryPermission: true,
		CategoryTimeout: true, CategoryRuntime: true, CategoryUnavailable: true,
	}
	for _, c := range All() {
		if _, ok := categories[c]; !ok {
			t.Errorf("%s has no category", c)
		}
		if !valid[c.Category()] {
			t.Errorf("%s has category %q", c, c.Category())
		}
	}
	if len(All()) != len(categories) {
		t.Fatalf("All() lists %d codes, categories has %d", len(All()), len(categories))
	}
	if got := Code("NOPE").Category(); got != CategoryRuntime {
		t.Fatalf("unknown code category = %q", got)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("unclassified"), ExitFailed},
		{New(InvalidInput, "port in use"), ExitBadInput},
		{New(UnknownAgent, "Unknown profile"), ExitBadInput},
		{New(PermissionDenied, "denied"), ExitBadInput},
		{fmt.Errorf("dial: %w", New(ServiceUnavailable, "no server")), ExitUnavailable},
		{fmt.Errorf("wait: %w", ErrPending), ExitPending},
		{New(Timeout, "Timed out"), ExitFailed},
		{New(FinalizeMissing, "no finalize"), ExitFailed},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Code
		ok   bool
	}{
		{"PERMISSION_DENIED", PermissionDenied, true},
		{"SUBAGENT_DEPTH_EXCEEDED", DepthExceeded, true},
		{"WORKER_STOPPED", "", false},
		{"permission_denied", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := Parse(tt.in)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("Parse(%q) = %q, %v", tt.in, got, ok)
		}
	}
}
