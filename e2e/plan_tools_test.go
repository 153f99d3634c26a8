package e2e

import (
	"bytes"
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
	t.Parallel()
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
	ours, total, scheduleBytes := 0, 0, 0
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
		if tool.Function.Name == "task" {
			scheduleBytes = scheduleSurface(t, raw)
		}
	}
	t.Logf("tool definitions: %d bytes in all, %d of them this extension's (%v)", total, ours, names)
	if !slices.Contains(names, "task") {
		t.Fatalf("the task tool is not among %v", names)
	}
	if ours > toolDefinitionBudget {
		t.Fatalf("this extension's tool definitions are %d bytes; the budget is %d", ours, toolDefinitionBudget)
	}
	// The schedules' own budget (#34): what the task tool's op schedule
	// adds, whatever the plans' surface leaves of the budget above.
	t.Logf("the task tool's op schedule: %d bytes (%d without it)", scheduleBytes, ours-scheduleBytes)
	if scheduleBytes > scheduleToolBudget {
		t.Fatalf("the task tool's op schedule adds %d bytes to the tool definitions; its budget is %d", scheduleBytes, scheduleToolBudget)
	}
}

// scheduleToolBudget is what the task tool's op schedule may add to the
// tool definitions: its name in op's enum and the schedule parameter
// (#34: at most 1 KB).
const scheduleToolBudget = 1024

// scheduleSurface is the bytes the op schedule adds to the task tool's
// definition raw, as pi sends it: the "schedule" property (its key, value
// and the comma that joins it) and "schedule" among op's values.
func scheduleSurface(t *testing.T, raw json.RawMessage) int {
	t.Helper()
	var task struct {
		Function struct {
			Parameters struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &task); err != nil {
		t.Fatal(err)
	}
	props := task.Function.Parameters.Properties
	schedule, op := props["schedule"], props["op"]
	if schedule == nil || !bytes.Contains(op, []byte(`"schedule"`)) {
		t.Fatalf("the task tool has no op schedule: %s", raw)
	}
	// Each measured as it stands in the definition's bytes.
	property := append([]byte(`"schedule":`), schedule...)
	if !bytes.Contains(raw, property) {
		t.Fatalf("the schedule property is not %s in the definition as sent", property)
	}
	return len(property) + len(",") + len(`,"schedule"`)
}
