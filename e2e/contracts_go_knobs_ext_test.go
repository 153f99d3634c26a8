package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContractsTaskRetentionKnob (issue 31, item 5): the task contract's
// OHM_SUBAGENTS_TASK_RETENTION_MS in a real parent pi's environment is how
// long a finished task waits for a send: with 1000 its session closes
// within seconds of the result, where it waits an hour by default.
func TestContractsTaskRetentionKnob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.parentEnvExtra = []string{"OHM_SUBAGENTS_TASK_RETENTION_MS=1000"}
	e.startWorker(shared.client)
	e.model.Script("c-kept", finalizeStep("kept: done"))
	e.model.Script("parent-kept",
		call("task", map[string]any{"op": "start", "subagent_type": "scout", "description": "kept", "prompt": "[[script:c-kept]] Look."}),
		scriptedmodel.Step{Text: "Done."},
	)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", sessionFile, "[[script:parent-kept]] Look once.")
	p.wait(t)
	parentID := sessionIDOf(t, sessionFile)
	// One second of retention after the parent's ack, plus a workflow
	// task or two: far below the hour a session waits by default.
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, out := e.cli().json(0, "", "list", "--parent-session", parentID, "--kind", "session")
		if len(list.Runs) == 1 && !list.Runs[0].Open {
			if list.Runs[0].Status != "completed" {
				t.Fatalf("the closed session: %s", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the finished task's session is still open 20 s after its result: %s", out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestContractsOnUpdateThrottleKnob (issue 31, item 5): the task
// contract's OHM_SUBAGENTS_ONUPDATE_THROTTLE_MS in a real parent pi's
// environment bounds the progress updates of a running task call: at the
// most (60000), a five-second task sends one, where by default it sends one
// per change (its elapsed time changes every second).
func TestContractsOnUpdateThrottleKnob(t *testing.T) {
	t.Parallel()
	updates := func(t *testing.T, extra []string) int {
		e := newEnv(t)
		e.parentEnvExtra = extra
		e.startWorker(shared.client)
		slow := finalizeStep("slow: done")
		slow.DelayMS = 5000
		e.model.Script("c-slow", slow)
		e.model.Script("parent-slow",
			call("task", map[string]any{"op": "start", "subagent_type": "scout", "description": "slow", "prompt": "[[script:c-slow]] Take your time."}),
			scriptedmodel.Step{Text: "Done."},
		)
		p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-slow]] Run the slow one.")
		p.wait(t)
		return countIn(p, `"type":"tool_execution_update"`, `"toolName":"task"`)
	}
	// Each run its own subtest: a task queue and worker of its own, side
	// by side.
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		if n := updates(t, nil); n < 2 {
			t.Fatalf("by default a five-second task sent %d progress updates, want about one a second", n)
		}
	})
	t.Run("throttled", func(t *testing.T) {
		t.Parallel()
		if n := updates(t, []string{"OHM_SUBAGENTS_ONUPDATE_THROTTLE_MS=60000"}); n > 1 {
			t.Fatalf("throttled to one a minute, a five-second task sent %d progress updates", n)
		}
	})
}
