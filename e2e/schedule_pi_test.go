package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestScheduledResultsReachTheNextPiOnce: a schedule every 2 s, made with
// the command while no pi runs, fires delegations in the folder; once three
// have ended (the schedule then paused), a pi started in the folder
// receives each result in its session, once, and acknowledges it; a second
// pi started there after it receives none.
func TestScheduledResultsReachTheNextPiOnce(t *testing.T) {
	e := newEnv(t)
	e.model.Script("nightly-scan", finalizeStep("the logs are clean"))
	e.model.Script("later-hello", scriptedmodel.Step{Text: "Hello."})
	e.model.Script("again-hello", scriptedmodel.Step{Text: "Hello again."})
	e.startWorker(shared.client)

	id := scheduleID("scan")
	created := e.mustSchedule(nil, "create", "--id", id, "--every", "2s", "--note", "scan the logs every 2 s", "[[script:nightly-scan]] Scan the logs.")
	if s := created.Schedules[0]; s.ID != id || s.Spec != "every 2s" || s.Cwd != e.workDir || s.Kind != "delegation" || s.Note != "scan the logs every 2 s" || len(s.NextFires) == 0 {
		t.Fatalf("created %+v", s)
	}
	e.waitForSchedule(nil, id, "three finished runs", func(s client.ScheduleItem) bool {
		n, _ := finishedRuns(s)
		return n >= 3
	})
	e.mustSchedule(nil, "pause", id, "--note", "enough for the test")
	item := e.waitForSchedule(nil, id, "no running fire", func(s client.ScheduleItem) bool {
		_, idle := finishedRuns(s)
		return idle
	})
	var ran []string
	for _, r := range item.Runs {
		if r.Status != "completed" || !strings.HasPrefix(r.DelegationID, "delegation-"+id+"-") {
			t.Fatalf("run %+v", r)
		}
		ran = append(ran, r.DelegationID)
	}
	slices.Sort(ran)
	_, waiting := e.waitingResults(shared.client, e.workDir)
	if !slices.Equal(waiting, ran) {
		t.Fatalf("results waiting %v, runs %v", waiting, ran)
	}

	first := filepath.Join(t.TempDir(), "first.jsonl")
	p := e.startParent("json", first, "[[script:later-hello]] Hi.")
	p.wait(t)
	got := deliveredResults(t, first)
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if !slices.Equal(sorted, ran) {
		t.Fatalf("the first pi received %v, want each of %v once", got, ran)
	}
	if left, _ := e.waitingResults(shared.client, e.workDir); len(left) != 0 {
		t.Fatalf("results still waiting after the first pi acknowledged them: %v", left)
	}
	// The print run took them before its prompt: its model read them with
	// it, each once.
	if reqs := e.model.RequestsFor("later-hello"); len(reqs) != 1 || strings.Count(userText(reqs[0]), "A scheduled run of schedule "+id) != len(ran) {
		t.Fatalf("the first pi's model was not given the %d results with its prompt", len(ran))
	}
	// A fire and the result it left, claimed and acknowledged, for the
	// replay test (workflows/scheduled_test.go).
	oldest := item.Runs[len(item.Runs)-1]
	recordHistory(t, shared.client, oldest.ID, "scheduled/fire-delivered-v1")
	recordHistory(t, shared.client, oldest.ResultID, "scheduled/result-acked-v1")
	described := e.mustSchedule(nil, "describe", id).Schedules[0]
	for _, r := range described.Runs {
		if !r.Delivered {
			t.Errorf("run %s is not shown delivered: %+v", r.ID, r)
		}
	}

	second := filepath.Join(t.TempDir(), "second.jsonl")
	p2 := e.startParent("json", second, "[[script:again-hello]] Hi again.")
	p2.wait(t)
	if again := deliveredResults(t, second); len(again) != 0 {
		t.Fatalf("the second pi received %v again", again)
	}
	e.mustSchedule(nil, "delete", id)
}

