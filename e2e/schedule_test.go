package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// TestScheduleCommandActions drives every action of `subagents schedule`
// as a person does: create, list (of the folder), describe, pause with a
// note, trigger (a paused schedule runs once now), resume, update, delete,
// and a schedule that fires once (at).
func TestScheduleCommandActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("hourly", finalizeStep("checked"))
	e.startWorker(shared.client)
	id := scheduleID("hourly")

	created := e.mustSchedule(nil, "create", "--id", id, "--every", "1h", "--catchup", "none", "--overlap", "buffer_one",
		"--end", "30d", "--note", "the hourly check", "--name", "hourly check", "[[script:hourly]] Check.")
	s := created.Schedules[0]
	if s.ID != id || s.Name != "hourly check" || s.Spec != "every 1h" || s.Overlap != "buffer_one" || s.Catchup != "none" || s.End == nil ||
		s.Note != "the hourly check" || s.Paused || s.Quiet || s.Kind != "delegation" || s.Cwd != e.workDir {
		t.Fatalf("created %+v", s)
	}
	if len(s.NextFires) == 0 || time.Until(s.NextFires[0]) > time.Hour+time.Minute {
		t.Fatalf("next fires %v: the first is one interval from now", s.NextFires)
	}

	listed := e.mustSchedule(nil, "list", "--cwd", e.workDir)
	if len(listed.Schedules) != 1 || listed.Schedules[0].ID != id {
		t.Fatalf("list of the folder: %+v", listed.Schedules)
	}
	if other := e.mustSchedule(nil, "list", "--cwd", t.TempDir()); len(other.Schedules) != 0 {
		t.Fatalf("list of another folder: %+v", other.Schedules)
	}
	if _, text, _ := runSubagentsIn(t, e.workDir, e.parentEnv(), "schedule", "list", "--cwd", e.workDir); !strings.Contains(text, id) || !strings.Contains(text, "every 1h") {
		t.Fatalf("list for people:\n%s", text)
	}

	pausedEnv := e.mustSchedule(nil, "pause", id, "--note", "holidays")
	paused := pausedEnv.Schedules[0]
	if !paused.Paused || paused.Note != "holidays" {
		t.Fatalf("paused %+v", paused)
	}
	// A paused schedule has no next fire: its answer says how to resume it
	// instead of a time it will not fire at.
	if len(paused.NextFires) != 0 || paused.PausedSince == nil || time.Since(*paused.PausedSince) > time.Minute ||
		strings.Contains(pausedEnv.Text, "next at") || !strings.Contains(pausedEnv.Text, "holidays") || !strings.Contains(pausedEnv.Text, "subagents schedule resume "+id) {
		t.Fatalf("paused: %q, %+v", pausedEnv.Text, paused)
	}
	if l := e.mustSchedule(nil, "list", "--cwd", e.workDir).Schedules[0]; len(l.NextFires) != 0 {
		t.Fatalf("list of a paused schedule: next fires %v", l.NextFires)
	}
	// A paused schedule runs when triggered.
	e.mustSchedule(nil, "trigger", id)
	ran := e.waitForSchedule(nil, id, "a finished run", func(s client.ScheduleItem) bool { n, _ := finishedRuns(s); return n == 1 })
	if r := ran.Runs[0]; r.Status != "completed" || r.Summary != "checked" || !strings.HasPrefix(r.DelegationID, "delegation-"+id) || r.ResultID == "" {
		t.Fatalf("triggered run %+v", r)
	}
	if _, text, _ := runSubagentsIn(t, e.workDir, e.parentEnv(), "schedule", "describe", id); !strings.Contains(text, "paused") ||
		!strings.Contains(text, "holidays") || !strings.Contains(text, "waiting for a pi session") || !strings.Contains(text, "checked") ||
		!strings.Contains(text, "none while paused: `subagents schedule resume "+id+"`") {
		t.Fatalf("describe for people:\n%s", text)
	}
	resumed := e.mustSchedule(nil, "resume", id).Schedules[0]
	if resumed.Paused || resumed.Note != "the hourly check" || resumed.PausedSince != nil || len(resumed.NextFires) == 0 || !resumed.NextFires[0].After(time.Now()) {
		t.Fatalf("resumed %+v: the creation's note comes back, and its next fires", resumed)
	}
	updated := e.mustSchedule(nil, "update", id, "--cron", "0 9 * * 1-5", "--timezone", "Europe/Berlin", "--quiet", "--overlap", "allow_all").Schedules[0]
	if updated.Spec != "cron 0 9 * * 1-5" || updated.Timezone != "Europe/Berlin" || !updated.Quiet || updated.Overlap != "allow_all" || updated.Catchup != "none" || updated.End == nil {
		t.Fatalf("updated %+v", updated)
	}
	if h := updated.NextFires[0].In(mustLocation(t, "Europe/Berlin")); h.Hour() != 9 || h.Minute() != 0 || h.Weekday() == time.Saturday || h.Weekday() == time.Sunday {
		t.Fatalf("next fire %v is not 09:00 on a weekday in Berlin", h)
	}
	// A new time keeps the timezone and the rest; a timezone alone is an update.
	retimed := e.mustSchedule(nil, "update", id, "--cron", "30 7 * * *").Schedules[0]
	if retimed.Spec != "cron 30 7 * * *" || retimed.Timezone != "Europe/Berlin" || !retimed.Quiet || retimed.Overlap != "allow_all" || retimed.Catchup != "none" ||
		retimed.End == nil || retimed.Note != "the hourly check" {
		t.Fatalf("updated to a new time: %+v", retimed)
	}
	if h := retimed.NextFires[0].In(mustLocation(t, "Europe/Berlin")); h.Hour() != 7 || h.Minute() != 30 {
		t.Fatalf("next fire %v is not 07:30 in Berlin", h)
	}
	if rezoned := e.mustSchedule(nil, "update", id, "--timezone", "Asia/Tokyo").Schedules[0]; rezoned.Timezone != "Asia/Tokyo" || rezoned.Spec != "cron 30 7 * * *" {
		t.Fatalf("updated to a timezone: %+v", rezoned)
	}

	e.mustSchedule(nil, "delete", id)
	gone, code := e.scheduleCmd(nil, "describe", id)
	if code != errcode.ExitBadInput || gone.Error == nil || gone.Error.Code != errcode.SessionNotFound {
		t.Fatalf("describe after delete: exit %d, %+v", code, gone.Error)
	}
	if bad, code := e.scheduleCmd(nil, "create", "--every", "1h", "--cron", "@daily", "x"); code != errcode.ExitBadInput || bad.Error.Code != errcode.InvalidInput {
		t.Fatalf("two specs: exit %d, %+v", code, bad.Error)
	}

	// Once: it fires, and then has nothing next.
	once := scheduleID("once")
	e.mustSchedule(nil, "create", "--id", once, "--at", "5s", "[[script:hourly]] Check once.")
	fired := e.waitForSchedule(nil, once, "its one run", func(s client.ScheduleItem) bool { n, _ := finishedRuns(s); return n == 1 })
	if fired.Fires != 1 || len(fired.NextFires) != 0 || !strings.HasPrefix(fired.Spec, "at ") {
		t.Fatalf("a schedule that fires once: %+v", fired)
	}
	e.mustSchedule(nil, "delete", once)

	// A saved plan, read at each fire with the schedule's arguments.
	plans := filepath.Join(e.agentDir, "plans")
	if err := os.MkdirAll(plans, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plans, "nightly-review.yaml"), []byte("args:\n  file: {required: true}\nsteps:\n  - task: \"[[script:hourly]] Review {args.file}.\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	planned := scheduleID("plan")
	if s := e.mustSchedule(nil, "create", "--id", planned, "--at", "5s", "--plan", "nightly-review", "--arg", "file=cli.go").Schedules[0]; s.Kind != "plan" || s.Name != "nightly-review" {
		t.Fatalf("plan schedule %+v", s)
	}
	pr := e.waitForSchedule(nil, planned, "its plan's run", func(s client.ScheduleItem) bool { n, _ := finishedRuns(s); return n == 1 })
	if r := pr.Runs[0]; r.Status != "completed" || !strings.HasPrefix(r.DelegationID, "plan-") || r.Summary != "checked" {
		t.Fatalf("plan run %+v", r)
	}
	if reqs := e.model.RequestsFor("hourly"); !strings.Contains(userTexts(reqs[len(reqs)-1])[0], "Review cli.go.") {
		t.Fatalf("the plan's step ran with %q", userTexts(reqs[len(reqs)-1]))
	}
	if missing, code := e.scheduleCmd(nil, "create", "--every", "1h", "--plan", "no-such-plan"); code != errcode.ExitBadInput || missing.Error == nil {
		t.Fatalf("a saved plan that does not exist: exit %d, %+v", code, missing.Error)
	}
	e.mustSchedule(nil, "delete", planned)
}

