package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"scout", true},
		{"code-reviewer_2", true},
		{"019a3b2c-7d4e-7f00-8a1b-2c3d4e5f6a7b", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 129), false},
		{"../../../../tmp/x/notes", false},
		{"a/b", false},
		{"a.b", false},
		{"..", false},
		{"code reviewer", false},
		{"a\x00b", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := ValidName(tt.name); got != tt.want {
			t.Errorf("ValidName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestNameErrors: every input a path is built from refuses a bad name with
// INVALID_INPUT, and the error says which field and wraps ErrInvalidName.
func TestNameErrors(t *testing.T) {
	const bad = "../../../../tmp/x/notes"
	task := TaskSpec{Name: "t", Prompt: "p", Cwd: "/w"}
	delegation := func(edit func(*DelegationInput)) error {
		in := DelegationInput{Tasks: []TaskSpec{task}, SessionIDs: []string{"s-1"}}
		edit(&in)
		return ValidateDelegation(in)
	}
	session := func(edit func(*SessionInput)) error {
		in := SessionInput{SessionID: "s-1", Cwd: "/w", Prompt: "p"}
		edit(&in)
		return ValidateSession(in)
	}
	tests := []struct {
		name string
		err  error
		want string // "" for no error
	}{
		{"a valid delegation", delegation(func(*DelegationInput) {}), ""},
		{"task agent", delegation(func(in *DelegationInput) { in.Tasks[0].Agent = bad }), `tasks[0] (t): agent "` + bad},
		{"task profile", delegation(func(in *DelegationInput) { in.Tasks[0].Profile = "a b" }), `profile "a b"`},
		{"task resume", delegation(func(in *DelegationInput) { in.Tasks[0].Resume = "../s" }), `session ID "../s"`},
		{"default profile", delegation(func(in *DelegationInput) { in.Profile = bad }), `profile "` + bad},
		{"session ID", delegation(func(in *DelegationInput) { in.SessionIDs[0] = "../s" }), `session ID "../s"`},
		{"a rejected task is not looked at", delegation(func(in *DelegationInput) {
			in.Tasks[0].Agent, in.Tasks[0].Rejected = bad, errcode.NewInfo(errcode.InvalidInput, "no")
		}), ""},
		{"a valid session", session(func(*SessionInput) {}), ""},
		{"session agent", session(func(in *SessionInput) { in.Agent = bad }), `agent "` + bad},
		{"session's child profile", session(func(in *SessionInput) { in.Child.Profile = bad }), `profile "` + bad},
		{"session ID of a session", session(func(in *SessionInput) { in.SessionID = "" }), `session ID ""`},
		{"the one-task delegation's profile", session(func(in *SessionInput) { in.Delegation = &DelegationRole{Task: TaskSpec{Profile: bad}} }), `profile "` + bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == "" {
				if tt.err != nil {
					t.Fatalf("err = %v, want none", tt.err)
				}
				return
			}
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) || errcode.CodeOf(tt.err) != errcode.InvalidInput || !errors.Is(tt.err, ErrInvalidName) {
				t.Fatalf("err = %v (code %s), want INVALID_INPUT naming %s", tt.err, errcode.CodeOf(tt.err), tt.want)
			}
		})
	}
}

// TestNestedUnderAndTaskDetails: a nested run's UI text names the task
// that started it; a top-level pi's names its pi session.
func TestNestedUnderAndTaskDetails(t *testing.T) {
	for _, tt := range []struct {
		depth               int
		parent, under, line string
	}{
		{0, "", "", ""},
		{0, "pi-session-1", "", "- parent pi session: `pi-session-1`"},
		{1, "task-7", " · under task task-7", "- started by task `task-7` (nested, depth 1)"},
		{2, "", "", ""},
	} {
		if got := NestedUnder(tt.depth, tt.parent); got != tt.under {
			t.Errorf("NestedUnder(%d, %q) = %q, want %q", tt.depth, tt.parent, got, tt.under)
		}
		details := TaskDetails("n", "scout", "/w", "look", tt.parent, "", tt.depth)
		if tt.line != "" && !strings.Contains(details, tt.line) || tt.line == "" && strings.Contains(details, "parent") {
			t.Errorf("TaskDetails at depth %d, parent %q:\n%s", tt.depth, tt.parent, details)
		}
	}
}

// TestCheckDepth: a caller at the limit (the given one, else the default)
// starts nothing; one above it neither.
func TestCheckDepth(t *testing.T) {
	for _, tc := range []struct {
		depth, max int
		refused    bool
	}{
		{0, 0, false}, {DefaultMaxDepth - 1, 0, false}, {DefaultMaxDepth, 0, true}, {5, 0, true},
		{2, 3, false}, {3, 3, true}, {1, 1, true},
	} {
		err := CheckDepth(tc.depth, tc.max)
		if got := errcode.CodeOf(err) == errcode.DepthExceeded; got != tc.refused || (err != nil && !tc.refused) {
			t.Errorf("depth %d, limit %d: %v, want refused %v", tc.depth, tc.max, err, tc.refused)
		}
	}
}
