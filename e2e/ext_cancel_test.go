package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestExtEscapeShowsCancelled: the parent aborts its turn (RPC abort, what
// Escape does in the terminal) while a child runs. The call answers with
// the task's state after the cancel: cancelled, in the text and the
// details, as an error for pi; not "Status: ERROR … Task ended with status
// running", as it did when the call returned the wait it had stopped.
func TestExtEscapeShowsCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("c-hang-1", scriptedmodel.Step{Hang: true})
	e.model.Script("c-hang-2", scriptedmodel.Step{Hang: true})
	e.model.Script("parent-esc-1", call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-hang-1]] Think forever."}), scriptedmodel.Step{Text: "Stopped."})
	e.model.Script("parent-esc-2",
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "stuck", "prompt": "[[script:c-hang-2]] Think forever, again."}}}),
		scriptedmodel.Step{Text: "Stopped."},
	)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startExt([]string{"--mode", "rpc", "--session", sessionFile}, "[[script:parent-esc-1]] Delegate.")

	abortWhenChildAsks := func(script string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == script }); err != nil {
			t.Fatalf("the child never asked the model: %v", err)
		}
		p.send(t, map[string]any{"type": "abort"})
	}

	abortWhenChildAsks("c-hang-1")
	sub := waitToolEnds(t, p.parentPi, "subagent", 1)[0]
	if !sub.IsError {
		t.Errorf("the cancelled subagent call is not an error for pi")
	}
	if !strings.HasPrefix(sub.Text, "**Status:** CANCELLED\n") || !strings.Contains(sub.Text, "Task cancelled") {
		t.Errorf("the cancelled subagent call says:\n%s", sub.Text)
	}
	for _, wrong := range []string{"status running", "ERROR", "This operation was aborted"} {
		if strings.Contains(sub.Text, wrong) {
			t.Errorf("the cancelled subagent call says %q:\n%s", wrong, sub.Text)
		}
	}
	if sub.Details["status"] != "cancelled" || errorCode(sub.Details) != "CANCELLED" {
		t.Errorf("subagent details: status %v, error %v", sub.Details["status"], sub.Details["error"])
	}

	// delegate_to_subagents: its summary line and window say cancelled too.
	waitEventCount(t, p.parentPi, "agent_settled", 1)
	p.send(t, map[string]any{"type": "prompt", "message": "[[script:parent-esc-2]] Delegate again."})
	abortWhenChildAsks("c-hang-2")
	del := waitToolEnds(t, p.parentPi, "delegate_to_subagents", 1)[0]
	if !del.IsError || !strings.HasPrefix(del.Text, "⊘ stuck: cancelled — ") {
		t.Errorf("the cancelled delegation: isError=%v\n%s", del.IsError, del.Text)
	}
	windows, _ := del.Details["windows"].([]any)
	if len(windows) != 1 || windows[0].(map[string]any)["status"] != "cancelled" {
		t.Errorf("delegate_to_subagents windows: %v", del.Details["windows"])
	}

	// Both results are in the session: acknowledged, nothing left to deliver.
	parentID := sessionIDOf(t, sessionFile)
	extWaitFor(t, "the cancelled delegations acknowledged", func() bool { return e.openDelegations(parentID) == 0 })
}