func mustLocation(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestScheduleMadeWhileNoWorkerRuns: schedules made while no worker polls
// fire all the same (Temporal keeps their fires); a worker that starts
// later runs what their overlap policy kept: skip, one fire (the others
// skipped while it waited); allow_all, every fire.
func TestScheduleMadeWhileNoWorkerRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("missed", finalizeStep("caught up"))
	skip, all := scheduleID("skip"), scheduleID("all")
	e.mustSchedule(nil, "create", "--id", skip, "--every", "2s", "--overlap", "skip", "[[script:missed]] Catch up.")
	e.mustSchedule(nil, "create", "--id", all, "--every", "2s", "--overlap", "allow_all", "[[script:missed]] Catch up.")
	// Three fires of each while nothing runs them.
	e.waitForSchedule(nil, all, "three fires", func(s client.ScheduleItem) bool { return s.Fires >= 3 })
	e.mustSchedule(nil, "pause", skip)
	e.mustSchedule(nil, "pause", all)
	before := map[string]client.ScheduleItem{}
	for _, id := range []string{skip, all} {
		before[id] = e.mustSchedule(nil, "describe", id).Schedules[0]
		if _, idle := finishedRuns(before[id]); idle {
			t.Fatalf("%s: a fire has run with no worker: %+v", id, before[id].Runs)
		}
	}
	if s := before[skip]; s.Fires != 1 || s.Skipped < 2 {
		t.Fatalf("skip: %d fires, %d skipped; want one, the others skipped while it waited", s.Fires, s.Skipped)
	}
	e.startWorker(shared.client)
	for id, want := range map[string]int{skip: 1, all: before[all].Fires} {
		s := e.waitForSchedule(nil, id, "its fires run", func(s client.ScheduleItem) bool { n, idle := finishedRuns(s); return idle && n == min(want, 10) })
		for _, r := range s.Runs {
			if r.Status != "completed" || r.Summary != "caught up" {
				t.Fatalf("%s: run %+v", id, r)
			}
		}
		e.mustSchedule(nil, "delete", id)
	}
}

