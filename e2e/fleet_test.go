package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestFleetViewInATerminal: a parent pi in a real terminal delegates one
// task that finishes and two that run on; the widget above the editor
// counts the two running; `/subagents` lists all three at 120 and at 80
// columns under This session, a run and a plan started in the folder by
// the command (outside this pi) under This folder, and the folder's
// schedule under its own heading; through the view a message goes to a
// running child (its model gets it as its next turn) and another child is
// cancelled (its status says so), and a run opens on its tasks and its
// transcript (docs/fleet.md).
func TestFleetViewInATerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	e.model.Script("c-done", finalizeStep("done-task: the loader is config/load.go"))
	// Long enough that the send below reaches the child while this turn runs.
	slow := finalizeStep("send-target: the tree is scanned")
	slow.DelayMS = 15000
	e.model.Script("c-send", slow)
	e.model.Script("c-reply", finalizeStep("send-target: the tests are checked too"))
	e.model.Script("c-hang", scriptedmodel.Step{Hang: true})
	e.model.Script("parent-fleet",
		call("task", map[string]any{"op": "start", "subagent_type": "scout", "description": "done-task", "prompt": "[[script:c-done]] Find the loader."}),
		call("task", map[string]any{"op": "start", "async": true, "subagent_type": "scout", "description": "send-target", "prompt": "[[script:c-send]] Scan the tree."}),
		call("task", map[string]any{"op": "start", "async": true, "subagent_type": "scout", "description": "cancel-target", "prompt": "[[script:c-hang]] Think forever."}),
		// This, and every later turn (each background result starts one).
		scriptedmodel.Step{Text: "Two tasks run in the background.", Repeat: true},
	)
	// A schedule of the folder, which does not fire while the test runs.
	sched := scheduleID("fleet-hourly")
	e.mustSchedule(nil, "create", "--id", sched, "--every", "1h", "--name", "hourly review", "Review the day.")
	t.Cleanup(func() { e.scheduleCmd(nil, "delete", sched) })
	// A run and a plan of this folder that another session started: the
	// command, outside this pi, in the same folder.
	e.model.Script("c-outside", finalizeStep("outside-run: the folder is tidy"))
	e.model.Script("p-probe", finalizeStep("probe: nothing to fix"))
	e.cli().json(0, "", "start", "--agent", "scout", "--name", "outside-run", "[[script:c-outside]] Look around.")
	plan := writePlan(t, e, "fleet-plan", api.Plan{Name: "fleet-plan", Steps: []api.Step{{Key: "probe", Agent: "scout", Task: "[[script:p-probe]] Probe the folder."}}})
	e.cli().json(0, "", "start", "--plan", plan)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startTmuxPi(sessionFile, 120, 40, "[[script:parent-fleet]] Start the work.")

	widget := p.waitFor("2 subagents running", "/subagents")
	line, _ := lineWith(widget, "2 subagents running")
	if strings.Contains(widget, "─ Subagents") {
		t.Fatalf("the view is open before /subagents:\n%s", widget)
	}
	if !strings.Contains(line, "scout send-target") || !strings.Contains(line, "scout cancel-target") {
		t.Fatalf("the widget does not name the running tasks: %q\n%s", line, widget)
	}
	p.waitFor("Two tasks run in the background.")

	p.text("/subagents")
	p.keys("Enter")
	view := p.waitScreen("the fleet view", func(s string) bool {
		if !strings.Contains(s, "Subagents · this session and work") {
			// The command's completion list took the first Enter.
			if strings.Contains(s, "/subagents") && !strings.Contains(s, "This session") {
				p.keys("Enter")
			}
			return false
		}
		return strings.Contains(s, "cancel-target") && strings.Contains(s, "done-task") && strings.Contains(s, "outside-run") && strings.Contains(s, "fleet-plan")
	})
	checkRows(t, view, map[string]string{"done-task": "completed", "send-target": "running", "cancel-target": "running", "hourly review": "every 1h"})
	for row, section := range map[string]string{
		"done-task": "This session", "send-target": "This session", "cancel-target": "This session",
		"outside-run": "This folder", "fleet-plan": "This folder", "hourly review": "Schedules of this folder",
	} {
		if got := sectionOf(fleetView(view), row); got != section {
			t.Fatalf("the row %s is under %q, not %q:\n%s", row, got, section, view)
		}
	}
	if l, _ := lineWith(fleetView(view), "fleet-plan"); !strings.Contains(l, " plan ") {
		t.Fatalf("the plan's row does not say it is a plan: %q\n%s", l, view)
	}
	// Its step is a session of scout's, beneath it.
	if l, _ := lineWith(fleetView(view), " probe "); !strings.Contains(l, "session") || !strings.Contains(l, "scout") || sectionOf(fleetView(view), " probe ") != "This folder" {
		t.Fatalf("the plan's step: %q\n%s", l, view)
	}
	if l, _ := lineWith(fleetView(view), "outside-run"); !strings.Contains(l, "scout") || !strings.Contains(l, "delegation") {
		t.Fatalf("the folder's run: %q\n%s", l, view)
	}
	if l, _ := lineWith(fleetView(view), "hourly review"); !strings.Contains(l, "active") || !strings.Contains(l, "in 59m") || !strings.Contains(view, "Schedules of this folder") {
		t.Fatalf("the schedule's row: %q\n%s", l, view)
	}
	if !strings.Contains(view, "r refresh · esc close") || !strings.Contains(view, "delegation") {
		t.Fatalf("the view at 120 columns lacks its kind column or its keys:\n%s", view)
	}
	t.Logf("the fleet view at 120 columns:\n%s", view)

	p.resize(80, 40)
	narrow := p.waitFor("↑↓ · enter open · s send · c cancel · t take · u UI · r refresh · esc close")
	checkRows(t, narrow, map[string]string{"done-task": "completed", "send-target": "running", "cancel-target": "running", "outside-run": "scout", "fleet-plan": ""})
	for _, row := range []string{"outside-run", "fleet-plan"} {
		if got := sectionOf(fleetView(narrow), row); got != "This folder" {
			t.Fatalf("at 80 columns the row %s is under %q:\n%s", row, got, narrow)
		}
	}
	for _, l := range strings.Split(fleetView(narrow), "\n") {
		if len([]rune(l)) > 80 {
			t.Fatalf("a line wider than the terminal: %q", l)
		}
	}
	t.Logf("the fleet view at 80 columns:\n%s", narrow)

	// A message to the running child.
	selectRow(t, p, "send-target")
	p.keys("s")
	p.waitFor("Message to send-target:")
	p.text("[[script:c-reply]] Also check the tests.")
	p.keys("Enter")
	p.waitFor("Sent: it runs as turn 2 of ")
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	reqs, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == "c-reply" })
	if err != nil {
		t.Fatalf("the child's model never got the message: %v", err)
	}
	if got := fmt.Sprint(userTexts(reqs[0])); !strings.Contains(got, "Also check the tests.") || !strings.Contains(got, "Scan the tree.") {
		t.Fatalf("the child's next turn is not the message on its own session: %s", got)
	}
	// The answer of that turn, which no delegation carries, comes back into
	// the conversation as the task's first answer did: a result message.
	const reply = "send-target: the tests are checked too"
	if l := waitForLine(t, sessionFile, reply); !strings.Contains(l, `"customType":"subagents-result"`) || !strings.Contains(l, "turn 2 of ") {
		t.Fatalf("the answer to the message from the view is in the session as:\n%s", l)
	}

	// A cancel of the other one, which asks first.
	selectRow(t, p, "cancel-target")
	p.keys("c")
	p.waitFor("Cancel cancel-target? y to cancel it")
	p.keys("y")
	p.waitFor("Cancelled ")
	parentID := sessionIDOf(t, sessionFile)
	target := sessionNamed(t, e, parentID, "cancel-target")
	deadline := time.Now().Add(testTimeout)
	for {
		st, out := e.cli().json(0, "", "status", target)
		if len(st.Items) == 1 && st.Items[0].Status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cancel-target after the cancel from the view:\n%s", out)
		}
		// A status is one query on the shared server: five a second see
		// the cancel soon after the workflow records it, at little cost.
		time.Sleep(200 * time.Millisecond)
	}
	p.keys("r")
	after := p.waitScreen("cancel-target cancelled in the view", func(s string) bool {
		l, _ := lineWith(fleetView(s), "cancel-target")
		return strings.Contains(l, "cancelled")
	})

	// A finished task's result taken into the conversation, and its page in the Temporal UI.
	selectRow(t, p, "done-task")
	p.keys("t")
	p.waitFor("Put the result of done-task into the conversation")
	taken := waitForLine(t, sessionFile, `"customType":"subagents-taken"`)
	if !strings.Contains(taken, "done-task: the loader is config/load.go") {
		t.Fatalf("the taken result in the session file:\n%s", taken)
	}
	p.keys("u")
	// No desktop to open it on: the view shows the address (wrapped at 80 columns).
	doneID := sessionNamed(t, e, parentID, "done-task")
	p.waitScreen("the UI page's address", func(s string) bool {
		joined := strings.Join(strings.Fields(fleetView(s)), "")
		return strings.Contains(joined, "TemporalUI:http://") && strings.Contains(joined, "/namespaces/default/workflows/"+doneID)
	})

	// A run opens on its task, its last words and its transcript, live.
	selectRow(t, p, "send-target")
	p.keys("Enter")
	detail := p.waitFor("Subagents › delegation send-target", "Transcript of send-target", "Scan the tree.")
	if !strings.Contains(detail, "esc back") {
		t.Fatalf("the run's screen lacks its keys:\n%s", detail)
	}
	t.Logf("a run opened, at 80 columns:\n%s", detail)
	p.keys("Escape")
	p.waitFor("esc close")

	// A schedule opens on what `schedule describe` says of it.
	selectRow(t, p, "hourly review")
	p.keys("Enter")
	described := p.waitFor("Subagents › schedule hourly review", "Fired 0 times · next in 59m", "No runs yet", "esc back")
	t.Logf("a schedule opened, at 80 columns:\n%s", described)
	p.keys("Escape")
	p.waitFor("esc close")
	p.keys("Escape")
	p.waitScreen("the view closed", func(s string) bool { return !strings.Contains(s, "esc close") })
	// Nothing of the session runs any more: the widget is gone.
	p.waitScreen("no widget", func(s string) bool { return !strings.Contains(s, "running · ") })
	_ = after
	// Each answer came into the conversation once.
	b, err := os.ReadFile(sessionFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, answer := range []string{reply, "send-target: the tree is scanned"} {
		n := 0
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"customType":"subagents-result"`) && strings.Contains(l, answer) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%q came into the conversation %d times, want once", answer, n)
		}
	}
}

// fleetView is the part of the screen the view draws: from its title on.
func fleetView(screen string) string {
	if i := strings.Index(screen, "─ Subagents"); i >= 0 {
		return screen[i:]
	}
	return ""
}

// sectionOf is the heading of the view's section whose rows hold row: the
// start of the nearest heading line above it ("" when there is none).
func sectionOf(view, row string) string {
	lines := strings.Split(view, "\n")
	_, at := lineWith(view, row)
	for i := at - 1; i >= 0; i-- {
		for _, h := range []string{"This session", "This folder", "Schedules of this folder"} {
			if strings.HasPrefix(lines[i], " "+h) {
				return h
			}
		}
	}
	return ""
}

// checkRows checks that each named row of the view shows its state.
func checkRows(t *testing.T, screen string, want map[string]string) {
	t.Helper()
	for name, state := range want {
		l, _ := lineWith(fleetView(screen), name)
		if !strings.Contains(l, state) {
			t.Fatalf("the row of %s does not say %s: %q\n%s", name, state, l, screen)
		}
	}
}

// selectRow moves the view's selection (▸) to the row that names title.
func selectRow(t *testing.T, p *tmuxPi, title string) {
	t.Helper()
	// One key a try, each moving the selection a row toward title: 20 is
	// more rows than the test's view lists (under ten), so a selection that never
	// reaches its row fails here instead of pressing keys until the test's
	// deadline.
	for range 20 {
		// The view redraws as it refreshes ("Asking again…"): a capture
		// between two frames may hold no view at all, so this waits for
		// one that lists the row and a selection (failing at the
		// harness's deadline when none comes).
		s := fleetView(p.waitScreen(fmt.Sprintf("the row %q and a selected row", title), func(n string) bool {
			v := fleetView(n)
			_, at := lineWith(v, title)
			_, sel := lineWith(v, "▸ ")
			return at >= 0 && sel >= 0
		}))
		_, at := lineWith(s, title)
		_, sel := lineWith(s, "▸ ")
		if at == sel {
			return
		}
		key := "Down"
		if at < sel {
			key = "Up"
		}
		p.keys(key)
		p.waitScreen("the selection moved", func(n string) bool { _, now := lineWith(fleetView(n), "▸ "); return now != sel })
	}
	t.Fatalf("could not select %q:\n%s", title, p.screen())
}

// waitForLine waits until path has a line holding sub, and returns that line.
func waitForLine(t *testing.T, path, sub string) string {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		b, _ := os.ReadFile(path)
		if l, at := lineWith(string(b), sub); at >= 0 {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in %s", sub, path)
		}
		// pi appends each entry to the session file as it happens: a read
		// every 100 ms sees it soon, and reading a small file costs nothing.
		time.Sleep(100 * time.Millisecond)
	}
}

// sessionNamed is the session of the parent's task named name.
func sessionNamed(t *testing.T, e *env, parentID, name string) string {
	t.Helper()
	list, out := e.cli().json(0, "", "list", "--kind", "session", "--parent-session", parentID)
	for _, r := range list.Runs {
		if r.Name == name {
			return r.ID
		}
	}
	t.Fatalf("no session %q of %s:\n%s", name, parentID, out)
	return ""
}

// TestFleetCommandsAnswerWithoutTerminal: `/subagents` and
// `/subagents-doctor` in a print run and a JSON run of a real pi (docs/fleet.md,
// "Outside the terminal UI"). pi has no UI there and drops notifications:
// before, both commands answered nothing. A print run writes the answer on
// stderr (pi keeps stdout for the model's answer); a JSON run prints it on
// stdout as the session entry it appends (entry_appended, customType
// subagents-answer), which the model never reads.
func TestFleetCommandsAnswerWithoutTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("c-listed", finalizeStep("listed-task: the folder is tidy"))
	e.model.Script("p-listed",
		call("task", map[string]any{"op": "start", "subagent_type": "scout", "description": "listed-task", "prompt": "[[script:c-listed]] Look around."}),
		scriptedmodel.Step{Text: "Delegated."},
	)
	first := e.startExt([]string{"-p"}, "[[script:p-listed]] Delegate the look.")
	if code := first.exitCode(t); code != 0 {
		t.Fatalf("pi -p exited %d:\n%s", code, first.stderr.String())
	}
	files, _ := filepath.Glob(filepath.Join(e.agentDir, "sessions", "*", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files: %v", files)
	}
	listed := sessionNamed(t, e, sessionIDOf(t, files[0]), "listed-task")

	for _, c := range []struct {
		args    []string
		command string
		// What the answer holds: the session's run, or the doctor's totals.
		want []string
	}{
		{[]string{"-c", "-p"}, "/subagents", []string{listed, "completed · listed-task"}},
		{[]string{"-c", "--mode", "json"}, "/subagents", []string{listed, "completed · listed-task"}},
		{[]string{"-p"}, "/subagents-doctor", []string{"subagents doctor: ", "✓ pi: pi "}},
		{[]string{"--mode", "json"}, "/subagents-doctor", []string{"subagents doctor: ", "✓ pi: pi "}},
	} {
		p := e.startExt(c.args, c.command)
		if code := p.exitCode(t); code != 0 {
			t.Fatalf("pi %v %s exited %d:\n%s", c.args, c.command, code, p.stderr.String())
		}
		var said string
		if slices.Contains(c.args, "json") {
			said = answerEntry(t, p.parentPi, strings.TrimPrefix(c.command, "/"))
		} else {
			said = p.stderr.String()
			if out := p.events.String(); strings.Contains(out, c.want[0]) {
				t.Errorf("pi %v %s put its answer on stdout, which pi keeps for the model's:\n%s", c.args, c.command, out)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(said, w) {
				t.Errorf("pi %v %s answered:\n%s\nwhich lacks %q", c.args, c.command, said, w)
			}
		}
	}
	if n := len(e.model.RequestsFor("")); n != 0 {
		t.Errorf("the commands made %d model calls without a script", n)
	}
}

// answerEntry is the text of the one subagents-answer entry of command
// that a JSON run printed (its entry_appended event).
func answerEntry(t *testing.T, p *parentPi, command string) string {
	t.Helper()
	var texts []string
	for _, line := range strings.Split(p.events.String(), "\n") {
		var ev struct {
			Type  string `json:"type"`
			Entry struct {
				Type       string `json:"type"`
				CustomType string `json:"customType"`
				Data       struct {
					Command string `json:"command"`
					Text    string `json:"text"`
				} `json:"data"`
			} `json:"entry"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Type != "entry_appended" || ev.Entry.CustomType != "subagents-answer" {
			continue
		}
		if ev.Entry.Data.Command != command {
			t.Fatalf("an answer of %q where %q answered: %s", ev.Entry.Data.Command, command, line)
		}
		texts = append(texts, ev.Entry.Data.Text)
	}
	if len(texts) != 1 {
		t.Fatalf("%d answers of %s in the JSON run, want 1:\n%s", len(texts), command, p.events.String())
	}
	return texts[0]
}

