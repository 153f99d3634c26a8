package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// toolDefinitionBudget is what this extension's tool definitions may weigh
// in every request the parent makes: 4,881 bytes before plans (measured by
// this test at 858d636, as pi sends them to an openai-completions model),
// plus at most 2 KB for the plan surface (#32). The task tool's op
// schedule (#34, at most 1 KB more) took them from 6,134 bytes (b7c7faf)
// to 6,594 (+460: the op's name and the schedule parameter's help), which
// this budget still holds.
const toolDefinitionBudget = 4881 + 2048

// TestToolDefinitionBytes measures, in a real parent pi's first request to
// the model, the bytes of the tool definitions this extension adds (every
// tool that is not one of pi's own), and holds them to the budget.
func TestToolDefinitionBytes(t *testing.T) {
	e := newEnv(t)
	e.model.Script("tools-bytes", scriptedmodel.Step{Text: "Hello."})
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:tools-bytes]] Hi.")
	p.wait(t)
	reqs := e.model.RequestsFor("tools-bytes")
	if len(reqs) == 0 {
		t.Fatal("the parent asked the model nothing")
	}
	var body struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	ours, total := 0, 0
	var names []string
	for _, raw := range body.Tools {
		var tool struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		total += len(raw)
		if slices.Contains([]string{"read", "bash", "edit", "write", "grep", "find", "ls"}, tool.Function.Name) {
			continue
		}
		// A primary profile's own tool (the built-in finder, librarian and
		// oracle) is the profile's, registered once the folder's profiles
		// are listed (settings tools.primary turns them off): not the
		// extension's own surface, which the budget is about.
		if slices.Contains([]string{"finder", "librarian", "oracle"}, tool.Function.Name) {
			continue
		}
		ours += len(raw)
		names = append(names, tool.Function.Name)
	}
	t.Logf("tool definitions: %d bytes in all, %d of them this extension's (%v)", total, ours, names)
	if !slices.Contains(names, "task") {
		t.Fatalf("the task tool is not among %v", names)
	}
	if ours > toolDefinitionBudget {
		t.Fatalf("this extension's tool definitions are %d bytes; the budget is %d", ours, toolDefinitionBudget)
	}
}
