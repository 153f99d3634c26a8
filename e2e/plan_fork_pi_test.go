package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContextForkFromPi: a real parent pi asks for a task, and a plan step,
// with context fork: each child's first request holds the parent's
// conversation (what the user said), without the parent's own delegation
// calls; a task without it starts empty.
func TestContextForkFromPi(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	e.model.Script("fork-task", finalizeStep("the codeword is PELICAN-7"))
	e.model.Script("fork-step", finalizeStep("step knows PELICAN-7"))
	e.model.Script("fresh-task", finalizeStep("I do not know it"))
	e.model.Script("parent-fork",
		call("task", map[string]any{"subagent_type": "scout", "prompt": "[[script:fork-task]] What codeword did the user give?", "context": "fork"}),
		call("task", map[string]any{"plan": map[string]any{"steps": []any{
			map[string]any{"key": "recall", "agent": "scout", "context": "fork", "task": "[[script:fork-step]] Recall the codeword."},
		}}}),
		call("task", map[string]any{"subagent_type": "scout", "prompt": "[[script:fresh-task]] What codeword did the user give?"}),
		scriptedmodel.Step{Text: "Done."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-fork]] Remember the codeword PELICAN-7, then ask the helpers.")
	p.wait(t)
	if ends := toolEnds(p, "task"); len(ends) != 3 || ends[0].IsError || ends[1].IsError || ends[2].IsError {
		t.Fatalf("task calls: %+v", ends)
	}
	for _, script := range []string{"fork-task", "fork-step"} {
		r := e.model.RequestsFor(script)
		if len(r) != 1 {
			t.Fatalf("%s: %d requests", script, len(r))
		}
		all := userText(r[0])
		if !strings.Contains(all, "Remember the codeword PELICAN-7") {
			t.Fatalf("%s's child did not start from the parent's conversation:\n%.600s", script, all)
		}
		for _, m := range r[0].Parsed.Messages {
			for _, tc := range m.ToolCalls {
				if tc.Function.Name == "task" {
					t.Fatalf("%s's child sees the parent's delegation call", script)
				}
			}
		}
	}
	if fresh := userText(e.model.RequestsFor("fresh-task")[0]); strings.Contains(fresh, "PELICAN-7") {
		t.Fatal("a task without context fork saw the parent's conversation")
	}
}
