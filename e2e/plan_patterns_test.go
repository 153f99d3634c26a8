package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestPlanSequence is pattern 1 (docs/plans/scout-implement-review.yaml):
// scout → implement (with the scout's result in its task) → review (with
// the implementer's), each a real pi child, each run once.
func TestPlanSequence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("seq-scout", finalizeStep("the greeting lives in greet.go:12"))
	e.model.Script("seq-implement", finalizeStep("changed greet.go to say hello"))
	e.model.Script("seq-review", finalizeStep("LGTM: no findings"))
	e.startWorker(shared.client)
	file := e.examplePlan("scout-implement-review", "seq", map[string]string{"change": "say hello, not hi"})

	env := e.runPlan(0, file)
	if env.Status != string(api.StateCompleted) || !env.Done || len(env.Items) != 3 {
		t.Fatalf("plan %s done %v items %d", env.Status, env.Done, len(env.Items))
	}
	for i, key := range []string{"scout", "implement", "review"} {
		it := env.Items[i]
		if it.Name != key || it.Status != string(api.StateCompleted) || !strings.HasPrefix(it.TaskID, env.DelegationID+"-"+key) {
			t.Fatalf("step %d: %+v", i, it)
		}
	}
	if out := planItem(t, env, "review").Output; out != "LGTM: no findings" {
		t.Fatalf("review output %q", out)
	}
	impl := e.model.RequestsFor("seq-implement")
	if len(impl) != 1 || !strings.Contains(userText(impl[0]), "the greeting lives in greet.go:12") {
		t.Fatalf("the implementer's task lacks the scout's result: %d requests", len(impl))
	}
	review := e.model.RequestsFor("seq-review")
	if len(review) != 1 || !strings.Contains(userText(review[0]), "changed greet.go to say hello") {
		t.Fatalf("the reviewer's task lacks the implementer's result")
	}
	// The scout's request came before the implementer's: a sequence.
	if s := e.model.RequestsFor("seq-scout"); len(s) != 1 || !s[0].Time.Before(impl[0].Time) {
		t.Fatalf("scout requests %d, or not before the implementer's", len(s))
	}
	// status of the plan says the same, and so does list.
	st, _ := e.cli().json(0, "", "status", env.DelegationID)
	if st.Status != "completed" || st.Plan == nil || len(st.Plan.Steps) != 3 || st.Plan.Steps[1].Runs != 1 {
		t.Fatalf("status %+v", st.Plan)
	}
}

// TestPlanParallelThenMerge is pattern 2 (docs/plans/parallel-review.yaml):
// three reviewers at once, then a merge that sees all three.
func TestPlanParallelThenMerge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	reviewers := []string{"par-correctness", "par-security", "par-tests"}
	for _, k := range []string{"correctness", "security", "tests"} {
		// No reviewer is answered before all three have asked: a plan
		// that ran them one after another would be held to the script's
		// timeout, and then fail the check of the times below. (A delay
		// only made the overlap likely: three cold pi starts on a loaded
		// machine can lie further apart than any delay.)
		e.model.Script("par-"+k, scriptedmodel.Step{Together: reviewers, ToolCalls: finalizeStep(k + " finding").ToolCalls})
	}
	e.model.Script("par-merge", finalizeStep("merged: 3 findings"))
	e.startWorker(shared.client)
	file := e.examplePlan("parallel-review", "par", nil)

	env := e.runPlan(0, file)
	if env.Status != "completed" || len(env.Items) != 4 {
		t.Fatalf("plan %s items %+v", env.Status, env.Items)
	}
	merge := e.model.RequestsFor("par-merge")
	if len(merge) != 1 {
		t.Fatalf("merge ran %d times", len(merge))
	}
	var last time.Time
	for _, k := range []string{"correctness", "security", "tests"} {
		if !strings.Contains(userText(merge[0]), k+" finding") {
			t.Fatalf("the merge's task lacks the %s review", k)
		}
		r := e.model.RequestsFor("par-" + k)
		if len(r) != 1 {
			t.Fatalf("%s ran %d times", k, len(r))
		}
		if r[0].Time.After(last) {
			last = r[0].Time
		}
	}
	// The last reviewer was asked before any reviewer's turn had ended
	// (the plan's first TaskDone): they ran side by side; and the merge
	// after all of them.
	var firstDone time.Time
	for _, ev := range historyOf(t, shared.client, env.DelegationID) {
		// A step's session tells the plan its turn ended with TaskDone,
		// or (version 5) by closing with it.
		a := ev.GetWorkflowExecutionSignaledEventAttributes()
		if a != nil && a.GetSignalName() == api.TaskDoneSignal || ev.GetChildWorkflowExecutionCompletedEventAttributes() != nil ||
			ev.GetChildWorkflowExecutionFailedEventAttributes() != nil {
			firstDone = ev.GetEventTime().AsTime()
			break
		}
	}
	if firstDone.IsZero() || !last.Before(firstDone) {
		t.Fatalf("the last reviewer was asked at %v, after the first reviewer's turn ended at %v: not side by side", last, firstDone)
	}
	if !merge[0].Time.After(last) {
		t.Fatal("the merge ran before the reviewers")
	}
	if !strings.Contains(userText(e.model.RequestsFor("par-tests")[0]), "the uncommitted changes in the working tree") {
		t.Fatal("the default of the target argument is not in the task")
	}
}

