package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContractsExtModelAndProfileShown: the profile (scout) names no model,
// so its children run pi's default, the scripted model. Every surface shows
// what ran (issue #31, item 6): the task tool's details and items
// (provider, model), delegate_to_subagents' windows, get_subagent_session's
// model; and delegate_to_subagents' summary lines carry the profile info
// the delegate contract shows (item 7): the profile and the model it ran.
// Before, a summary line named no profile.
func TestContractsExtModelAndProfileShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("c-task", finalizeStep("probe: all green"))
	e.model.Script("c-map", finalizeStep("modules: three"))
	e.model.Script("c-plain", finalizeStep("plain: done"))
	e.model.Script("parent-model",
		call("task", map[string]string{"op": "start", "subagent_type": "scout", "description": "probe", "prompt": "[[script:c-task]] Probe."}),
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{
			{"name": "map", "prompt": "[[script:c-map]] Map the modules.", "profile": "scout"},
			{"name": "plain", "prompt": "[[script:c-plain]] Anything."},
		}}),
		call("get_subagent_session", map[string]string{"sessionId": "{{match:map: completed .session: ([0-9a-f-]+)}}"}),
		scriptedmodel.Step{Text: "Done."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-model]] Probe and map.")
	p.wait(t)
	const provider, model = scriptedmodel.ProviderName, scriptedmodel.ModelID

	task := toolEnds(p, "task")[0].Details
	if task["provider"] != provider || task["model"] != model {
		t.Errorf("task details: provider %v, model %v; want %s, %s", task["provider"], task["model"], provider, model)
	}
	items, _ := task["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["provider"] != provider || items[0].(map[string]any)["model"] != model {
		t.Errorf("task items: %v", items)
	}

	del := toolEnds(p, "delegate_to_subagents")[0]
	lines := strings.Split(del.Text, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "✓ map: completed (session: ") ||
		!strings.HasSuffix(lines[0], ") (profile: scout, model: "+provider+"/"+model+")") {
		t.Errorf("summary line of a task with a profile: %q", lines[0])
	}
	// No profile named: the delegate contract's plain line.
	if len(lines) == 2 && (!strings.HasPrefix(lines[1], "✓ plain: completed (session: ") || strings.Contains(lines[1], "profile")) {
		t.Errorf("summary line of a task without a profile: %q", lines[1])
	}
	for i, w := range del.Details["windows"].([]any) {
		if w := w.(map[string]any); w["provider"] != provider || w["model"] != model {
			t.Errorf("window %d: provider %v, model %v", i, w["provider"], w["model"])
		}
	}
	if m := toolEnds(p, "get_subagent_session")[0].Details["model"]; m != provider+"/"+model {
		t.Errorf("get_subagent_session's model = %v", m)
	}
}
