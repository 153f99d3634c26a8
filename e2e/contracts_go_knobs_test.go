package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContractsOutputMaxCharsKnob (issue 31, item 5): the task contract's
// OHM_SUBAGENTS_OUTPUT_MAX_CHARS, set in the environment of the pi that
// delegates (each request carries its pi's knobs, profiles.CallerKnobs),
// caps a task's output: a real parent pi's task tool gets 100 of a
// 327-character output, with the contract's accounting, where it got the
// whole output. The worker, in this process, never reads the knob from its
// own environment (TestKnobsArePerPi), so the test runs beside the others.
func TestContractsOutputMaxCharsKnob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.parentEnvExtra = []string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS=100"}
	e.startWorker(shared.client)
	long := strings.Repeat("0123456789", 32) + "seven!!"
	e.model.Script("c-long", finalizeStep(long))
	e.model.Script("parent-knob",
		call("task", map[string]any{"op": "start", "subagent_type": "scout", "description": "long", "prompt": "[[script:c-long]] Report at length."}),
		scriptedmodel.Step{Text: "Read it."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-knob]] Get the long report.")
	p.wait(t)
	details := toolResultDetails(t, p, "task")
	if len(details) != 1 {
		t.Fatalf("%d task results", len(details))
	}
	d := details[0]
	out, _ := d["output"].(string)
	if len(long) != 327 || out != long[:100] || d["output_truncated"] != true || d["output_total_chars"] != float64(327) || d["output_returned_chars"] != float64(100) {
		t.Fatalf("task output %q (%d characters), truncated %v, total %v, returned %v; want the first 100 of 327",
			out, len(out), d["output_truncated"], d["output_total_chars"], d["output_returned_chars"])
	}
	if text := toolResultText(t, e.model.RequestsFor("parent-knob"), 1); strings.Contains(text, "seven!!") {
		t.Fatalf("the parent's model got the whole output:\n%s", text)
	}
}
