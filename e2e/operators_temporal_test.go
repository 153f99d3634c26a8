package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// opsTurnDelayMS is how late the model answers the first and the last turn
// of the session the page steers: the page's update and signal reach a
// session only while a turn runs (its run is open), and the test sends them
// in the first turn's time, and the last `wait` in the last turn's.
const opsTurnDelayMS = 4000

// TestOperatorsRecipes runs docs/operators.md against a real `subagents
// dev`: it connects with the page's settings (its API key, TLS off), makes
// sessions that completed, failed (an unknown profile, "scoot"), timed out,
// run, and then runs every `temporal` line of the page, with its query
// strings and JSON payloads as written, through Temporal's Go SDK, and its
// `bin/subagents` line with the command: Temporal's own status says what
// happened (Running while a child works, Failed with the error code as the
// failure's type, Canceled after a cancel, Completed), the lists find what
// the page says they find, the status query, the send, wait and cancel
// updates and signals answer in the shapes the page shows while a turn
// runs, `subagents send` reopens a finished session as the next run of its
// ID, each status's filter in the page's table is the one `subagents list
// --status` uses, and the SDK's workflow-failed and -canceled series
// (docs/monitoring.md) count the failed and cancelled tasks.
func TestOperatorsRecipes(t *testing.T) {
	t.Parallel()
	doc := readOpsDoc(t)
	e := newEnv(t)
	// One script per session; a follow-up without a marker takes the
	// script's next step (scriptedmodel: steps by the answers after it).
	e.model.Script("ops-done", finalizeStep("main.go:7 starts the server"), finalizeStep("the notes say ship it"))
	first, last := finalizeStep("main.go:7 starts the server"), finalizeStep("ship it, summed up")
	first.DelayMS, last.DelayMS = opsTurnDelayMS, opsTurnDelayMS
	e.model.Script("ops-steer", first, finalizeStep("the notes say ship it"), last)
	e.model.Script("ops-slow", scriptedmodel.Step{Hang: true})
	if err := os.WriteFile(filepath.Join(e.workDir, "notes.txt"), []byte("ship it\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsPort := freePort()
	_, c, port := e.devCLI("--headless", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", metricsPort))
	// The page reads the key from ~/.pi/subagents: this test's data dir
	// stands there.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".pi"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.dataDir, filepath.Join(home, ".pi", "subagents")); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"HOME": home, "PWD": e.workDir, "PI_SESSION": "pi-session-ops-1"}
	tc := doc.dialAsThePageSays(t, vars, "127.0.0.1:"+strconv.Itoa(port))
	withID := func(id string) map[string]string {
		v := maps.Clone(vars)
		v["ID"] = id
		return v
	}

	start := func(args ...string) string {
		t.Helper()
		env, _ := c.json(0, "", "start", args...)
		return env.Items[0].TaskID
	}
	done := start("--agent", "scout", "--model", scriptedmodel.ModelRef, "--parent-session", vars["PI_SESSION"], "[[script:ops-done]] Where does the server start?")
	failed := start("--agent", "scoot", "[[script:ops-done]] Anything.")
	timedOut := start("--timeout", "1", "--model", scriptedmodel.ModelRef, "[[script:ops-slow]] Take your time.")
	running := start("--model", scriptedmodel.ModelRef, "[[script:ops-slow]] Take your time.")
	signalled := start("--model", scriptedmodel.ModelRef, "[[script:ops-slow]] Take your time.")
	cancelled := start("--model", scriptedmodel.ModelRef, "[[script:ops-slow]] Take your time.")
	terminated := start("--model", scriptedmodel.ModelRef, "[[script:ops-slow]] Take your time.")
	c.json(0, "", "wait", "--timeout", "60s", done)
	c.json(1, "", "wait", "--timeout", "60s", failed)
	c.json(1, "", "wait", "--timeout", "60s", timedOut)

	status := doc.command(t, "query", "--name status")
	query := func(id string) map[string]any {
		t.Helper()
		var st map[string]any
		if err := json.Unmarshal(doc.run(t, tc, status, withID(id)).answer, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	// A hanging session's child runs once the status says its first child
	// run began: only then has a cancel a turn to stop.
	for _, id := range []string{running, signalled, cancelled, terminated} {
		deadline := time.Now().Add(testTimeout)
		for st := query(id); st["state"] != "running" || st["attempt"] == nil || st["attempt"].(float64) < 1; st = query(id) {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not run: %v", id, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Reading one: the completed session, and the refused one, whose runs
	// have closed: the status query still answers.
	st := query(done)
	if st["state"] != "completed" || st["agent"] != "scout" || st["turn"] != 1.0 {
		t.Fatalf("status of the completed session: %v", st)
	}
	if st := query(failed); st["state"] != "failed" || st["error"] == nil || st["error"].(map[string]any)["code"] != "UNKNOWN_AGENT" {
		t.Fatalf("status of the refused session: %v", st)
	}
	opsCheckFields(t, "the page's status answer", doc.answers["SessionStatus"], reflect.TypeFor[api.SessionStatus]())
	describe := doc.command(t, "describe")
	d := doc.run(t, tc, describe, withID(done)).describe
	if opsSearchAttr(d, "SubagentAgent") != "scout" || opsSearchAttr(d, "SubagentCwd") != e.workDir || d.GetWorkflowExecutionInfo().GetType().GetName() != api.SessionWorkflowName ||
		d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("describe: %v", d.GetWorkflowExecutionInfo())
	}
	// A failed task's run: Failed, its error code the failure's type.
	r := doc.run(t, tc, describe, withID(failed))
	if r.describe.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED ||
		r.failure.GetApplicationFailureInfo().GetType() != "UNKNOWN_AGENT" || !strings.Contains(r.failure.GetMessage(), "scoot") {
		t.Fatalf("describe of the refused task: %v, failure %v", r.describe.GetWorkflowExecutionInfo().GetStatus(), r.failure)
	}
	for _, line := range doc.commands {
		if strings.Contains(line, "workflow show") {
			events := doc.run(t, tc, line, withID(done)).events
			if !slices.Contains(events, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) {
				t.Fatalf("%s: no child run in %v", line, events)
			}
			if f := doc.run(t, tc, line, withID(timedOut)).failure; f.GetApplicationFailureInfo().GetType() != "SUBAGENT_TIMEOUT" {
				t.Fatalf("%s of the timed out task: failure %v", line, f)
			}
		}
	}

	// Finding them, while four turns run: Temporal's status says which.
	all := []string{done, failed, timedOut, running, signalled, cancelled, terminated}
	hanging := []string{running, signalled, cancelled, terminated}
	working := doc.command(t, `--query 'ExecutionStatus = "Running"'`)
	doc.listUntil(t, tc, working, vars, hanging, []string{done, failed, timedOut})
	doc.listUntil(t, tc, doc.command(t, `ExecutionStatus = "Failed"`), vars, []string{failed, timedOut}, []string{done, running})
	doc.listUntil(t, tc, doc.command(t, `ExecutionStatus = "Completed"`), vars, []string{done}, []string{failed, timedOut, running})
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "running" AND`), vars, hanging, []string{done, failed, timedOut})
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "failed"`), vars, []string{failed}, []string{done, running, timedOut})
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "completed"`), vars, []string{done}, []string{failed, running})
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "timed_out"`), vars, []string{timedOut}, []string{done, running})
	doc.listUntil(t, tc, doc.command(t, "SubagentAgent"), vars, []string{done}, []string{failed, running})
	doc.listUntil(t, tc, doc.command(t, "SubagentCwd"), vars, all, nil)
	doc.listUntil(t, tc, doc.command(t, "SubagentParentSession"), vars, []string{done}, []string{failed, running})

	// Steering one: a session whose turn runs takes a send as an update,
	// then as a signal, each its next turn in the same run; wait answers
	// each turn's end.
	steer := start("--model", scriptedmodel.ModelRef, "[[script:ops-steer]] Where does the server start?")
	if _, err := e.model.WaitForRequests(e.ctx(), 1, func(r scriptedmodel.Request) bool { return r.Script == "ops-steer" }); err != nil {
		t.Fatal(err)
	}
	sent := doc.command(t, "update execute", "--name send")
	opsCheckFields(t, "the page's send", opsInput(t, sent), reflect.TypeFor[api.SendRequest]())
	var acc map[string]any
	if err := json.Unmarshal(doc.run(t, tc, sent, withID(steer)).answer, &acc); err != nil || acc["turn"] != 2.0 {
		t.Fatalf("send update: %v %v", acc, err)
	}
	opsCheckFields(t, "the page's send answer", doc.answers["SendAccepted"], reflect.TypeFor[api.SendAccepted]())
	signal := doc.command(t, "signal", "--name send")
	opsCheckFields(t, "the page's send signal", opsInput(t, signal), reflect.TypeFor[api.SendRequest]())
	doc.run(t, tc, signal, withID(steer))
	deadline := time.Now().Add(testTimeout)
	for st := query(steer); st["accepted"] != 3.0; st = query(steer) {
		if time.Now().After(deadline) {
			t.Fatalf("the send signal was not taken: %v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitTurn := doc.command(t, "--name wait", `"turn"`)
	opsCheckFields(t, "the page's wait", opsInput(t, waitTurn), reflect.TypeFor[api.WaitRequest]())
	// Turn 3 begins as turn 2 ends, in the same workflow task: the answer
	// is the session's status then, turn 2 its last turn.
	var after map[string]any
	if err := json.Unmarshal(doc.run(t, tc, waitTurn, withID(steer)).answer, &after); err != nil || after["turn"] != 3.0 ||
		opsField(after, "lastTurn", "turn") != 2.0 || opsField(after, "lastTurn", "state") != "completed" ||
		!strings.Contains(opsJSON(after["lastTurn"]), "the notes say ship it") {
		t.Fatalf("wait for turn 2: %v %v", after, err)
	}
	if err := json.Unmarshal(doc.run(t, tc, doc.command(t, "--name wait", "'{}'"), withID(steer)).answer, &after); err != nil ||
		after["turn"] != 3.0 || after["state"] != "completed" || !strings.Contains(opsJSON(after["lastTurn"]), "ship it, summed up") {
		t.Fatalf("wait for the latest turn: %v %v", after, err)
	}
	// Its three turns were one run, which closed with the last.
	runsOf := doc.command(t, "WorkflowId = '$ID'")
	opsRunsUntil(t, doc, tc, runsOf, withID(steer), enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
	// Temporal's own update reaches no closed run.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := tc.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{WorkflowID: steer, UpdateName: api.SendUpdate,
		Args: []any{api.SendRequest{Prompt: "Anything else?"}}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted}); err == nil ||
		!strings.Contains(err.Error(), "already completed") {
		t.Fatalf("an update to a closed run: %v, want workflow execution already completed", err)
	}

	// `subagents send` reopens the finished session: its next turn, with
	// its context, in the next run of its ID.
	reopen := doc.command(t, opsSubagents+" send")
	if code, out := doc.runSubagents(t, c, reopen, withID(done)); code != 0 {
		t.Fatalf("%s: exit %d\n%s", reopen, code, out)
	}
	if st := query(done); st["turn"] != 2.0 || st["state"] != "completed" || !strings.Contains(opsJSON(st["lastTurn"]), "the notes say ship it") {
		t.Fatalf("the reopened session: %v", st)
	}
	if txt := userText(e.model.RequestsFor("ops-done")[len(e.model.RequestsFor("ops-done"))-1]); !strings.Contains(txt, "Where does the server start?") {
		t.Fatalf("the reopened session's turn did not see its first: %.400s", txt)
	}
	opsRunsUntil(t, doc, tc, runsOf, withID(done), enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)

	// Cancel: the running turn, by update and by signal (the run closes
	// Canceled, and the session still takes a send); the workflow, by
	// Temporal's cancel and terminate (it takes none).
	cancelUpdate := doc.command(t, "update execute", "--name cancel")
	opsCheckFields(t, "the page's cancel", opsInput(t, cancelUpdate), reflect.TypeFor[api.CancelRequest]())
	var res map[string]any
	if err := json.Unmarshal(doc.run(t, tc, cancelUpdate, withID(running)).answer, &res); err != nil ||
		res["cancel_applied"] != true || res["prior_status"] != "running" {
		t.Fatalf("cancel update: %v %v", res, err)
	}
	opsCheckFields(t, "the page's cancel answer", doc.answers["CancelResult"], reflect.TypeFor[api.CancelResult]())
	cancelSignal := doc.command(t, "signal", "--name cancel")
	opsCheckFields(t, "the page's cancel signal", opsInput(t, cancelSignal), reflect.TypeFor[api.CancelRequest]())
	doc.run(t, tc, cancelSignal, withID(signalled))
	doc.run(t, tc, doc.command(t, "workflow cancel"), withID(cancelled))
	doc.run(t, tc, doc.command(t, "workflow terminate"), withID(terminated))
	for _, id := range []string{running, signalled, cancelled} {
		deadline := time.Now().Add(testTimeout)
		for s := opsExecStatus(t, tc, id); s != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED; s = opsExecStatus(t, tc, id) {
			if time.Now().After(deadline) {
				t.Fatalf("%s after its cancel: %v, want Canceled", id, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if st := query(id); st["state"] != "cancelled" {
			t.Fatalf("%s after its cancel: %v", id, st)
		}
	}
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "cancelled"`), vars, []string{running, signalled, cancelled}, []string{done, terminated})
	doc.listUntil(t, tc, doc.command(t, `ExecutionStatus = "Canceled"`), vars, []string{running, signalled, cancelled}, []string{done, failed, terminated})
	doc.listUntil(t, tc, doc.command(t, `ExecutionStatus = "Terminated"`), vars, []string{terminated}, []string{done, cancelled})
	// The sessions that take a send: those whose turn ended (the timed out
	// one too) or was cancelled, not the refused task nor those an
	// operator ended through Temporal.
	doc.listUntil(t, tc, doc.command(t, "SubagentSendUntil >"), vars,
		[]string{done, steer, timedOut, running, signalled}, []string{failed, cancelled, terminated})
	// Nothing works now: nothing is Running.
	doc.listUntil(t, tc, working, vars, nil, append(all, steer))

	// The table: each status's filter is what `subagents list --status`
	// uses, and finds what it says.
	wantByStatus := map[api.State][]string{
		api.StateCompleted: {done, steer}, api.StateFailed: {failed}, api.StateTimedOut: {timedOut},
		api.StateCancelled: {running, signalled, cancelled}, api.StateTerminated: {terminated},
	}
	rows := 0
	for _, row := range doc.tables {
		if len(row) != 2 || !strings.HasPrefix(row[0], "`") {
			continue
		}
		st, err := api.ParseState(strings.Trim(row[0], "`"))
		if err != nil {
			continue
		}
		rows++
		filter := strings.Trim(row[1], "`")
		if filter != api.StateClause(st) {
			t.Errorf("the page's filter for %s is %q; subagents list uses %q", st, filter, api.StateClause(st))
		}
		var not []string
		for other, ids := range wantByStatus {
			if other != st {
				not = append(not, ids...)
			}
		}
		line := "temporal workflow list --query \"" + filter + "\""
		doc.commands = append(doc.commands, line)
		doc.listUntil(t, tc, line, vars, wantByStatus[st], not)
	}
	if rows != len(api.States) {
		t.Errorf("the page's table has %d statuses, the glossary %d", rows, len(api.States))
	}

	// docs/monitoring.md: the SDK's own workflow-failed series counts the
	// failed tasks (the refused one and the timed out one), its
	// workflow-canceled series the cancelled ones.
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	deadline = time.Now().Add(testTimeout)
	for {
		page := httpGet(t, url)
		failedRuns, _ := metricValue(page, "temporal_workflow_failed_total", `workflow_type="Session"`)
		canceledRuns, _ := metricValue(page, "temporal_workflow_canceled_total", `workflow_type="Session"`)
		if failedRuns == 2 && canceledRuns == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("temporal_workflow_failed_total %v (want 2), temporal_workflow_canceled_total %v (want 3) of sessions:\n%s",
				failedRuns, canceledRuns, grepLines(page, "temporal_workflow_"))
		}
		time.Sleep(200 * time.Millisecond)
	}

	if left := doc.notRun(); len(left) > 0 {
		t.Fatalf("lines of %s no step ran: %q", opsDocPath, left)
	}
}

// opsRunsUntil runs the page's list of a session's runs until it finds
// one run per status of want, newest first, each closed as want says.
func opsRunsUntil(t *testing.T, doc *opsDoc, c sdkclient.Client, line string, vars map[string]string, want ...enumspb.WorkflowExecutionStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs := doc.run(t, c, line, vars).runs
		got := make([]enumspb.WorkflowExecutionStatus, len(runs))
		for i, r := range runs {
			got[i] = r.GetStatus()
		}
		newestFirst := slices.IsSortedFunc(runs, func(a, b *workflowpb.WorkflowExecutionInfo) int {
			return b.GetStartTime().AsTime().Compare(a.GetStartTime().AsTime())
		})
		if slices.Equal(got, want) && newestFirst {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s with ID %s: runs %v, want %v newest first", line, vars["ID"], got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// opsField is the value at path in a JSON object, nil where there is none.
func opsField(v any, path ...string) any {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// opsJSON is v as JSON text, for a look at what an answer holds.
func opsJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
