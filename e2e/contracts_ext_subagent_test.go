package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContractsExtSubagentDetails: what the subagent tool returns through a
// real parent pi, against the SingleResult and sessions contracts (issue #31,
// items 1, 3, 4 and 7). Before: every run of the same minute had the same
// runId (the UUIDv7's time bits); details.error.code held our own codes
// (FINALIZE_MISSING, PERMISSION_DENIED); results[0].output was cut like the
// text, and the text ended mid-word without a marker; an ERROR finalize's
// metadata lacked its error; a refused task reported exitCode 1 as if a
// child had run.
func TestContractsExtSubagentDetails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	// A small cap, so that a short answer is cut (the cap's default is 8000).
	e.outputMaxChars = 80
	e.startWorker(shared.client)
	var lines []string
	for i := 1; i <= 12; i++ {
		lines = append(lines, fmt.Sprintf("line %02d: the loader reads the settings file and checks every key", i))
	}
	long := strings.Join(lines, "\n")
	e.model.Script("c-long", finalizeStep(long))
	e.model.Script("c-err", finalizeErrorStep("no access to the settings", "partial: the loader is in config"))
	e.model.Script("c-nofin", scriptedmodel.Step{Text: "I looked around and stopped.", Repeat: true})
	e.model.Script("parent-sub",
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-long]] Describe the loader."}),
		// The delegate contract gives the model the whole output.
		call("get_subagent_output", map[string]string{"sessionId": "{{match:Session ID:.. .([0-9a-f-]+)}}"}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-err]] Read the settings."}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-nofin]] Look around."}),
		// A writing agent: refused before any child runs (the SingleResult contract's read-only default).
		call("subagent", map[string]string{"agent": "implementer", "task": "Fix it."}),
		scriptedmodel.Step{Text: "Done."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-sub]] Use the subagent tool.")
	p.wait(t)
	ends := toolEnds(p, "subagent")
	if len(ends) != 4 {
		t.Fatalf("%d subagent results, want 4", len(ends))
	}
	cut, failedFinalize, noFinalize, refused := ends[0], ends[1], ends[2], ends[3]
	if out := toolEnds(p, "get_subagent_output"); len(out) != 1 || out[0].Text != long {
		t.Errorf("get_subagent_output of a cut answer = %+v, want the whole output (%d characters)", out, len(long))
	}

	// Item 4: the whole output in details, the text cut where a line ends, with the marker.
	if out := firstResult(t, cut.Details)["output"]; out != long {
		t.Errorf("results[0].output = %q, want the whole output (%d characters)", out, len(long))
	}
	marker := regexp.MustCompile(`\n\[TRUNCATED: showing first (\d+) of 12 lines, [0-9.]+K?B of [0-9.]+K?B\]$`)
	if m := marker.FindStringSubmatchIndex(cut.Text); m == nil {
		t.Errorf("the cut text does not end with the truncation marker:\n%s", cut.Text)
	} else if shown := cut.Text[strings.Index(cut.Text, "---\n\n")+5 : m[0]]; !strings.HasPrefix(long, shown) || len(shown) > 80 || len(shown) == 0 || !strings.ContainsAny(long[len(shown):len(shown)+1], " \n") {
		t.Errorf("the text shows %q: not the output's start cut where a word ends, within the cap of 80", shown)
	}
	if code, _ := detailErr(t, cut.Details); code != "SUBAGENT_OUTPUT_TRUNCATED" || cut.IsError {
		t.Errorf("a cut answer: details.error.code %q, isError %v; want SUBAGENT_OUTPUT_TRUNCATED, no error", code, cut.IsError)
	}

	// Item 7: an ERROR finalize's metadata keeps its error (and its partial result).
	f, _ := failedFinalize.Details["finalized"].(map[string]any)
	if f["status"] != "ERROR" || f["error"] != "no access to the settings" || f["result"] != "partial: the loader is in config" {
		t.Errorf("finalized of an ERROR finalize = %v", f)
	}
	if code, unified := detailErr(t, failedFinalize.Details); code != "SUBAGENT_FAILED" || unified != "SUBAGENT_FAILED" {
		t.Errorf("ERROR finalize: code %q, unified_code %q", code, unified)
	}

	// Item 3: the contract's code, ours beside it.
	if code, unified := detailErr(t, noFinalize.Details); code != "SUBAGENT_FAILED" || unified != "FINALIZE_MISSING" {
		t.Errorf("no finalize: details.error.code %q, unified_code %q; want SUBAGENT_FAILED, FINALIZE_MISSING", code, unified)
	}
	if code, unified := detailErr(t, refused.Details); code != "SUBAGENT_DISABLED" || unified != "PERMISSION_DENIED" {
		t.Errorf("refused agent: details.error.code %q, unified_code %q; want SUBAGENT_DISABLED, PERMISSION_DENIED", code, unified)
	}
	// Item 7: no child ran, so there is no execution: no SingleResult (no exitCode), no runId.
	if r := firstResult(t, refused.Details); r != nil {
		t.Errorf("a refused task has a SingleResult: %v", r)
	}
	if id, ok := refused.Details["runId"]; ok {
		t.Errorf("a refused task has runId %v", id)
	}
	if !refused.IsError || !strings.Contains(refused.Text, "PERMISSION_DENIED") {
		t.Errorf("the refusal: isError %v, text:\n%s", refused.IsError, refused.Text)
	}

	// Item 1: three runs of the same minute, three run IDs.
	seen := map[string]bool{}
	for i, end := range ends[:3] {
		id, _ := end.Details["runId"].(string)
		if !runIDForm.MatchString(id) || seen[id] {
			t.Errorf("run %d: runId %q (seen before: %v), want 8 hex digits of its own", i+1, id, seen[id])
		}
		seen[id] = true
		if r := firstResult(t, end.Details); r == nil || r["exitCode"] == nil {
			t.Errorf("run %d ran a child but has no SingleResult: %v", i+1, end.Details["results"])
		}
	}
}
