package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// uiExecution is what the Temporal UI's API says of one workflow run, as
// its list and its workflow page read it.
type uiExecution struct {
	Execution struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
	} `json:"execution"`
	Type struct {
		Name string `json:"name"`
	} `json:"type"`
	Status string `json:"status"`
}

// uiList is the UI's list of the workflows that query finds (its API, as
// its workflow list page calls it).
func (e *env) uiList(uiPort int, query string) []uiExecution {
	e.t.Helper()
	body := e.uiGet(uiPort, "/api/v1/namespaces/default/workflows?query="+url.QueryEscape(query))
	var page struct {
		Executions []uiExecution `json:"executions"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		e.t.Fatalf("the UI's list of %s: %v\n%.2000s", query, err, body)
	}
	return page.Executions
}

// uiListSettles polls the UI's list of query until ok accepts it (the
// visibility store follows the histories by a moment), and returns it.
func (e *env) uiListSettles(uiPort int, query string, ok func([]uiExecution) bool) []uiExecution {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := e.uiList(uiPort, query)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the UI's list of %s: %+v", query, got)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestOperatorTruthInTheUI (issue [operator truth]): after a completed
// task, a failed one (FINALIZE_MISSING), a cancelled one, a plan whose
// second step continues its first, and with an idle sticky session (the
// completed task, which still takes a send), Temporal's own status read
// through the UI's API tells what happened: no Running workflow while
// nothing works, the failed task Failed with its code as the failure's
// type, the cancelled one Canceled. Then a send to the finished session
// runs its next turn with its context, as the next run of the same
// workflow ID. The list is photographed in a real browser for
// docs/operators.md.
func TestOperatorTruthInTheUI(t *testing.T) {
	e := newEnv(t)
	e.model.Script("ot-done", finalizeStep("the answer is 42"))
	e.model.Script("ot-fail",
		scriptedmodel.Step{Text: "I think it is 41."},
		scriptedmodel.Step{Text: "Still 41."},
		scriptedmodel.Step{Text: "41, final."})
	e.model.Script("ot-cancel", scriptedmodel.Step{Hang: true})
	e.model.Script("ot-first", finalizeStep("noted the number 5"))
	e.model.Script("ot-again", finalizeStep("the number was 5"))
	e.model.Script("ot-next", finalizeStep("you asked for the answer: 42"))
	plan := filepath.Join(e.workDir, "..", "truth-plan.yaml")
	if err := os.WriteFile(plan, []byte(`description: a step and the step that continues it
steps:
  - key: first
    agent: scout
    task: "[[script:ot-first]] Note the number 5."
  - key: again
    continue: first
    task: "[[script:ot-again]] Which number did you note?"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	uiPort := freePort()
	_, c, port := e.devCLI("--ui-port", strconv.Itoa(uiPort))
	start := func(prompt string) string {
		t.Helper()
		env, _ := c.json(0, "", "start", "--cwd", e.workDir, prompt)
		return env.Items[0].TaskID
	}
	done := start("[[script:ot-done]] What is the answer?")
	failed := start("[[script:ot-fail]] What is the answer?")
	cancelled := start("[[script:ot-cancel]] Think hard.")
	if _, err := e.model.WaitForRequests(e.ctx(), 1, func(r scriptedmodel.Request) bool { return r.Script == "ot-cancel" }); err != nil {
		t.Fatal(err)
	}
	c.json(0, "", "cancel", cancelled)
	c.json(0, "", "wait", "--timeout", "60s", done)
	c.json(1, "", "wait", "--timeout", "60s", failed)
	c.json(1, "", "wait", "--timeout", "60s", cancelled)
	if env, out := c.json(0, "", "run", "--plan", plan); env.Status != "completed" {
		t.Fatalf("the plan: %s", out)
	}
	if txt := userText(e.model.RequestsFor("ot-again")[0]); !strings.Contains(txt, "Note the number 5") {
		t.Fatalf("the continuing step did not reach its session's context: %.400s", txt)
	}

	// Nothing works now: Temporal says so.
	e.uiListSettles(uiPort, `ExecutionStatus="Running"`, func(l []uiExecution) bool { return len(l) == 0 })
	status := func(id string) string {
		l := e.uiListSettles(uiPort, fmt.Sprintf(`WorkflowId=%q`, id), func(l []uiExecution) bool { return len(l) > 0 })
		return l[0].Status
	}
	for id, want := range map[string]string{
		done: "WORKFLOW_EXECUTION_STATUS_COMPLETED", failed: "WORKFLOW_EXECUTION_STATUS_FAILED", cancelled: "WORKFLOW_EXECUTION_STATUS_CANCELED",
	} {
		if got := status(id); got != want {
			t.Errorf("%s is %s in the UI, want %s", id, got, want)
		}
	}
	// The UI's Failures filter finds the failed task, and its page the
	// failure's type: the task's error code.
	if l := e.uiList(uiPort, `ExecutionStatus="Failed"`); len(l) != 1 || l[0].Execution.WorkflowID != failed {
		t.Fatalf("ExecutionStatus=\"Failed\" lists %+v, want only %s", l, failed)
	}
	hist := e.uiGet(uiPort, fmt.Sprintf("/api/v1/namespaces/default/workflows/%s/history?historyEventFilterType=HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT", failed))
	// The UI's API indents its JSON: read it, not its spacing.
	var closed struct {
		History struct {
			Events []struct {
				Failed struct {
					Failure struct {
						Message                string
						ApplicationFailureInfo struct{ Type string }
					}
				} `json:"workflowExecutionFailedEventAttributes"`
			}
		}
	}
	if err := json.Unmarshal([]byte(hist), &closed); err != nil || len(closed.History.Events) != 1 ||
		closed.History.Events[0].Failed.Failure.ApplicationFailureInfo.Type != "FINALIZE_MISSING" ||
		!strings.Contains(closed.History.Events[0].Failed.Failure.Message, "without a valid subagent_finalize") {
		t.Fatalf("the failed task's close event (%v): %.2000s", err, hist)
	}
	// The plan's steps closed with their turns; the plan completed.
	if l := e.uiList(uiPort, `WorkflowType="Session" AND ExecutionStatus="Completed"`); len(l) < 3 {
		t.Fatalf("completed sessions: %+v", l)
	}
	// `list --open` still finds the finished sticky sessions: they take a
	// send for their idle hour.
	open, out := c.json(0, "", "list", "--kind", "session", "--open")
	found := false
	for _, r := range open.Runs {
		found = found || r.ID == done && r.Open && r.Status == "completed"
	}
	if !found {
		t.Fatalf("list --open does not show the finished session %s: %s", done, out)
	}

	browserCtx := browser(t)
	code, login, _ := runSubagents(t, e.cliEnv(), "ui", "--address", fmt.Sprintf("127.0.0.1:%d", port), "--ui-url", fmt.Sprintf("http://127.0.0.1:%d", uiPort))
	if code != 0 {
		t.Fatalf("subagents ui: exit %d", code)
	}
	pageText(t, browserCtx, strings.TrimSpace(login), done, failed, cancelled)
	// UI 2.55 writes a row's status, and the counts above the rows, in
	// capitals ("1 FAILED"); "Running" is also the name of one of its
	// views, whatever the rows are.
	page := pageText(t, browserCtx, fmt.Sprintf("http://127.0.0.1:%d/namespaces/default/workflows", uiPort), "FAILED", "CANCELED", "COMPLETED")
	if strings.Contains(page, "RUNNING") {
		t.Fatalf("the UI's list shows running workflows:\n%.3000s", page)
	}
	screenshot(t, browserCtx, "ui-operator-truth.png")

	// A send to the finished session: its next turn, with its context, in
	// the next run of its workflow ID.
	sent, out := c.json(0, "", "send", "--wait", done, "[[script:ot-next]] Which answer did you give?")
	if len(sent.Items) != 1 || sent.Items[0].Output != "you asked for the answer: 42" || sent.Items[0].Turn != 2 {
		t.Fatalf("send: %s", out)
	}
	if txt := userText(e.model.RequestsFor("ot-next")[0]); !strings.Contains(txt, "What is the answer?") {
		t.Fatalf("the next turn did not see the first: %.400s", txt)
	}
	runs := e.uiListSettles(uiPort, fmt.Sprintf(`WorkflowId=%q`, done), func(l []uiExecution) bool {
		return len(l) == 2 && l[0].Status == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
	})
	if runs[0].Execution.RunID == runs[1].Execution.RunID {
		t.Fatalf("runs %+v", runs)
	}
	e.uiListSettles(uiPort, `ExecutionStatus="Running"`, func(l []uiExecution) bool { return len(l) == 0 })
}
