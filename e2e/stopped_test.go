package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// The local service stopped by the user stays stopped (issue 39, "Stopped
// means stopped"): only a delegation or an explicit command starts it, and
// results that wait for a pi wait until it runs. These are the start-up
// paths of a pi that delegates nothing; TestStoppedServiceStaysStopped
// (schedule_checks_test.go) is a folder's schedules.

// expectStopped fails the test when w's service runs: a `subagents dev`
// process of its data dir, or anything answering on its socket.
func (w localWorld) expectStopped(t *testing.T, after string) {
	t.Helper()
	if procs := w.devProcesses(); len(procs) != 0 {
		t.Fatalf("%s: the stopped service was started (dev processes %v)", after, procs)
	}
	if c, err := net.Dial("unix", filepath.Join(w.dataDir, "subagents.sock")); err == nil {
		_ = c.Close()
		t.Fatalf("%s: the stopped service's socket answers", after)
	}
}

// stopLocal stops w's service as a person does, with `subagents stop`.
func (e *env) stopLocal(w localWorld, env []string) {
	e.t.Helper()
	if code, stdout, stderr := runSubagentsIn(e.t, e.workDir, env, "stop"); code != 0 {
		e.t.Fatalf("subagents stop: exit %d\n%s\n%s", code, stdout, stderr)
	}
	w.expectStopped(e.t, "subagents stop")
}

// resultCount is how often answer is in the last request of script: how
// many times a result reached that pi's model.
func (e *env) resultCount(script, answer string) int {
	e.t.Helper()
	reqs := e.model.RequestsFor(script)
	if len(reqs) == 0 {
		e.t.Fatalf("the model was never asked for %s", script)
	}
	n := 0
	for _, u := range userTexts(reqs[len(reqs)-1]) {
		n += strings.Count(u, answer)
	}
	return n
}

// TestLeftoversOfEarlierSessionsStartNothing: a parent pi is killed while
// its delegation runs (its mark stays in the data dir: a session that
// waits for nobody), and the user stops the service. Before, a new pi in
// that folder, which delegated nothing, asked the service what the dead
// session left, and started it to ask. Now it asks only a running
// service: the service stays stopped and nothing is said. Once the user
// starts it (`subagents dev`), a new pi names the leftovers, and the dead
// session, resumed, gets its result once.
func TestLeftoversOfEarlierSessionsStartNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.newLocalWorld()
	env := append(e.parentEnv(), e.parentEnvExtra...)
	e.model.Script("stray-hi", scriptedmodel.Step{Text: "Hi."})
	e.model.Script("stray-resumed", scriptedmodel.Step{Text: "The migration is back."})
	const answer = "stray: 7 files migrated"
	killed := e.parentKilledMidDelegation("stray", answer)
	mark := filepath.Join(w.dataDir, "pending", sessionIDOf(t, killed))
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the killed session's mark: %v", err)
	}
	e.stopLocal(w, env)

	quiet := e.startExt([]string{"--mode", "json", "--session", filepath.Join(t.TempDir(), "quiet.jsonl")}, "[[script:stray-hi]] Hi.")
	if code := quiet.exitCode(t); code != 0 {
		t.Fatalf("the pi exited %d:\n%s", code, quiet.stderr.String())
	}
	w.expectStopped(t, "a pi that delegated nothing, in a folder with a dead session's mark")
	if s := quiet.stderr.String(); strings.Contains(s, "for nobody") {
		t.Fatalf("with the service stopped the pi said:\n%s", s)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the dead session's mark went with the service stopped: %v", err)
	}

	e.startLocalDev(w, env)
	named := e.startExt([]string{"--mode", "json", "--session", filepath.Join(t.TempDir(), "named.jsonl")}, "[[script:stray-hi]] Hi.")
	if code := named.exitCode(t); code != 0 || !strings.Contains(named.stderr.String(), "1 delegation of an earlier pi session in this folder waits for nobody") {
		t.Fatalf("with the service running, a new pi (exit %d) said:\n%s", code, named.stderr.String())
	}
	e.startParent("json", killed, "[[script:stray-resumed]] Go on.").wait(t)
	if n := e.resultCount("stray-resumed", answer); n != 1 {
		t.Fatalf("the resumed session got its result %d times, want once", n)
	}
}

// TestPendingResultsWaitForTheService: a parent killed while its
// delegation runs, then the service stopped (`subagents stop`). Before,
// the session's next start (`pi --session FILE`, as `pi -c`) found that
// it waits for results and started the service to get them. Now the
// results wait: the start starts nothing and its model gets nothing. Once
// the service is started by hand, the session's next start gets the result
// exactly once; after that nothing waits, and a start with the service
// stopped again starts nothing.
func TestPendingResultsWaitForTheService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.newLocalWorld()
	env := append(e.parentEnv(), e.parentEnvExtra...)
	const answer = "long job: 7 files migrated"
	e.model.Script("parent-pend2", scriptedmodel.Step{Text: "Nothing yet."})
	e.model.Script("parent-pend3", scriptedmodel.Step{Text: "The migration result is in."})
	e.model.Script("parent-pend4", scriptedmodel.Step{Text: "Nothing new."})
	sessionFile := e.parentKilledMidDelegation("pend", answer)
	e.stopLocal(w, env)
	marker := filepath.Join(w.dataDir, "pending", sessionIDOf(t, sessionFile))
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no mark that the session waits for results: %v", err)
	}

	e.startParent("json", sessionFile, "[[script:parent-pend2]] Go on.").wait(t)
	w.expectStopped(t, "a resumed session that waits for results")
	if n := e.resultCount("parent-pend2", answer); n != 0 {
		t.Fatalf("the session got the result %d times with the service stopped", n)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the session's mark went while its result waits: %v", err)
	}

	e.startLocalDev(w, env)
	e.startParent("json", sessionFile, "[[script:parent-pend3]] Anything new?").wait(t)
	if n := e.resultCount("parent-pend3", answer); n != 1 {
		t.Fatalf("once the service runs, the session got the result %d times, want once", n)
	}

	// Nothing waits now: the mark is gone, and a start with the service
	// stopped starts nothing.
	e.stopLocal(w, env)
	e.startParent("json", sessionFile, "[[script:parent-pend4]] Anything else?").wait(t)
	w.expectStopped(t, "a start that waits for nothing")
	if got := deliveredResults(t, sessionFile); len(got) != 1 {
		t.Fatalf("the session holds %d results (%v), want the one", len(got), got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the mark outlived the delivery")
	}
}