// TestPlanLanes is pattern 3 (docs/plans/lanes.yaml): two lanes side by
// side; the api writer fails, which skips only the api reviewer.
func TestPlanLanes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("lanes-api-writer", finalizeWith("ERROR", "the API schema is missing", ""))
	e.model.Script("lanes-ui-writer", finalizeStep("added the button"))
	e.model.Script("lanes-ui-review", finalizeStep("ui looks right"))
	e.model.Script("lanes-api-review", finalizeStep("never asked"))
	e.startWorker(shared.client)
	file := e.examplePlan("lanes", "lanes", map[string]string{"api": "add GET /hello", "ui": "add a hello button"})

	env := e.runPlan(1, file)
	if env.Status != "failed" {
		t.Fatalf("plan %s", env.Status)
	}
	if it := planItem(t, env, "api-writer"); it.Status != "failed" {
		t.Fatalf("api writer %+v", it)
	}
	skipped := planItem(t, env, "api-review")
	if skipped.Status != string(api.StateSkipped) || skipped.Error == nil || skipped.Error.Code != errcode.Skipped ||
		!strings.Contains(skipped.Error.Message, `"api-writer" ended failed`) {
		t.Fatalf("api review %+v", skipped)
	}
	if it := planItem(t, env, "ui-review"); it.Status != "completed" || it.Output != "ui looks right" {
		t.Fatalf("ui review %+v", it)
	}
	if n := len(e.model.RequestsFor("lanes-api-review")); n != 0 {
		t.Fatalf("the blocked reviewer ran %d times", n)
	}
	if st := planStep(t, env, "ui-review"); strings.Join(st.Path, "/") != "ui" {
		t.Fatalf("ui review path %v", st.Path)
	}
	recordHistory(t, shared.client, env.DelegationID, "plan-lanes-failed-v1")
}

