package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
)

// loadDelegations is 64 in `make test`; `make chaos` runs 1,000.
var loadDelegations = flag.Int("load-delegations", 64, "delegations of TestLoadStubDelegations")

// TestLoadStubDelegations keeps 64 one-task delegations in flight until
// -load-delegations of them are done, on a worker process whose child is
// the stub (internal/stubpi: a valid pi stream that finalizes at once; for
// load only). Every delegation must complete with its result, none may be
// dropped or run twice, and the worker's memory must stay bounded.
func TestLoadStubDelegations(t *testing.T) {
	// Not parallel: it loads the shared server with 64 delegations at once
	// (other tests' waits would feel it) and bounds the worker's memory.
	e := newEnv(t)
	stub := filepath.Join(t.TempDir(), "stubpi")
	if out, err := exec.Command("go", "build", "-o", stub, "../internal/stubpi").CombinedOutput(); err != nil {
		t.Fatalf("build the stub: %v\n%s", err, out)
	}
	w := exec.Command(subagentsBinary(t), "worker", "--address", shared.server.FrontendAddress(), "--namespace", shared.server.Namespace(),
		"--task-queue", e.taskQueue, "--data-dir", e.dataDir, "--pi", stub, "--log-level", "error")
	out := &syncBuffer{}
	w.Stdout, w.Stderr = out, out
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endWorker(t, w) })
	for !strings.Contains(out.String(), "worker polling task queue") {
		time.Sleep(20 * time.Millisecond)
	}
	c := &client.Client{Temporal: shared.client, TaskQueue: e.taskQueue, Address: shared.server.FrontendAddress()}

	const inFlight = 64
	n := *loadDelegations
	// Generous: the load runs at about 15 tasks a second on two cores; a
	// loaded CI machine may take several times as long.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*time.Second+time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		ids      = map[string]bool{}
		peakRSS  int64
		firstRSS int64
	)
	sem := make(chan struct{}, inFlight)
	errs := make(chan error, n)
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			req := client.StartRequest{Tasks: []api.TaskSpec{{Name: fmt.Sprintf("load-%d", i), Prompt: "stub", Cwd: e.workDir}}, IdleTTLSeconds: -1}
			env, err := c.Start(ctx, req)
			if err != nil {
				errs <- err
				return
			}
			done, err := c.Wait(ctx, env.DelegationID, 0)
			if err == nil && (!done.Done || done.Status != "completed" || len(done.Items) != 1 || done.Items[0].Output != "stub result" || done.Items[0].RunAttempt != 1) {
				err = fmt.Errorf("delegation %d: %+v", i, done)
			}
			mu.Lock()
			if ids[env.DelegationID] {
				err = fmt.Errorf("delegation ID %s given twice", env.DelegationID)
			}
			ids[env.DelegationID] = true
			rss := workerRSS(w.Process.Pid)
			if len(ids) == inFlight {
				firstRSS = rss
			}
			peakRSS = max(peakRSS, rss)
			mu.Unlock()
			errs <- err
		}()
	}
	for range inFlight {
		sem <- struct{}{}
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	wall := time.Since(start)
	if len(ids) != n {
		t.Fatalf("%d delegations completed, want %d", len(ids), n)
	}
	// After the first 64 the worker holds its steady state: whatever more
	// delegations add must not keep growing with their number.
	if firstRSS > 0 && peakRSS > 2*firstRSS+64<<20 {
		t.Fatalf("worker memory grew from %d MiB to %d MiB over %d delegations", firstRSS>>20, peakRSS>>20, n)
	}
	t.Logf("%d delegations, %d in flight: %s, %.1f tasks/s; worker resident memory %d MiB after the first %d, peak %d MiB",
		n, inFlight, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), firstRSS>>20, inFlight, peakRSS>>20)
	reportChaos(t, fmt.Sprintf("### Load\n\n`make chaos` (%s): %d one-task delegations with the stub child, %d in flight, on a `subagents worker` process: all completed once with their result, in %s (%.1f tasks/s); "+
		"the worker's resident memory was %d MiB after the first %d and peaked at %d MiB.",
		time.Now().UTC().Format("2006-01-02"), n, inFlight, wall.Round(time.Second), float64(n)/wall.Seconds(), firstRSS>>20, inFlight, peakRSS>>20))
}

// workerRSS is a process's resident memory in bytes.
func workerRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		return 0
	}
	return resident * int64(os.Getpagesize())
}
