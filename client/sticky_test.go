package client

import (
	"context"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// TestStickyWorkflowID: the same folder, agent and ID give the same
// workflow ID; another agent or folder another one; every one is a valid
// name (it becomes part of the session file's name).
func TestStickyWorkflowID(t *testing.T) {
	a := stickyWorkflowID("s1", "scout", "/repo")
	if a != stickyWorkflowID("s1", "scout", "/repo") {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{stickyWorkflowID("s1", "planner", "/repo"), stickyWorkflowID("s1", "scout", "/other"), stickyWorkflowID("s2", "scout", "/repo")} {
		if other == a {
			t.Fatalf("%s names two sessions", a)
		}
	}
	long := stickyWorkflowID(strings.Repeat("x", 128), "scout", "/repo")
	for _, id := range []string{a, long} {
		if !api.ValidName(id) {
			t.Fatalf("%q is not a valid session ID", id)
		}
	}
	if !strings.HasPrefix(a, "s1-") {
		t.Fatalf("%q does not start with the caller's ID", a)
	}
}

// TestStickyIDsAreSessionIDs: an ID that names a one-task delegation (or
// is no name) is refused before anything is asked of Temporal: a session of
// that ID could never be addressed as one.
func TestStickyIDsAreSessionIDs(t *testing.T) {
	for _, id := range []string{"delegation-notes-1", "../x", ""} {
		_, _, err := (&Client{}).stickySession(context.Background(), SendRequest{TaskID: id, Agent: "scout", Cwd: "/repo", Sticky: true})
		if errcode.CodeOf(err) != errcode.InvalidInput {
			t.Errorf("sticky ID %q: %v, want INVALID_INPUT", id, err)
		}
	}
}
