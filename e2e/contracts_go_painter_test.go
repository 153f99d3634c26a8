package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContractsPainterProfileIsBuiltIn (issue 31, item 7): the painter the
// task contract scaffolds ("explicit-request image generation/editing
// helper") is a built-in profile: a real parent pi lists it, and its task
// tool runs it with the painter's prompt and a tool that writes the image.
func TestContractsPainterProfileIsBuiltIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10" fill="red"/></svg>`
	e.model.Script("c-paint",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "write", Arguments: `{"path":"square.svg","content":"` + strings.ReplaceAll(svg, `"`, `\"`) + `"}`}}},
		finalizeStep("wrote square.svg (SVG, 10x10)"),
	)
	e.model.Script("parent-paint",
		call("list_subagent_profiles", map[string]any{}),
		call("task", map[string]any{"op": "start", "subagent_type": "painter", "description": "square", "prompt": "[[script:c-paint]] Draw a red square as square.svg."}),
		scriptedmodel.Step{Text: "Painted."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-paint]] Draw a red square.")
	p.wait(t)
	reqs := e.model.RequestsFor("parent-paint")
	if len(reqs) != 3 {
		t.Fatalf("the parent made %d model requests, want 3", len(reqs))
	}
	if listed := toolResultText(t, reqs, 1); !strings.Contains(listed, "painter (builtin)") || !strings.Contains(listed, "Explicit-request image generation/editing helper") {
		t.Fatalf("list_subagent_profiles:\n%s", listed)
	}
	if ran := toolResultText(t, reqs, 2); !strings.HasPrefix(ran, "✓ Painter · square [task_id: ") || !strings.Contains(ran, "wrote square.svg") {
		t.Fatalf("task with subagent_type painter:\n%s", ran)
	}
	if b, err := os.ReadFile(filepath.Join(e.workDir, "square.svg")); err != nil || string(b) != svg {
		t.Fatalf("the painter's image: %q, %v", b, err)
	}
	child := e.model.RequestsFor("c-paint")
	if len(child) == 0 {
		t.Fatal("the painter's child never asked the model")
	}
	var system string
	for _, m := range child[0].Parsed.Messages {
		if m.Role == "system" {
			system += m.Text()
		}
	}
	if !strings.Contains(system, "You are the painter") || !strings.Contains(system, "only when the task explicitly asks for an image") {
		t.Fatalf("the child ran without the painter's prompt:\n%.2000s", system)
	}
}
