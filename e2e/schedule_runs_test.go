package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	subagentscli "github.com/durable-pi/subagents/cli"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestScheduledResultOfADeletedSchedule: a schedule deleted while a run of
// it runs still delivers that run's result. A pi opened in the folder
// meanwhile finds no schedule and no result there, but the run still
// running: the folder's mark stays (it is old enough to go otherwise).
// Once the run ends, a later pi in the folder receives its result.
func TestScheduledResultOfADeletedSchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	slow := finalizeStep("the long scan is done")
	// Long enough for the delete and a whole pi run while it runs.
	slow.DelayMS = 12000
	e.model.Script("long-scan", slow)
	e.model.Script("meanwhile-hello", scriptedmodel.Step{Text: "Hello."})
	e.model.Script("after-hello", scriptedmodel.Step{Text: "Hello again."})
	e.startWorker(shared.client)

	id := scheduleID("deleted")
	e.mustSchedule(nil, "create", "--id", id, "--every", "1h", "[[script:long-scan]] Scan everything.")
	e.mustSchedule(nil, "trigger", id)
	running := e.waitForSchedule(nil, id, "a running run", func(s client.ScheduleItem) bool {
		return len(s.Runs) == 1 && s.Runs[0].Status == string(api.StateRunning)
	})
	// The run names its delegation once it has ended; it is the fire's.
	delegation := api.DelegationIDPrefix + api.FireKey(running.Runs[0].ID)
	deadline := time.Now().Add(testTimeout)
	for {
		if _, err := shared.client.DescribeWorkflowExecution(e.ctx(), delegation, ""); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's delegation %s did not start", delegation)
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.mustSchedule(nil, "delete", id)

	// The mark is older than the minute a fresh one is kept in any case.
	mark := subagentscli.ScheduledMark(e.dataDir, e.workDir)
	old := time.Now().Add(-10 * time.Minute)
	if err := os.Chtimes(mark, old, old); err != nil {
		t.Fatal(err)
	}
	meanwhile := filepath.Join(t.TempDir(), "meanwhile.jsonl")
	e.startParent("json", meanwhile, "[[script:meanwhile-hello]] Hi.").wait(t)
	if got := deliveredResults(t, meanwhile); len(got) != 0 {
		t.Fatalf("a pi opened while the run ran received %v", got)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the folder's mark went while a run of its deleted schedule ran: %v", err)
	}
	if st, code := e.scheduleCmd(nil, "describe", id); code == 0 || st.Error == nil {
		t.Fatalf("the schedule is still there: %+v", st.Schedules)
	}

	deadline = time.Now().Add(2 * testTimeout)
	var waiting []string
	for len(waiting) == 0 && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		_, waiting = e.waitingResults(shared.client, e.workDir)
	}
	if !slices.Equal(waiting, []string{delegation}) {
		t.Fatalf("results waiting %v, want the run's %s", waiting, delegation)
	}
	after := filepath.Join(t.TempDir(), "after.jsonl")
	e.startParent("json", after, "[[script:after-hello]] Anything new?").wait(t)
	if got := deliveredResults(t, after); !slices.Equal(got, []string{delegation}) {
		t.Fatalf("the pi opened after the run received %v, want %s", got, delegation)
	}
}

// TestScheduleTriggersRunEach: each trigger starts a run of its own and
// says which, though Temporal names runs by the second: two triggers one
// right after the other, and three at once, make five runs. A schedule
// made, paused and resumed with no note shows notes of ours, never the
// SDK's.
func TestScheduleTriggersRunEach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("each", finalizeStep("ran"))
	e.startWorker(shared.client)
	id := scheduleID("each")
	e.mustSchedule(nil, "create", "--id", id, "--every", "1h", "[[script:each]] Run.")
	if s := e.mustSchedule(nil, "pause", id).Schedules[0]; !s.Paused || s.Note != "paused with subagents schedule pause" {
		t.Fatalf("paused with no note: %+v", s)
	}

	runOf := func(out client.Envelope) string {
		t.Helper()
		if len(out.Schedules) != 1 || len(out.Schedules[0].Runs) != 1 || !strings.Contains(out.Text, "triggered: run "+out.Schedules[0].Runs[0].ID+" started") {
			t.Fatalf("a trigger's answer names no run it started: %q %+v", out.Text, out.Schedules)
		}
		return out.Schedules[0].Runs[0].ID
	}
	var runs []string
	for range 2 {
		runs = append(runs, runOf(e.mustSchedule(nil, "trigger", id)))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			out, code := e.scheduleCmd(nil, "trigger", id)
			mu.Lock()
			defer mu.Unlock()
			if code != 0 || out.Error != nil {
				t.Errorf("a trigger at once with others: exit %d, %+v", code, out.Error)
				return
			}
			runs = append(runs, runOf(out))
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.Sort(runs)
	if len(slices.Compact(slices.Clone(runs))) != 5 {
		t.Fatalf("five triggers answered with the runs %v: not five of their own", runs)
	}
	done := e.waitForSchedule(nil, id, "five finished runs", func(s client.ScheduleItem) bool { n, idle := finishedRuns(s); return n == 5 && idle })
	var ran []string
	for _, r := range done.Runs {
		if r.Status != "completed" {
			t.Errorf("run %+v", r)
		}
		ran = append(ran, r.ID)
	}
	slices.Sort(ran)
	if !slices.Equal(ran, runs) {
		t.Fatalf("the schedule ran %v; the triggers said %v", ran, runs)
	}
	if s := e.mustSchedule(nil, "resume", id).Schedules[0]; s.Paused || s.Note != "resumed with subagents schedule resume" {
		t.Fatalf("resumed with no note, made with none: %+v", s)
	}
	e.mustSchedule(nil, "delete", id)
}