// TestScheduleCatchesUpAfterTheServiceWasDown runs the service as a user
// does (`subagents dev`, its database on disk) and stops it (SIGKILL, a
// machine's crash) for longer than the catch-up window of one schedule and
// shorter than the other's. Started again, the service takes the fires it
// missed by its policy: within the window they run (overlap allow_all:
// each of them), past it (catchup none) they are counted missed and never
// run. The UI's Schedules page lists both, with their notes.
func TestScheduleCatchesUpAfterTheServiceWasDown(t *testing.T) {
	// A schedule describes its 10 latest runs, and one that fires every
	// 8 s pushes the five late fires out of them about 48 s after the
	// restart: they must all have ended by then. At every 4 s (16 s) a
	// machine loaded by the tests beside this one missed it, and the test
	// ran alone, half a minute of the suite's mostly asleep.
	t.Parallel()
	e := newEnv(t)
	e.model.Script("while-down", finalizeStep("ran late"))
	port, uiPort := freePort(), freePort()
	args := []string{
		"--port", strconv.Itoa(port), "--ui-port", strconv.Itoa(uiPort), "--db-filename", filepath.Join(t.TempDir(), "temporal.db"),
		"--data-dir", e.dataDir, "--task-queue", e.taskQueue,
	}
	p := e.startDev(args...)
	p.waitReady(t)
	// The command as a user runs it beside the service: it hands its calls
	// to the service's socket.
	env := append(e.cliEnv(), "TEMPORAL_ADDRESS="+fmt.Sprintf("127.0.0.1:%d", port), "SUBAGENTS_TASK_QUEUE="+e.taskQueue)
	kept, dropped := scheduleID("kept"), scheduleID("dropped")
	e.mustSchedule(env, "create", "--id", kept, "--every", "8s", "--catchup", "2m", "--overlap", "allow_all", "--note", "catches up two minutes", "[[script:while-down]] Run.")
	e.mustSchedule(env, "create", "--id", dropped, "--every", "8s", "--catchup", "none", "--overlap", "allow_all", "--note", "never late", "[[script:while-down]] Run.")

	// The UI's Schedules page (its API, which the page reads) shows them.
	var page struct {
		Schedules []struct {
			ScheduleID string `json:"scheduleId"`
			Info       struct {
				WorkflowType struct {
					Name string `json:"name"`
				} `json:"workflowType"`
				Notes string `json:"notes"`
			} `json:"info"`
		} `json:"schedules"`
	}
	deadline := time.Now().Add(testTimeout)
	for len(page.Schedules) < 2 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		if err := json.Unmarshal([]byte(e.uiGet(uiPort, "/api/v1/namespaces/default/schedules")), &page); err != nil {
			t.Fatal(err)
		}
	}
	notes := map[string]string{}
	for _, s := range page.Schedules {
		if s.Info.WorkflowType.Name != "Scheduled" {
			t.Errorf("UI: schedule %s starts %q", s.ScheduleID, s.Info.WorkflowType.Name)
		}
		notes[s.ScheduleID] = s.Info.Notes
	}
	if notes[kept] != "catches up two minutes" || notes[dropped] != "never late" {
		t.Fatalf("the UI's Schedules page shows %+v", page.Schedules)
	}

	// Both have fired once before the crash.
	for _, id := range []string{kept, dropped} {
		e.waitForSchedule(env, id, "a finished run", func(s client.ScheduleItem) bool { n, idle := finishedRuns(s); return n >= 1 && idle })
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	down := time.Now()
	// Down for 40 s: five fires of each missed; those of its first seconds
	// later than any window of 10 s when the service is back.
	time.Sleep(40 * time.Second)
	p = e.startDev(args...)
	p.waitReady(t)
	back := time.Now()
	lateRuns := func(s client.ScheduleItem, from, to time.Time) []client.ScheduleRun {
		var out []client.ScheduleRun
		for _, r := range s.Runs {
			if r.Scheduled != nil && !r.Scheduled.Before(from) && r.Scheduled.Before(to) {
				out = append(out, r)
			}
		}
		return out
	}
	kept2 := e.waitForSchedule(env, kept, "the missed fires run", func(s client.ScheduleItem) bool {
		late := lateRuns(s, down, back)
		done := 0
		for _, r := range late {
			if r.Status == "completed" {
				done++
			}
		}
		return len(late) >= 4 && done == len(late)
	})
	dropped2 := e.waitForSchedule(env, dropped, "its missed fires counted", func(s client.ScheduleItem) bool { return s.Missed >= 2 })
	if early := lateRuns(dropped2, down, down.Add(12*time.Second)); len(early) != 0 {
		t.Fatalf("dropped: fires missed by 28 s and more ran after the restart: %+v", early)
	}
	t.Logf("after 40 s down: kept ran %d late fires; dropped missed %d (its window 10 s)", len(lateRuns(kept2, down, back)), dropped2.Missed)
	for _, id := range []string{kept, dropped} {
		e.mustSchedule(env, "pause", id)
	}
	p.stop(t)
}
