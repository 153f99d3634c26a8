package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// writeSettings writes subagents.json: into pi's config dir (global) or the
// project's .pi folder.
func (e *env) writeSettings(global bool, content string) {
	e.t.Helper()
	dir := e.agentDir
	if !global {
		dir = filepath.Join(e.workDir, ".pi")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "subagents.json"), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// TestSettingsReachTheRun: the settings file's knobs, as a user of the
// seeds sets them, change what a real run does: looping_tool_count (the delegate
// contract) stops a child at its second identical call, taskMaxEvents (the task contract)
// caps its event timeline, taskMaxConcurrency (the task contract) runs a batch one
// task at a time, a disabled agent or a disabled feature is refused with
// its code.
func TestSettingsReachTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	c := e.cli()
	e.writeProfile("scout", "---\nname: scout\nmodel: "+scriptedmodel.ModelRef+"\n---\nLook around.\n")
	e.writeProfile("oracle", "---\nname: oracle\nmodel: "+scriptedmodel.ModelRef+"\n---\nThink.\n")
	e.writeSettings(true, `{"subagents": {"oracle": {"disabled": true}, "looping_tool_count": 9, "taskMaxEvents": 4}}`)
	e.writeSettings(false, `{"subagents": {"looping_tool_count": 2, "taskMaxConcurrency": 1}}`)

	t.Run("looping_tool_count", func(t *testing.T) {
		e.model.Script("loop", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "ls", Arguments: `{"path":"."}`}}, Repeat: true})
		env, out := c.json(1, "", "run", "--agent", "scout", "[[script:loop]] List the folder again and again.")
		it := env.Items[0]
		if it.Error == nil || it.Error.Code != "LOOP_DETECTED" || it.Error.Message != "Loop detected: sub-agent is repeating the same tool calls" {
			t.Fatalf("run: %s", out)
		}
		// The project's 2, not the global 9 nor the default 5.
		if it.ToolCount != 2 {
			t.Fatalf("stopped after %d tool calls, want 2: %s", it.ToolCount, out)
		}
		// The task contract's event_count counts the run's structured events, not its
		// tool calls; the timeline keeps the latest taskMaxEvents of them.
		if it.EventCount <= 2*it.ToolCount || len(it.Timeline) != 4 {
			t.Fatalf("event_count %d, timeline %d events, want > %d and 4: %s", it.EventCount, len(it.Timeline), 2*it.ToolCount, out)
		}
	})

	t.Run("taskMaxConcurrency", func(t *testing.T) {
		e.model.Script("slow", scriptedmodel.Step{DelayMS: 1500, ToolCalls: finalizeStep("slow done").ToolCalls})
		e.model.Script("quick", finalizeStep("quick done"))
		req := fmt.Sprintf(`{"tasks":[{"name":"slow","prompt":"[[script:slow]] a","profile":"scout","cwd":%q},
			{"name":"quick","prompt":"[[script:quick]] b","profile":"scout","cwd":%q}], "tool": "task"}`, e.workDir, e.workDir)
		started, out := c.json(0, req, "start", "--input", "-")
		if env, out := c.json(0, "", "wait", "--timeout", "60s", started.DelegationID); env.BatchStatus != "completed" {
			t.Fatalf("wait: %s", out)
		}
		slow, quick := e.model.RequestsFor("slow"), e.model.RequestsFor("quick")
		if len(slow) == 0 || len(quick) == 0 {
			t.Fatalf("requests: slow %d, quick %d (%s)", len(slow), len(quick), out)
		}
		// One at a time: the second task's child asks only after the first
		// one's answer, which the model held back for 1.5 s.
		if gap := quick[0].Time.Sub(slow[0].Time); gap < 1500e6 {
			t.Fatalf("the second task started %s after the first: the batch ran them together", gap)
		}
	})

	t.Run("disabled", func(t *testing.T) {
		env, out := c.json(1, "", "run", "--agent", "oracle", "Think hard.")
		if it := env.Items[0]; it.Error == nil || it.Error.Code != "SUBAGENT_DISABLED" || !strings.Contains(it.Error.Message, "subagents.oracle.disabled") {
			t.Fatalf("a disabled agent: %s", out)
		}
		e.writeSettings(false, `{"subagents": {"disabled": true}}`)
		env, out = c.json(1, "", "run", "--agent", "scout", "Look.")
		if it := env.Items[0]; it.Error == nil || it.Error.Code != "SUBAGENTS_DISABLED" || it.Error.Category != "permission" {
			t.Fatalf("disabled delegation: %s", out)
		}
	})
}

// TestParentWithSubagentsDisabled: a pi started with SUBAGENTS_DISABLED=1
// gets the contract's code from every delegation tool, and nothing is started.
func TestParentWithSubagentsDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.parentEnvExtra = []string{"SUBAGENTS_DISABLED=1"}
	e.model.Script("parent", call("subagent", map[string]any{"agent": "scout", "task": "Look around."}), scriptedmodel.Step{Text: "Done."})
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent]] Delegate.")
	p.wait(t)
	got := toolResultText(t, e.model.RequestsFor("parent"), 1)
	if !strings.Contains(got, "SUBAGENTS_DISABLED") || !strings.Contains(got, "disabled by configuration") {
		t.Fatalf("the parent's model got:\n%s", got)
	}
}
