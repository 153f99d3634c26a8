package e2e

import (
	"fmt"
	"os"
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
// receives each result in its session, once, and acknowledges it, each
// saying that no pi session was open here when its run ended; a second pi
// started there after it receives none. A run triggered while a pi session
// is open in the folder (which takes no result then) reaches the next pi
// started there, saying another session was open when it ended.
func TestScheduledResultsReachTheNextPiOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("nightly-scan", finalizeStep("the logs are clean"))
	e.model.Script("later-hello", scriptedmodel.Step{Text: "Hello."})
	e.model.Script("again-hello", scriptedmodel.Step{Text: "Hello again."})
	e.model.Script("third-hello", scriptedmodel.Step{Text: "Hello a third time."})
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
	for _, m := range resultMessages(t, first) {
		if !strings.HasPrefix(m, "A scheduled run of schedule "+id+" ("+id+"-") || !strings.Contains(m, " and ended at ") ||
			!strings.Contains(m, " while no pi session was open here; its result:") {
			t.Fatalf("a result of a run that ended while no pi ran says:\n%.400s", m)
		}
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

	// A pi session open in the folder (idle, over RPC) while a run ends:
	// it takes nothing then; the next pi started here gets the result,
	// which says a session was open when the run ended.
	open := e.startExt([]string{"--mode", "rpc", "--session", filepath.Join(t.TempDir(), "open.jsonl")}, "")
	waitFor(t, "the open session's record", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.dataDir, "open", fmt.Sprintf("%d-%s", open.cmd.Process.Pid, procStart(open.cmd.Process.Pid))))
		return strings.Contains(string(b), e.workDir)
	})
	e.mustSchedule(nil, "trigger", id)
	var triggered []string
	waitFor(t, "the triggered run's result", func() bool {
		_, triggered = e.waitingResults(shared.client, e.workDir)
		return len(triggered) == 1
	})
	third := filepath.Join(t.TempDir(), "third.jsonl")
	e.startParent("json", third, "[[script:third-hello]] Hi.").wait(t)
	if got := deliveredResults(t, third); !slices.Equal(got, triggered) {
		t.Fatalf("the third pi received %v, want %v", got, triggered)
	}
	if m := resultMessages(t, third); len(m) != 1 || !strings.Contains(m[0], " while another pi session was open here (a folder's scheduled results come when a session starts); its result:") {
		t.Fatalf("a result of a run that ended while a pi session was open here says:\n%.400s", m)
	}
	e.mustSchedule(nil, "delete", id)
}

// resultMessages are the texts of the results delivered in a session file.
func resultMessages(t *testing.T, sessionFile string) []string {
	t.Helper()
	var out []string
	for _, entry := range sessionEntries(t, sessionFile) {
		if entry["type"] == "custom_message" && entry["customType"] == "subagents-result" {
			text, _ := entry["content"].(string)
			out = append(out, text)
		}
	}
	return out
}

// procStart is process pid's start time in clock ticks (/proc/PID/stat's
// field 22), as the extension names its record of open sessions.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "0"
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 20 {
		return "0"
	}
	return fields[19]
}

// waitFor polls ok until it holds, for at most testTimeout.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, testTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestScheduleFromPi: a real parent pi's model drives a schedule with the
// task tool's op "schedule": creates it, lists it, pauses it with a note,
// triggers it (a paused schedule runs once), resumes it, deletes it. Each
// answer says what the service did; the triggered run's result waits for
// the folder's next pi, which receives it.
func TestScheduleFromPi(t *testing.T) {
	t.Parallel()
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
	if !strings.Contains(ends[2].Text, ": paused from pi): no fires until") || !strings.Contains(ends[2].Text, `action "resume", id "`+id+`"`) ||
		strings.Contains(ends[2].Text, "next at") || strings.Contains(ends[4].Text, "paused") {
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
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
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
