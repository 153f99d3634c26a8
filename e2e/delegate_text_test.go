package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestDelegatePlainTextIsTheResult (issue 39, section 7): under the
// delegate contract (seed 002), delegate_to_subagents' result is a child's
// last assistant text. A real parent pi delegates two tasks: one with no
// profile whose child answers in plain text completes with that text as
// its output (get_subagent_output), after one child run and no corrective
// turn; one whose profile asks for finalize (`finalize: true`) and whose
// child answers in plain text still gets the corrective turns and fails
// FINALIZE_MISSING. Before, the first failed as the second does.
func TestDelegatePlainTextIsTheResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.writeProfile("strict", "---\nname: strict\ndescription: Must finalize.\nfinalize: true\n---\nAnswer briefly.\n")
	e.startWorker(shared.client)
	e.model.Script("c-plain", scriptedmodel.Step{Text: "The modules are api, cli and workers."})
	e.model.Script("c-strict",
		scriptedmodel.Step{Text: "strict answer 1"}, scriptedmodel.Step{Text: "strict answer 2"}, scriptedmodel.Step{Text: "strict answer 3"})
	plain := "plain: completed .session: ([0-9a-f-]+)"
	e.model.Script("parent-plain",
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{
			{"name": "plain", "prompt": "[[script:c-plain]] Name the modules."},
			{"name": "strict", "prompt": "[[script:c-strict]] Name the modules.", "profile": "strict"},
		}}),
		call("get_subagent_output", map[string]string{"sessionId": "{{match:" + plain + "}}"}),
		scriptedmodel.Step{Text: "Done."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-plain]] Map the modules.")
	p.wait(t)
	reqs := e.model.RequestsFor("parent-plain")
	if len(reqs) != 3 {
		t.Fatalf("the parent made %d model requests, want 3", len(reqs))
	}
	summary := toolResultText(t, reqs, 1)
	lines := strings.Split(summary, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "✓ plain: completed (session: ") ||
		!strings.HasPrefix(lines[1], "✗ strict: error — The sub-agent ended without a valid subagent_finalize after 3 attempts") {
		t.Fatalf("delegate_to_subagents summary:\n%s", summary)
	}
	if out := toolResultText(t, reqs, 2); out != "The modules are api, cli and workers." {
		t.Fatalf("get_subagent_output = %q, want the child's last text", out)
	}
	if n := len(e.model.RequestsFor("c-plain")); n != 1 {
		t.Errorf("the plain child's model was asked %d times, want once (no corrective turn)", n)
	}
	if n := len(e.model.RequestsFor("c-strict")); n != 3 {
		t.Errorf("the strict profile's child was asked %d times, want 3 (two corrective turns)", n)
	}
	del := toolEnds(p, "delegate_to_subagents")
	if len(del) != 1 || !del[0].IsError {
		t.Errorf("delegate_to_subagents with a failed task: %+v", del)
	}
}
