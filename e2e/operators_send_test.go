package e2e

import (
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestOperatorsSendSaysWhichTurn: `subagents send` says which turn of which
// session took the prompt, where it stands, and how to wait for it, both
// for a session between turns (resumed through a delegation: it printed
// "started delegation-…" and the task) and for one running a turn (the
// prompt queued behind it).
func TestOperatorsSendSaysWhichTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("first", finalizeStep("first done"))
	e.model.Script("second", finalizeStep("second done"))
	e.model.Script("slow", scriptedmodel.Step{Hang: true})
	e.model.Script("after", finalizeStep("after done"))
	e.startWorker(shared.client)
	c := e.cli()

	started, _ := c.json(0, "", "start", "--model", scriptedmodel.ModelRef, "[[script:first]] Begin.")
	id := started.Items[0].TaskID
	if done, out := c.json(0, "", "wait", "--timeout", "60s", id); done.Items[0].Output != "first done" {
		t.Fatalf("first turn: %s", out)
	}

	code, stdout, stderr := c.run("", "send", id, "[[script:second]] Go on.")
	t.Logf("send to a session between turns printed:\n%s", stdout)
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], "session "+id+": turn 2 accepted, ") ||
		lines[1] != "wait for it: subagents wait "+id || strings.Contains(stdout, "started delegation-") {
		t.Fatalf("send to a session between turns: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if done, out := c.json(0, "", "wait", "--timeout", "60s", id); done.Items[0].Turn != 2 || done.Items[0].Output != "second done" {
		t.Fatalf("the turn send announced: %s", out)
	}

	slow, _ := c.json(0, "", "start", "--model", scriptedmodel.ModelRef, "[[script:slow]] Take your time.")
	sid := slow.Items[0].TaskID
	c.json(4, "", "wait", "--timeout-ms", "1500", sid) // its turn runs
	code, stdout, stderr = c.run("", "send", sid, "[[script:after]] Then this.")
	t.Logf("send to a running session printed:\n%s", stdout)
	want := "session " + sid + ": turn 2 accepted, queued behind turn 1\nwait for it: subagents wait " + sid + "\n"
	if code != 0 || !strings.HasPrefix(stdout, want) {
		t.Fatalf("send to a running session: exit %d\nstdout:\n%s\nwant it to begin with:\n%s\nstderr:\n%s", code, stdout, want, stderr)
	}
	c.json(0, "", "cancel", sid)
	if done, out := c.json(0, "", "wait", "--timeout", "60s", sid); done.Items[0].Turn != 2 || done.Items[0].Output != "after done" {
		t.Fatalf("the queued turn: %s", out)
	}
}