// TestScheduleFromPi: a real parent pi's model drives a schedule with the
// task tool's op "schedule": creates it, lists it, pauses it with a note,
// triggers it (a paused schedule runs once), resumes it, deletes it. Each
// answer says what the service did; the triggered run's result waits for
// the folder's next pi, which receives it.
func TestScheduleFromPi(t *testing.T) {
	e := newEnv(t)
	e.startWorker(shared.client)
	id := scheduleID("from-pi")
	op := func(schedule map[string]any) scriptedmodel.Step {
		return call("task", map[string]any{"op": "schedule", "schedule": schedule})
	}
	e.model.Script("pi-scheduled-task", finalizeStep("nothing new in the logs"))
	e.model.Script("pi-schedules",
		op(map[string]any{"action": "create", "id": id, "every": "1h", "note": "made from pi", "tasks": []map[string]string{{"prompt": "[[script:pi-scheduled-task]] Read the logs."}}}),
		op(map[string]any{"action": "list"}),
		op(map[string]any{"action": "pause", "id": id, "note": "paused from pi"}),
		op(map[string]any{"action": "trigger", "id": id}),
		op(map[string]any{"action": "resume", "id": id}),
		op(map[string]any{"action": "delete", "id": id}),
		scriptedmodel.Step{Text: "Done with the schedule."},
	)
	e.model.Script("pi-next", scriptedmodel.Step{Text: "Read it."})

	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:pi-schedules]] Schedule a log check.")
	p.wait(t)
	ends := toolEnds(p, "task")
	if len(ends) != 6 {
		t.Fatalf("task ended %d times, want 6", len(ends))
	}
	wants := []string{
		"Schedule " + id + " created: every 1h",
		"1 schedule(s) in this folder:\n- " + id,
		"Schedule " + id + " paused",
		"Schedule " + id + " triggered",
		"Schedule " + id + " resumed",
		"Schedule " + id + " deleted.",
	}
	for i, end := range ends {
		if end.IsError || !strings.Contains(end.Text, wants[i]) {
			t.Errorf("call %d: error %v, text %q; want %q", i+1, end.IsError, end.Text, wants[i])
		}
	}
	if !strings.Contains(ends[2].Text, "paused (paused from pi)") || strings.Contains(ends[4].Text, "paused") {
		t.Errorf("pause said %q, resume %q", ends[2].Text, ends[4].Text)
	}
	if gone, code := e.scheduleCmd(nil, "describe", id); code == 0 || gone.Error == nil {
		t.Fatalf("the schedule is still there after its delete: %+v", gone.Schedules)
	}

	// The run the trigger started ended; its result waits for the folder's
	// next pi, though its schedule is gone.
	deadline := time.Now().Add(testTimeout)
	var waiting []string
	for len(waiting) == 0 && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		_, waiting = e.waitingResults(shared.client, e.workDir)
	}
	if len(waiting) != 1 || !strings.HasPrefix(waiting[0], "delegation-"+id+"-") {
		t.Fatalf("results waiting: %v", waiting)
	}
	next := filepath.Join(t.TempDir(), "next.jsonl")
	e.startParent("json", next, "[[script:pi-next]] Anything new?").wait(t)
	if got := deliveredResults(t, next); !slices.Equal(got, waiting) {
		t.Fatalf("the next pi received %v, want %v", got, waiting)
	}
}

// TestScheduledResultsTwoPisAtOnce: two pis started in the folder at the
// same moment split the waiting results between them: each result is in
// exactly one of their sessions.
func TestScheduledResultsTwoPisAtOnce(t *testing.T) {
	e := newEnv(t)
	e.model.Script("twice-task", finalizeStep("done"))
	e.model.Script("twin-a", scriptedmodel.Step{Text: "A."})
	e.model.Script("twin-b", scriptedmodel.Step{Text: "B."})
	e.startWorker(shared.client)
	id := scheduleID("twins")
	// Paused from the start: its runs are the four triggers.
	e.mustSchedule(nil, "create", "--id", id, "--every", "1h", "--overlap", "allow_all", "[[script:twice-task]] Look.")
	e.mustSchedule(nil, "pause", id)
	// One after another: each trigger starts a run of its own.
	for range 4 {
		e.mustSchedule(nil, "trigger", id)
	}
	e.waitForSchedule(nil, id, "four finished runs", func(s client.ScheduleItem) bool { n, idle := finishedRuns(s); return n == 4 && idle })
	_, waiting := e.waitingResults(shared.client, e.workDir)
	if len(waiting) != 4 {
		t.Fatalf("results waiting: %v", waiting)
	}
	a, b := filepath.Join(t.TempDir(), "a.jsonl"), filepath.Join(t.TempDir(), "b.jsonl")
	pa := e.startParent("json", a, "[[script:twin-a]] Hi.")
	pb := e.startParent("json", b, "[[script:twin-b]] Hi.")
	pa.wait(t)
	pb.wait(t)
	got := append(deliveredResults(t, a), deliveredResults(t, b)...)
	slices.Sort(got)
	if !slices.Equal(got, waiting) {
		t.Fatalf("the two pis received %v and %v; want each of %v in exactly one", deliveredResults(t, a), deliveredResults(t, b), waiting)
	}
	if left, _ := e.waitingResults(shared.client, e.workDir); len(left) != 0 {
		t.Fatalf("results still waiting: %v", left)
	}
	t.Logf("pi A took %d, pi B %d", len(deliveredResults(t, a)), len(deliveredResults(t, b)))
	e.mustSchedule(nil, "delete", id)
}
