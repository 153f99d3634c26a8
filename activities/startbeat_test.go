package activities

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestRunHeartbeatsWhileItsChildStarts: a run that waits for a child
// started early, still starting (seconds on a loaded machine), heartbeats
// all the while: its first heartbeat comes within two intervals, not after
// the child is ready. Before, a start slower than the heartbeat timeout
// (5 s) failed the turn with a heartbeat timeout under load.
func TestRunHeartbeatsWhileItsChildStarts(t *testing.T) {
	const startDelay = 1500 * time.Millisecond
	h := newHarness(t, func(cfg *Config) {
		// pi that takes startDelay to start, as on a busy machine.
		slow := filepath.Join(t.TempDir(), "slow-pi")
		script := "#!/bin/sh\nsleep 1.5\nexec " + cfg.Pi + " \"$@\"\n"
		if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg.Pi, cfg.EarlyStart = slow, true
	})
	t.Cleanup(h.acts.Close)
	h.model.Script("slow-start", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"started"}`)}})
	in := h.input("[[script:slow-start]] go")
	h.acts.StartEarly([]api.RunPiInput{in})

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetTestTimeout(time.Minute)
	var mu sync.Mutex
	var first time.Time
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
	})
	env.RegisterActivity(h.acts.RunPi)
	began := time.Now()
	val, err := env.ExecuteActivity(h.acts.RunPi, in)
	if err != nil {
		t.Fatal(err)
	}
	var res api.RunPiResult
	if err := val.Get(&res); err != nil || res.Output != "started" || !res.Early {
		t.Fatalf("result %+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if first.IsZero() || first.Sub(began) >= startDelay {
		t.Fatalf("first heartbeat %v after the run began, want within two intervals (the child took %v to start)", first.Sub(began), startDelay)
	}
}
