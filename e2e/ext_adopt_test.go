package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestExtAdoptsResultsOfAKilledParent: a parent pi is killed (SIGKILL)
// while its delegation runs. Before, a new pi in the same folder got
// nothing and no hint; only `pi --session <its file>` got the result. Now
// a new pi's start says, in one line, that a result waits for nobody and
// how to take it; /subagents-adopt takes it into the new session, once;
// the killed session, resumed later, does not get it a second time.
func TestExtAdoptsResultsOfAKilledParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("quiet", scriptedmodel.Step{Text: "Hello."})
	e.model.Script("adopter", scriptedmodel.Step{Text: "The migration came back."})
	e.model.Script("resumed", scriptedmodel.Step{Text: "Going on."})
	killed := e.parentKilledMidDelegation("adopt", "adopted: 7 files migrated")
	killedID := sessionIDOf(t, killed)
	mark := filepath.Join(e.dataDir, "pending", killedID)
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the killed session's mark: %v", err)
	}

	// A print run in the folder says so on stderr, and takes nothing.
	quiet := e.startExt([]string{"--mode", "json", "--session", filepath.Join(t.TempDir(), "quiet.jsonl")}, "[[script:quiet]] Hi.")
	if code := quiet.exitCode(t); code != 0 {
		t.Fatalf("print run exited %d", code)
	}
	hint := "1 delegation of an earlier pi session in this folder waits for nobody"
	if s := quiet.stderr.String(); !strings.Contains(s, hint) || !strings.Contains(s, "/subagents-adopt takes its result into this session") || strings.Count(s, "for nobody") != 1 {
		t.Fatalf("the print run's stderr:\n%s", s)
	}
	if n := e.openDelegations(killedID); n != 1 {
		t.Fatalf("%d open delegations of the killed session after the print run, want 1 (it takes nothing)", n)
	}

	// An interactive session (RPC: its notifications are events) says it
	// once at its start and takes the result when asked.
	adopterFile := filepath.Join(t.TempDir(), "adopter.jsonl")
	p := e.startExt([]string{"--mode", "rpc", "--session", adopterFile}, "")
	p.waitEvent(t, `"method":"notify"`, hint)
	p.send(t, map[string]any{"type": "prompt", "message": "/subagents-adopt"})
	p.waitEvent(t, `"method":"notify"`, "took 1 delegation of "+killedID+" into this session")
	p.waitEvent(t, `"type":"message_end"`, `"customType":"subagents-result"`, "adopted: 7 files migrated")
	p.send(t, map[string]any{"type": "prompt", "message": "[[script:adopter]] What came back?"})
	waitEventCount(t, p.parentPi, "agent_settled", 1)
	reqs := e.model.RequestsFor("adopter")
	if len(reqs) != 1 || !strings.Contains(strings.Join(userTexts(reqs[0]), "\n"), "adopted: 7 files migrated") {
		t.Fatalf("the adopting session's model did not get the result (%d requests)", len(reqs))
	}
	if n := countIn(p.parentPi, `"method":"notify"`, "for nobody"); n != 1 {
		t.Errorf("the hint came %d times, want once", n)
	}
	extWaitFor(t, "the adopted result acknowledged", func() bool { return e.openDelegations(killedID) == 0 })
	extWaitFor(t, "the killed session's mark gone", func() bool { _, err := os.Stat(mark); return os.IsNotExist(err) })
	p.kill()
	<-p.done
	var delivered int
	for _, entry := range sessionEntries(t, adopterFile) {
		if entry["type"] == "custom_message" && entry["customType"] == "subagents-result" {
			delivered++
		}
	}
	if delivered != 1 {
		t.Errorf("the adopting session holds %d results, want 1", delivered)
	}

	// The killed session, resumed, does not get it again; a new pi hears of nothing.
	resumed := e.startParent("json", killed, "[[script:resumed]] Go on.")
	resumed.wait(t)
	for _, r := range e.model.RequestsFor("resumed") {
		if strings.Contains(strings.Join(userTexts(r), "\n"), "adopted: 7 files migrated") {
			t.Fatal("the killed session got the adopted result a second time")
		}
	}
	after := e.startExt([]string{"--mode", "json", "--session", filepath.Join(t.TempDir(), "after.jsonl")}, "[[script:quiet]] Hi.")
	if code := after.exitCode(t); code != 0 || strings.Contains(after.stderr.String(), "for nobody") {
		t.Fatalf("a pi after the adoption (exit %d) said:\n%s", code, after.stderr.String())
	}
}
