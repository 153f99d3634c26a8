package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestExtFailuresAreErrors: every tool call whose task failed or was
// refused comes back to pi as an error (isError: true, drawn as a failure),
// in the event stream and in the session file; a call that succeeded does
// not. Before, the tools returned failures as plain results: an unknown
// profile drew a green success box.
func TestExtFailuresAreErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	e.model.Script("c-fail", scriptedmodel.Step{Status: 400, Body: `{"error":{"message":"model says no"}}`, Repeat: true})
	e.model.Script("c-ok", finalizeStep("found: config/load.go"))
	e.model.Script("parent-err",
		call("subagent", map[string]string{"agent": "scoot", "task": "Find the loader."}),
		call("task", map[string]string{"op": "start", "subagent_type": "scoot", "description": "probe", "prompt": "Probe."}),
		call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "ghost", "prompt": "Anything.", "profile": "scoot"}}}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-fail]] Find the loader."}),
		call("get_subagent_output", map[string]string{"sessionId": "no-such-session"}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-ok]] Find the loader."}),
		scriptedmodel.Step{Text: "Done."},
	)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", sessionFile, "[[script:parent-err]] Try the tools.")
	p.wait(t)

	ends := toolEnds(p, "")
	if len(ends) != 6 {
		t.Fatalf("%d tool calls ended, want 6", len(ends))
	}
	want := []struct {
		tool    string
		isError bool
		text    string
	}{
		{"subagent", true, "Unknown agent: scoot"},
		{"task", true, `Unknown profile: "scoot"`},
		{"delegate_to_subagents", true, `✗ ghost: error — Unknown profile: "scoot"`},
		{"subagent", true, "**Status:** ERROR"},
		{"get_subagent_output", true, `Session "no-such-session" not found`},
		{"subagent", false, "**Status:** SUCCESS"},
	}
	for i, w := range want {
		if ends[i].Tool != w.tool || ends[i].IsError != w.isError || !strings.Contains(ends[i].Text, w.text) {
			t.Errorf("call %d: %s isError=%v, want %s isError=%v with %q:\n%s", i+1, ends[i].Tool, ends[i].IsError, w.tool, w.isError, w.text, ends[i].Text)
		}
	}
	// The failures keep their contracts' details (pi drops them when a tool throws).
	if code := errorCode(ends[0].Details); code != "UNKNOWN_AGENT" {
		t.Errorf("subagent's details.error.code = %q, want UNKNOWN_AGENT", code)
	}
	if d := ends[1].Details; d["contract_version"] != "task.v1" || errorCode(d["items"].([]any)[0].(map[string]any)) != "UNKNOWN_AGENT" {
		t.Errorf("task's details: %v", d)
	}
	if ends[3].Details["status"] != "failed" {
		t.Errorf("the failed child's details.status = %v, want failed", ends[3].Details["status"])
	}

	// What pi wrote in the session: the same, for whoever reads it later.
	var written []string
	for _, entry := range sessionEntries(t, sessionFile) {
		if m, ok := entry["message"].(map[string]any); ok && m["role"] == "toolResult" {
			written = append(written, map[bool]string{true: "error", false: "ok"}[m["isError"] == true])
		}
	}
	if got := strings.Join(written, " "); got != "error error error error error ok" {
		t.Errorf("toolResult isError in the session file: %s, want error error error error error ok", got)
	}
}

func errorCode(details map[string]any) string {
	if e, ok := details["error"].(map[string]any); ok {
		if code, ok := e["unified_code"].(string); ok {
			return code
		}
		code, _ := e["code"].(string)
		return code
	}
	return ""
}
