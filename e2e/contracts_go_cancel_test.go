package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContractsCancelOfSeveralIDsHasAPriorStatus (issue 31, item 7): a
// real parent pi's task tool cancels two tasks at once, one finished and
// one running. The answer has the task contract's prior_status at the top
// (running: what status said of the two just before) as well as on each
// item, and the finished task's is a task status (completed), never
// waiting_for_input.
func TestContractsCancelOfSeveralIDsHasAPriorStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	e.model.Script("c-quick", finalizeStep("quick: done"))
	e.model.Script("c-slow", scriptedmodel.Step{Hang: true})
	e.model.Script("parent-cancel",
		call("task", map[string]any{"op": "start", "subagent_type": "scout", "description": "quick", "prompt": "[[script:c-quick]] Look."}),
		call("task", map[string]any{"op": "start", "async": true, "subagent_type": "scout", "description": "slow", "prompt": "[[script:c-slow]] Think."}),
		call("task", map[string]any{"op": "cancel", "ids": []string{
			"{{match:quick .task_id: ([0-9a-f-]+)}}", "{{match:background: ([0-9a-f-]+)}}",
		}}),
		scriptedmodel.Step{Text: "Cancelled."},
		scriptedmodel.Step{Text: "Noted."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-cancel]] Start two, then cancel both.")
	p.wait(t)
	details := toolResultDetails(t, p, "task")
	if len(details) < 3 {
		t.Fatalf("%d task results, want 3", len(details))
	}
	d := details[2]
	b, _ := json.Marshal(d)
	if d["op"] != "cancel" || d["cancel_applied"] != true || d["prior_status"] != "running" {
		t.Fatalf("cancel of two IDs: top-level cancel_applied %v prior_status %v, want true and running: %s", d["cancel_applied"], d["prior_status"], b)
	}
	items, _ := d["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("cancel of two IDs has %d items: %s", len(items), b)
	}
	quick, _ := items[0].(map[string]any)
	slow, _ := items[1].(map[string]any)
	if quick["cancel_applied"] != false || quick["prior_status"] != "completed" || quick["status"] != "completed" {
		t.Fatalf("the finished task's answer: %v", quick)
	}
	if slow["cancel_applied"] != true || !slices.Contains([]any{"queued", "running"}, slow["prior_status"]) {
		t.Fatalf("the running task's answer: %v", slow)
	}
}