// TestFleetViewListsEachScheduleRunOnce: a schedule of the folder ran four
// times (triggers, each a delegation of one task and that task's session).
// `/subagents` lists the schedule with its three latest runs beneath it, one
// row each, named by the schedule and the time each fired (told apart),
// and one row that counts the earlier run; a run's row takes its task's
// result, and enter on the count opens the schedule (docs/fleet.md). Before,
// each run was two rows named after the agent, under This folder.
func TestFleetViewListsEachScheduleRunOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.startWorker(shared.client)
	e.model.Script("c-fire", finalizeStep("fire: the day is reviewed"))
	sched := scheduleID("fleet-runs")
	e.mustSchedule(nil, "create", "--id", sched, "--every", "1h", "--overlap", "allow_all", "--name", "hourly review", "[[script:c-fire]] Review the day.")
	t.Cleanup(func() { e.scheduleCmd(nil, "delete", sched) })
	for range 4 {
		e.mustSchedule(nil, "trigger", sched)
	}
	e.waitForSchedule(nil, sched, "four finished runs", func(s client.ScheduleItem) bool { n, idle := finishedRuns(s); return n == 4 && idle })
	e.model.Script("p-idle", scriptedmodel.Step{Text: "Ready.", Repeat: true})
	// Tall enough for the four results delivered at the start (about ten
	// lines each) and the answer: with 40 lines, results that came after
	// "Ready." pushed it off the screen before a look found it.
	p := e.startTmuxPi(filepath.Join(t.TempDir(), "parent.jsonl"), 120, 80, "[[script:p-idle]] Hello.")
	p.waitFor("Ready.")
	p.text("/subagents")
	p.keys("Enter")
	var asked time.Time
	view := fleetView(p.waitScreen("the schedule with its runs", func(s string) bool {
		if !strings.Contains(s, "Subagents · this session and work") {
			// The command's completion list took the first Enter.
			if strings.Contains(s, "/subagents") && !strings.Contains(s, "This session") {
				p.keys("Enter")
			}
			return false
		}
		if strings.Count(s, " · hourly review") == 3 && strings.Contains(s, "… 1 earlier run") {
			return true
		}
		// Temporal's listing lags a run's end by a moment: ask again.
		if time.Since(asked) > 2*time.Second {
			asked = time.Now()
			p.keys("r")
		}
		return false
	}))
	t.Logf("a schedule's runs in the view:\n%s", view)
	var titles []string
	for _, l := range strings.Split(view, "\n") {
		if !strings.Contains(l, " · hourly review") {
			continue
		}
		if sectionOf(view, strings.TrimSpace(l)) != "Schedules of this folder" || !strings.Contains(l, "completed") || !strings.Contains(l, " ago ") || !strings.Contains(l, " delegation ") {
			t.Errorf("a run's row: %q", l)
		}
		title := strings.TrimSpace(strings.TrimLeft(l, " ▸✓"))
		titles = append(titles, title[:strings.Index(title, " · hourly review")+len(" · hourly review")])
	}
	if len(slices.Compact(slices.Sorted(slices.Values(titles)))) != 3 {
		t.Errorf("the runs are not told apart: %q", titles)
	}
	// The kind column of a task's own row (its cell is ten wide).
	if strings.Contains(view, " session     ") {
		t.Errorf("a run's task is listed as a row of its own:\n%s", view)
	}

	// A run's row is its task's: its result is taken from the task's session.
	selectRow(t, p, titles[0])
	p.keys("t")
	p.waitFor("Put the result of fired ")
	// The count of the earlier run opens the schedule.
	selectRow(t, p, "… 1 earlier run")
	p.keys("Enter")
	p.waitFor("Subagents › schedule hourly review", "Fired 4 times", "Recent runs")
	p.keys("Escape")
	p.waitFor("esc close")
}
