package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
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
	t.Parallel()
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
	// The list with the columns docs/monitoring.md sets up: Temporal's
	// status beside ours.
	if _, err := chromedp.Run(browserCtx, chromedp.Evaluate[any](fmt.Sprintf(`localStorage.setItem("namespace-workflow-table-columns", %q)`, operatorColumns))); err != nil {
		t.Fatal(err)
	}
	ui := fmt.Sprintf("http://127.0.0.1:%d/namespaces/default/workflows", uiPort)
	page := pageText(t, browserCtx, ui, "FAILED", "CANCELED", "COMPLETED", "SubagentStatus")
	if strings.Contains(page, "RUNNING") {
		t.Fatalf("the UI's list shows a running workflow:\n%.3000s", page)
	}
	screenshot(t, browserCtx, "ui-operator-truth.png")
	// The UI's status filters, as an operator clicks them.
	failures := pageText(t, browserCtx, ui+"?query="+url.QueryEscape(`ExecutionStatus="Failed"`), failed)
	if strings.Contains(failures, done) || strings.Contains(failures, cancelled) {
		t.Fatalf("the Failed filter shows other workflows:\n%.3000s", failures)
	}
	pageText(t, browserCtx, ui+"?query="+url.QueryEscape(`ExecutionStatus="Canceled"`), cancelled)

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

// TestUpgradeKeepsAnIdleSessionOfThePreviousModel (issue [operator truth],
// item 5): a session the previous release started (workflow code version
// 4: its run stays open after its turn, waiting for a send) and idle when
// its worker is replaced by this release's takes a `send` from this
// release's client: the new worker replays its history and runs the next
// turn in the same run, with its context. A session of this release's
// model beside it closes after its turn and a send reopens it; both
// histories are recorded for the replay tests (SUBAGENTS_RECORD_HISTORIES).
func TestUpgradeKeepsAnIdleSessionOfThePreviousModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("up-1", finalizeStep("noted the colour teal"))
	e.model.Script("up-2", finalizeStep("the colour was teal"))
	e.model.Script("new-1", finalizeStep("noted the shape hexagon"))
	e.model.Script("new-2", finalizeStep("the shape was hexagon"))
	stopOld := e.startWorker(shared.client)
	lib := func(version int) *client.Client {
		return &client.Client{Temporal: shared.client, TaskQueue: e.taskQueue, Address: shared.server.FrontendAddress(), WorkflowVersion: version}
	}
	task := func(prompt string) client.StartRequest {
		return client.StartRequest{Tasks: []api.TaskSpec{{Name: "memory", Prompt: prompt, Profile: "scout", Cwd: e.workDir, Model: scriptedmodel.ModelRef}}}
	}
	started, err := lib(4).Start(e.ctx(), task("[[script:up-1]] Note the colour teal."))
	if err != nil {
		t.Fatal(err)
	}
	id := started.Items[0].TaskID
	if env, err := lib(4).Wait(e.ctx(), id, time.Minute); err != nil || env.Items[0].Status != "completed" {
		t.Fatalf("the previous model's first turn: %+v %v", env, err)
	}
	before, err := shared.client.DescribeWorkflowExecution(e.ctx(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := before.GetWorkflowExecutionInfo().GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the previous model's idle session is %v, want running (waiting for a send)", s)
	}

	// The upgrade: the old worker goes, this release's starts with an
	// empty cache and replays the idle session when the send comes.
	stopOld()
	e.startWorker(shared.client)
	now := lib(0)
	sent, err := now.Send(e.ctx(), client.SendRequest{TaskID: id, Prompt: "[[script:up-2]] Which colour was it?"})
	if err != nil {
		t.Fatal(err)
	}
	done, err := now.Wait(e.ctx(), sent.DelegationID, time.Minute)
	if err != nil || len(done.Items) != 1 || done.Items[0].Output != "the colour was teal" || done.Items[0].Turn != 2 {
		t.Fatalf("the send after the upgrade: %+v %v", done, err)
	}
	if txt := userText(e.model.RequestsFor("up-2")[0]); !strings.Contains(txt, "Note the colour teal") {
		t.Fatalf("the next turn did not see the first: %.400s", txt)
	}
	after, err := shared.client.DescribeWorkflowExecution(e.ctx(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	if after.GetWorkflowExecutionInfo().GetExecution().GetRunId() != before.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
		t.Fatal("the previous model's session took the send in a new run: its open run should have")
	}

	// This release's model beside it: closed after its turn, reopened by
	// the send as the next run of its ID.
	fresh, err := now.Start(e.ctx(), task("[[script:new-1]] Note the shape hexagon."))
	if err != nil {
		t.Fatal(err)
	}
	nid := fresh.Items[0].TaskID
	if env, err := now.Wait(e.ctx(), nid, time.Minute); err != nil || env.Items[0].Status != "completed" {
		t.Fatalf("first turn: %+v %v", env, err)
	}
	if err := shared.client.GetWorkflow(e.ctx(), nid, "").Get(e.ctx(), nil); err != nil {
		t.Fatalf("the session's run did not complete with its turn: %v", err)
	}
	sent, err = now.Send(e.ctx(), client.SendRequest{TaskID: nid, Prompt: "[[script:new-2]] Which shape was it?"})
	if err != nil {
		t.Fatal(err)
	}
	done, err = now.Wait(e.ctx(), sent.DelegationID, time.Minute)
	if err != nil || len(done.Items) != 1 || done.Items[0].Output != "the shape was hexagon" || done.Items[0].Turn != 2 {
		t.Fatalf("the send that reopens: %+v %v", done, err)
	}
	if txt := userText(e.model.RequestsFor("new-2")[0]); !strings.Contains(txt, "Note the shape hexagon") {
		t.Fatalf("the reopened turn did not see the first: %.400s", txt)
	}
	// Two sends that race to the finished session: both are its turns,
	// one after the other, in one new run at most each time it closed.
	e.model.Script("race-a", finalizeStep("a done"))
	e.model.Script("race-b", finalizeStep("b done"))
	var wg sync.WaitGroup
	turns, errs := make([]int, 2), make([]error, 2)
	for i, script := range []string{"race-a", "race-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env, err := now.Send(e.ctx(), client.SendRequest{TaskID: nid, Prompt: "[[script:" + script + "]] Go on."})
			switch {
			case err != nil:
			case env.AcceptedTurn > 0:
				// It found the other's turn running: queued behind it.
				turns[i] = env.AcceptedTurn
				_, err = now.Wait(e.ctx(), nid, time.Minute)
			default:
				env, err = now.Wait(e.ctx(), env.DelegationID, time.Minute)
				if err == nil {
					turns[i] = env.Items[0].Turn
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	slices.Sort(turns)
	if errs[0] != nil || errs[1] != nil || !slices.Equal(turns, []int{3, 4}) {
		t.Fatalf("two racing sends: turns %v, errors %v", turns, errs)
	}
	var last api.SessionResult
	if err := shared.client.GetWorkflow(e.ctx(), nid, "").Get(e.ctx(), &last); err != nil || last.Turns != 4 {
		t.Fatalf("after the racing sends: %+v %v", last, err)
	}
	recordHistory(t, shared.client, id, "session-v4-send-after-upgrade")
	recordHistory(t, shared.client, nid, "session-v5-reopened")
	recordHistory(t, shared.client, sent.DelegationID, "delegation-v5-send-reopens")
}
