package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestFleetViewInATerminal: a parent pi in a real terminal delegates one
// task that finishes and two that run on; the widget above the editor
// counts the two running; `/subagents` lists all three at 120 and at 80
// columns; through the view a message goes to a running child (its model
// gets it as its next turn) and another child is cancelled (its status
// says so), and a run opens on its tasks and its transcript (docs/fleet.md).
func TestFleetViewInATerminal(t *testing.T) {
	e := newEnv(t)
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
		return strings.Contains(s, "cancel-target") && strings.Contains(s, "done-task")
	})
	checkRows(t, view, map[string]string{"done-task": "completed", "send-target": "running", "cancel-target": "running", "hourly review": "every 1h"})
	if l, _ := lineWith(fleetView(view), "hourly review"); !strings.Contains(l, "active") || !strings.Contains(l, "in 59m5") || !strings.Contains(view, "Schedules of this folder") {
		t.Fatalf("the schedule's row: %q\n%s", l, view)
	}
	if !strings.Contains(view, "r refresh · esc close") || !strings.Contains(view, "delegation") {
		t.Fatalf("the view at 120 columns lacks its kind column or its keys:\n%s", view)
	}
	t.Logf("the fleet view at 120 columns:\n%s", view)

	p.resize(80, 40)
	narrow := p.waitFor("↑↓ · enter open · s send · c cancel · t take · u UI · r refresh · esc close")
	checkRows(t, narrow, map[string]string{"done-task": "completed", "send-target": "running", "cancel-target": "running"})
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
	p.keys("Escape")
	p.waitScreen("the view closed", func(s string) bool { return !strings.Contains(s, "esc close") })
	// Nothing of the session runs any more: the widget is gone.
	p.waitScreen("no widget", func(s string) bool { return !strings.Contains(s, "running · ") })
	_ = after
}

// fleetView is the part of the screen the view draws: from its title on.
func fleetView(screen string) string {
	if i := strings.Index(screen, "─ Subagents"); i >= 0 {
		return screen[i:]
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
	for range 20 {
		s := fleetView(p.screen())
		_, at := lineWith(s, title)
		_, sel := lineWith(s, "▸ ")
		if at >= 0 && at == sel {
			return
		}
		if at < 0 || sel < 0 {
			t.Fatalf("no row %q or no selected row:\n%s", title, s)
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
