package e2e

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// finalizeErrorStep is a child's answer that finalizes with status ERROR,
// its error and (when set) the partial result the sessions contract allows.
func finalizeErrorStep(errText, partial string) scriptedmodel.Step {
	args := map[string]string{"status": "ERROR", "error": errText}
	if partial != "" {
		args["result"] = partial
	}
	b, _ := json.Marshal(args)
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "subagent_finalize", Arguments: string(b)}}}
}

// detailErr is a tool result's details.error as {code, unified_code}.
func detailErr(t *testing.T, d map[string]any) (code, unified string) {
	t.Helper()
	e, ok := d["error"].(map[string]any)
	if !ok {
		t.Fatalf("details without error: %v", d)
	}
	code, _ = e["code"].(string)
	unified, _ = e["unified_code"].(string)
	return code, unified
}

// firstResult is details.results[0] of a subagent tool result (nil when results is empty).
func firstResult(t *testing.T, d map[string]any) map[string]any {
	t.Helper()
	rs, ok := d["results"].([]any)
	if !ok {
		t.Fatalf("details without results: %v", d)
	}
	if len(rs) == 0 {
		return nil
	}
	return rs[0].(map[string]any)
}

// runIDForm is the SingleResult contract's runId: 8 hex digits.
var runIDForm = regexp.MustCompile(`^[0-9a-f]{8}$`)
