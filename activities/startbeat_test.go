package activities

import (
	"context"
	"os"
	"path/filepath"
	"slices"
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

// TestFallbackRunsHeartbeatThroughout: a turn whose first two models fail
// at once (a rate limit, an overload) runs three children, each over long
// before a heartbeat interval passed. The attempt heartbeats as each run
// begins and between runs, and the heartbeats name the models given up on.
// Before, no run lived to its first tick: under load the turn sent no
// heartbeat for longer than the heartbeat timeout (5 s), the server retried
// it while it ran, and the retry's result lost the fallbacks.
func TestFallbackRunsHeartbeatThroughout(t *testing.T) {
	// Longer than the whole turn: every heartbeat seen is one a phase's
	// start sent.
	const interval = time.Minute
	h := newHarness(t, func(cfg *Config) { cfg.HeartbeatInterval = interval })
	t.Cleanup(h.acts.Close)
	fallbackScripts(h.model)
	in := h.input("[[script:limited]] go")
	in.FallbackModels = []string{scriptedmodel.SecondModelRef, scriptedmodel.ThirdModelRef}

	// Every heartbeat call: the SDK's test environment sends only the
	// first of each 30 s.
	var mu sync.Mutex
	var beats []api.Progress
	h.acts.recordHeartbeat = func(ctx context.Context, details ...any) {
		if p, ok := details[0].(api.Progress); ok {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
		activity.RecordHeartbeat(ctx, details...)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetTestTimeout(time.Minute)
	env.RegisterActivity(h.acts.RunPi)
	val, err := env.ExecuteActivity(h.acts.RunPi, in)
	if err != nil {
		t.Fatal(err)
	}
	var res api.RunPiResult
	if err := val.Get(&res); err != nil || res.Output != "answered by the third" || len(res.Fallbacks) != 2 {
		t.Fatalf("result %+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var named []int
	for _, b := range beats {
		named = append(named, len(b.Fallbacks))
	}
	// As each of the three runs begins (naming 0, 1 and 2 models given up
	// on), and between them.
	if !slices.Contains(named, 0) || !slices.Contains(named, 1) || !slices.Contains(named, 2) {
		t.Fatalf("heartbeats naming %v fallbacks; want one as each run begins", named)
	}
}
