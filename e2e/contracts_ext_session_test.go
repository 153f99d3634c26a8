package e2e

import (
	"path/filepath"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContractsExtSessionReportsTheLatestRun: a session resumed under
// another task name; get_subagent_session reports the latest run's
// taskName, as the delegate contract says (issue #31, item 7), with its
// runCount. Before, it reported the first run's name.
func TestContractsExtSessionReportsTheLatestRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	e.model.Script("c-first", finalizeStep("modules: three"))
	e.model.Script("c-again", finalizeStep("modules: four"))
	id := "{{match:map: completed .session: ([0-9a-f-]+)}}"
	e.model.Script("parent-latest",
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "map", "prompt": "[[script:c-first]] Map the modules."}}}),
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "remap", "prompt": "[[script:c-again]] Map them again.", "resume": id}}}),
		call("get_subagent_session", map[string]string{"sessionId": id}),
		scriptedmodel.Step{Text: "Done."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-latest]] Map twice.")
	p.wait(t)
	d := toolEnds(p, "get_subagent_session")[0].Details
	if d["taskName"] != "remap" || d["runCount"] != float64(2) {
		t.Errorf("get_subagent_session: taskName %v, runCount %v; want remap, 2", d["taskName"], d["runCount"])
	}
}
