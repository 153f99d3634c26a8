package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestExtShowsTheModelTheChildRan: the profile names no model, so the
// child runs pi's default (the scripted model). While nobody knows which
// model that is, the extension names none; once the child has said, every
// tool shows scripted/scripted-1. Before, the live windows and the
// retrieval tools showed default/default.
func TestExtShowsTheModelTheChildRan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	slow := finalizeStep("modules: three")
	// Long enough for the live windows to be drawn while the child runs.
	slow.DelayMS = 1500
	e.model.Script("c-model", slow)
	e.model.Script("c-model-2", finalizeStep("the loader: config/load.go"))
	e.model.Script("parent-model",
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "map", "prompt": "[[script:c-model]] Map the modules."}}}),
		call("get_subagent_session", map[string]string{"sessionId": "{{match:map: completed .session: ([0-9a-f-]+)}}"}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-model-2]] Find the loader."}),
		scriptedmodel.Step{Text: "Done."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-model]] Map it.")
	p.wait(t)

	if n := countIn(p, `"type":"tool_execution_update"`, "Sub-agents: 1 running"); n == 0 {
		t.Fatal("no live window was drawn while the child ran")
	}
	if strings.Contains(p.events.String(), "default/default") {
		t.Error("a tool showed the model as default/default")
	}
	const ran = scriptedmodel.ProviderName + "/" + scriptedmodel.ModelID
	del := toolEnds(p, "delegate_to_subagents")[0]
	w := del.Details["windows"].([]any)[0].(map[string]any)
	if w["provider"] != scriptedmodel.ProviderName || w["model"] != scriptedmodel.ModelID {
		t.Errorf("delegate_to_subagents' window: provider %v, model %v; want %s", w["provider"], w["model"], ran)
	}
	if m := toolEnds(p, "get_subagent_session")[0].Details["model"]; m != ran {
		t.Errorf("get_subagent_session's model = %v, want %s", m, ran)
	}
	results, _ := toolEnds(p, "subagent")[0].Details["results"].([]any)
	if len(results) != 1 || results[0].(map[string]any)["model"] != ran {
		t.Errorf("subagent's results: %v, want model %s", results, ran)
	}
}