// TestPlanReviewLoop is pattern 4 (docs/plans/review-loop.yaml): the first
// review asks for changes, the fix continues the implementer's session,
// the second review is clean and ends the loop; the third round never runs.
func TestPlanReviewLoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("loop-implement", finalizeStep("implemented v1"))
	// The fix is the implementer session's next turn.
	e.model.Script("loop-fix", finalizeStep("fixed the nil check"))
	e.startWorker(shared.client)
	file := e.examplePlan("review-loop", "loop", map[string]string{"change": "greet by name"})
	// Round 2's reviewer is a new session with the same task: its script
	// is chosen by the round in its task.
	b, _ := os.ReadFile(file)
	round2 := strings.Replace(string(b), "[[script:loop-review]]", "[[script:loop-review{round}]]", 1)
	if err := os.WriteFile(file, []byte(round2), 0o644); err != nil {
		t.Fatal(err)
	}
	e.model.Script("loop-review1", finalizeWith("SUCCESS", "add a nil check in greet.go", "changes"))
	e.model.Script("loop-review2", finalizeWith("SUCCESS", "all good now", "clean"))

	env := e.runPlan(0, file)
	if env.Status != "completed" {
		t.Fatalf("plan %s: %+v", env.Status, env.Plan)
	}
	review := planStep(t, env, "review")
	if review.Round != 2 || review.Verdict != "clean" || planItem(t, env, "review").Output != "all good now" {
		t.Fatalf("review %+v", review)
	}
	fix := planStep(t, env, "fix")
	impl := planStep(t, env, "implement")
	if fix.Round != 1 || fix.State != api.StateCompleted || fix.SessionID != impl.SessionID {
		t.Fatalf("fix %+v (implement's session %s)", fix, impl.SessionID)
	}
	calls := e.calls("loop-implement", "loop-fix", "loop-review1", "loop-review2")
	if calls["loop-implement"] != 1 || calls["loop-fix"] != 1 || calls["loop-review1"] != 1 || calls["loop-review2"] != 1 {
		t.Fatalf("model calls %v", calls)
	}
	// The fix saw the first review's findings, in the implementer's own
	// conversation (its first task is in the same request).
	fixReq := e.model.RequestsFor("loop-fix")[0]
	if txt := userText(fixReq); !strings.Contains(txt, "add a nil check in greet.go") || !strings.Contains(txt, "greet by name") {
		t.Fatalf("the fix's request: %.400s", txt)
	}
	if !strings.Contains(userText(e.model.RequestsFor("loop-review1")[0]), "verdict to one of: clean, changes") {
		t.Fatal("the reviewer was not told which verdicts to give")
	}
	recordHistory(t, shared.client, env.DelegationID, "plan-review-loop-v1")
}

// TestPlanGate is pattern 5 (docs/plans/gated-writer.yaml): the writer's
// first result fails the gate, the command's output goes back to the same
// child, its second passes.
func TestPlanGate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	check := filepath.Join(e.workDir, "check.sh")
	if err := os.WriteFile(check, []byte("#!/bin/sh\ngrep -q hello greeting.txt || { echo 'FAIL: TestGreeting: got '\"$(cat greeting.txt)\"', want hello'; exit 1; }\necho ok\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.model.Script("gate-write",
		bashStep("echo hi > greeting.txt"),
		finalizeStep("wrote the greeting"),
		bashStep("echo hello > greeting.txt"),
		finalizeStep("fixed the greeting"),
	)
	e.startWorker(shared.client)
	file := e.examplePlan("gated-writer", "gate", map[string]string{"change": "write the greeting", "check": "./check.sh"})

	env := e.runPlan(0, file)
	if env.Status != "completed" {
		t.Fatalf("plan %s: %+v", env.Status, env.Plan)
	}
	st := planStep(t, env, "write")
	if st.GateRuns != 2 || st.Runs != 2 || planItem(t, env, "write").Output != "fixed the greeting" {
		t.Fatalf("write %+v", st)
	}
	reqs := e.model.RequestsFor("gate-write")
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	if txt := userText(reqs[2]); !strings.Contains(txt, "FAIL: TestGreeting: got hi, want hello") || !strings.Contains(txt, "./check.sh") {
		t.Fatalf("the corrective turn lacks the gate's output: %.600s", txt)
	}
	// Each gate run is an activity in the plan's history.
	if n := completedActivities(historyOf(t, shared.client, env.DelegationID), api.RunGateActivityName); n != 2 {
		t.Fatalf("%d gate activities in history, want 2", n)
	}
	recordHistory(t, shared.client, env.DelegationID, "plan-gate-v1")
}
