package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestOperatorsRecipes runs docs/operators.md against a real `subagents
// dev`: it connects with the page's settings (its API key, TLS off), makes
// sessions that completed, failed (an unknown profile, "scoot"), timed out,
// run, and then runs every `temporal` line of the page, with its query
// strings and JSON payloads as written, through Temporal's Go SDK: the
// lists find what the page says they find (a refused task by
// SubagentStatus "failed", a terminated one by ExecutionStatus
// "Terminated"), the status query, the send, wait and cancel updates and
// signals answer in the shapes the page shows, and each status's filter in
// the page's table is the one `subagents list --status` uses.
func TestOperatorsRecipes(t *testing.T) {
	doc := readOpsDoc(t)
	e := newEnv(t)
	// One script per session; a follow-up without a marker takes the
	// script's next step (scriptedmodel: steps by the answers after it).
	e.model.Script("ops-done", finalizeStep("main.go:7 starts the server"), finalizeStep("the notes say ship it"), finalizeStep("ship it, summed up"))
	e.model.Script("ops-slow", scriptedmodel.Step{Hang: true})
	if err := os.WriteFile(filepath.Join(e.workDir, "notes.txt"), []byte("ship it\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, c, port := e.devCLI("--headless")
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
		if err := json.Unmarshal(doc.run(t, tc, status, map[string]string{"ID": id}).answer, &st); err != nil {
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

	// Reading one: the completed session, and the refused one.
	st := query(done)
	if st["state"] != "completed" || st["agent"] != "scout" || st["turn"] != 1.0 {
		t.Fatalf("status of the completed session: %v", st)
	}
	if st := query(failed); st["state"] != "failed" || st["error"] == nil || st["error"].(map[string]any)["code"] != "UNKNOWN_AGENT" {
		t.Fatalf("status of the refused session: %v", st)
	}
	opsCheckFields(t, "the page's status answer", doc.answers["SessionStatus"], reflect.TypeFor[api.SessionStatus]())
	d := doc.run(t, tc, doc.command(t, "describe"), map[string]string{"ID": done}).describe
	if opsSearchAttr(d, "SubagentAgent") != "scout" || opsSearchAttr(d, "SubagentCwd") != e.workDir || d.GetWorkflowExecutionInfo().GetType().GetName() != api.SessionWorkflowName {
		t.Fatalf("describe: %v", d.GetWorkflowExecutionInfo())
	}
	for _, line := range doc.commands {
		if strings.Contains(line, "workflow show") {
			events := doc.run(t, tc, line, map[string]string{"ID": done}).events
			if !slices.Contains(events, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) {
				t.Fatalf("%s: no child run in %v", line, events)
			}
		}
	}

	// Finding them, while one runs.
	all := []string{done, failed, timedOut, running, signalled, cancelled, terminated}
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "running" AND`), vars, []string{running, signalled, cancelled, terminated}, []string{done, failed, timedOut})
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "failed"`), vars, []string{failed}, []string{done, running})
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "completed"`), vars, []string{done}, []string{failed, running})
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "timed_out"`), vars, []string{timedOut}, []string{done, running})
	doc.listUntil(t, tc, doc.command(t, "SubagentAgent"), vars, []string{done}, []string{failed, running})
	doc.listUntil(t, tc, doc.command(t, "SubagentCwd"), vars, all, nil)
	doc.listUntil(t, tc, doc.command(t, "SubagentParentSession"), vars, []string{done}, []string{failed, running})

	// Steering one: the completed session takes a send as an update, then
	// as a signal; wait answers each turn's end.
	sent := doc.command(t, "update execute", "--name send")
	opsCheckFields(t, "the page's send", opsInput(t, sent), reflect.TypeFor[api.SendRequest]())
	var acc map[string]any
	if err := json.Unmarshal(doc.run(t, tc, sent, map[string]string{"ID": done}).answer, &acc); err != nil || acc["turn"] != 2.0 {
		t.Fatalf("send update: %v %v", acc, err)
	}
	opsCheckFields(t, "the page's send answer", doc.answers["SendAccepted"], reflect.TypeFor[api.SendAccepted]())
	waitTurn := doc.command(t, "--name wait", `"turn"`)
	opsCheckFields(t, "the page's wait", opsInput(t, waitTurn), reflect.TypeFor[api.WaitRequest]())
	var after map[string]any
	if err := json.Unmarshal(doc.run(t, tc, waitTurn, map[string]string{"ID": done}).answer, &after); err != nil ||
		after["turn"] != 2.0 || after["state"] != "completed" || !strings.Contains(opsJSON(after["lastTurn"]), "the notes say ship it") {
		t.Fatalf("wait for turn 2: %v %v", after, err)
	}
	signal := doc.command(t, "signal", "--name send")
	opsCheckFields(t, "the page's send signal", opsInput(t, signal), reflect.TypeFor[api.SendRequest]())
	doc.run(t, tc, signal, map[string]string{"ID": done})
	deadline := time.Now().Add(testTimeout)
	for st := query(done); st["accepted"] != 3.0; st = query(done) {
		if time.Now().After(deadline) {
			t.Fatalf("the send signal was not taken: %v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := json.Unmarshal(doc.run(t, tc, doc.command(t, "--name wait", "'{}'"), map[string]string{"ID": done}).answer, &after); err != nil ||
		after["turn"] != 3.0 || after["state"] != "completed" || !strings.Contains(opsJSON(after["lastTurn"]), "ship it, summed up") {
		t.Fatalf("wait for the latest turn: %v %v", after, err)
	}

	// Cancel: the running turn, by update and by signal (the session stays
	// open); the workflow, by Temporal's cancel and terminate.
	cancelUpdate := doc.command(t, "update execute", "--name cancel")
	opsCheckFields(t, "the page's cancel", opsInput(t, cancelUpdate), reflect.TypeFor[api.CancelRequest]())
	var res map[string]any
	if err := json.Unmarshal(doc.run(t, tc, cancelUpdate, map[string]string{"ID": running}).answer, &res); err != nil ||
		res["cancel_applied"] != true || res["prior_status"] != "running" {
		t.Fatalf("cancel update: %v %v", res, err)
	}
	opsCheckFields(t, "the page's cancel answer", doc.answers["CancelResult"], reflect.TypeFor[api.CancelResult]())
	cancelSignal := doc.command(t, "signal", "--name cancel")
	opsCheckFields(t, "the page's cancel signal", opsInput(t, cancelSignal), reflect.TypeFor[api.CancelRequest]())
	doc.run(t, tc, cancelSignal, map[string]string{"ID": signalled})
	doc.run(t, tc, doc.command(t, "workflow cancel"), map[string]string{"ID": cancelled})
	doc.run(t, tc, doc.command(t, "workflow terminate"), map[string]string{"ID": terminated})
	for _, id := range []string{running, signalled} {
		deadline := time.Now().Add(testTimeout)
		for st := query(id); st["state"] != "cancelled"; st = query(id) {
			if time.Now().After(deadline) {
				t.Fatalf("%s after its cancel: %v", id, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if opsExecStatus(t, tc, id) != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Fatalf("%s closed after a cancel of its turn: the session stays open for a send", id)
		}
	}
	doc.listUntil(t, tc, doc.command(t, `SubagentStatus = "cancelled"`), vars, []string{running, signalled, cancelled}, []string{done, terminated})
	doc.listUntil(t, tc, doc.command(t, `ExecutionStatus = "Terminated"`), vars, []string{terminated}, []string{done, cancelled})
	if s := opsExecStatus(t, tc, cancelled); s != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
		t.Fatalf("after temporal workflow cancel: %v", s)
	}
	doc.listUntil(t, tc, doc.command(t, `WorkflowType = "Session" AND ExecutionStatus = "Running"`), vars,
		[]string{done, running, signalled}, []string{cancelled, terminated})

	// The table: each status's filter is what `subagents list --status`
	// uses, and finds what it says.
	wantByStatus := map[api.State][]string{
		api.StateCompleted: {done}, api.StateFailed: {failed}, api.StateTimedOut: {timedOut},
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

	if left := doc.notRun(); len(left) > 0 {
		t.Fatalf("lines of %s no step ran: %q", opsDocPath, left)
	}
}

// opsJSON is v as JSON text, for a look at what an answer holds.
func opsJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
