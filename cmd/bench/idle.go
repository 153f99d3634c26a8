package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/google/uuid"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
)

// idleSessions starts n sessions whose first turn (the stub child) ends
// and which then wait for a `send`, as sticky sessions do for an hour by
// default, on a `subagents worker` process of their own whose workflow cache
// holds fewer than n. It reports that worker's memory per idle session, the
// database bytes per session, and how long a `send` to a long-idle session
// takes.
func (b *bench) idleSessions(n int) (string, error) {
	const queue, cacheSize = "bench-idle", 1000
	w := exec.Command(b.bin, "worker", "--address", b.address, "--task-queue", queue, "--data-dir", filepath.Join(b.dataDir, "idle"),
		"--pi", b.stubPath, "--workflow-cache", strconv.Itoa(cacheSize), "--log-level", "error")
	if err := w.Start(); err != nil {
		return "", err
	}
	defer func() { _ = w.Process.Signal(os.Interrupt); _ = w.Wait() }()
	c := &client.Client{Temporal: b.tc, TaskQueue: queue, Address: b.address}
	dbBytes := func() int64 {
		var sum int64
		for _, suffix := range []string{"", "-wal"} {
			if info, err := os.Stat(b.dbFile + suffix); err == nil {
				sum += info.Size()
			}
		}
		return sum
	}
	startMany := func(k int) ([]string, time.Duration, error) {
		ids := make([]string, k)
		for i := range ids {
			ids[i] = uuid.NewString()
		}
		wall, err := inFlight(k, 64, func(i int) error {
			in := api.SessionInput{SessionID: ids[i], Prompt: "stub", Cwd: b.workDir, Version: api.CurrentVersion}
			if _, err := b.tc.ExecuteWorkflow(b.ctx, sdkclient.StartWorkflowOptions{ID: in.SessionID, TaskQueue: queue}, api.SessionWorkflowName, in); err != nil {
				return err
			}
			env, err := c.Wait(b.ctx, in.SessionID, time.Minute)
			if err == nil && (len(env.Items) != 1 || env.Items[0].Status != string(api.StateCompleted)) {
				err = fmt.Errorf("session %s: %+v after its first turn", in.SessionID, env.Items)
			}
			return err
		})
		if err != nil {
			return nil, 0, err
		}
		return ids, wall, nil
	}
	// Warm up the worker (its caches, pools and code) before the baseline.
	if _, _, err := startMany(200); err != nil {
		return "", err
	}
	rss0, db0 := activities.ResidentBytes(w.Process.Pid), dbBytes()
	began := time.Now()
	ids, wall, err := startMany(n)
	if err != nil {
		return "", err
	}
	rss1, db1 := activities.ResidentBytes(w.Process.Pid), dbBytes()
	// Sends to the sessions that have waited the longest.
	idle := time.Since(began)
	var accepted, turn []time.Duration
	for i := range 10 {
		t0 := time.Now()
		h, err := b.tc.UpdateWorkflow(b.ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID: ids[i], UpdateName: api.SendUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
			Args: []any{api.SendRequest{Prompt: "stub again"}},
		})
		if err != nil {
			return "", err
		}
		var acc api.SendAccepted
		if err := h.Get(b.ctx, &acc); err != nil {
			return "", err
		}
		accepted = append(accepted, time.Since(t0))
		turnNo := acc.Turn
		wh, err := b.tc.UpdateWorkflow(b.ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID: ids[i], UpdateName: api.WaitUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
			Args: []any{api.WaitRequest{Turn: turnNo}},
		})
		if err != nil {
			return "", err
		}
		var st api.SessionStatus
		if err := wh.Get(b.ctx, &st); err != nil {
			return "", err
		}
		if st.LastTurn == nil || st.LastTurn.Turn != 2 || st.LastTurn.State != api.StateCompleted {
			return "", fmt.Errorf("send to an idle session: %+v", st.LastTurn)
		}
		turn = append(turn, time.Since(t0))
	}
	var r strings.Builder
	r.WriteString("\n## Idle sticky sessions\n\n")
	fmt.Fprintf(&r, "%d sessions (stub child, started 64 at a time: %s in all, %.0f sessions/s) each ran its first turn and now waits for a `send`, as a sticky session does for an hour by default. ",
		n, ms(wall), float64(n)/wall.Seconds())
	fmt.Fprintf(&r, "They run on a `subagents worker` process of their own (`--workflow-cache %d`: the sessions beyond it are evicted and cost the worker nothing until a `send`), measured by its resident memory after a warm-up of 200 sessions.\n\n", cacheSize)
	r.WriteString("| figure | value | target |\n| --- | --- | --- |\n")
	fmt.Fprintf(&r, "| worker resident memory: before, after | %d MiB, %d MiB | |\n", rss0>>20, rss1>>20)
	fmt.Fprintf(&r, "| worker memory per idle session | %.1f KB | ≤ 20 KB |\n", float64(rss1-rss0)/float64(n)/1024)
	fmt.Fprintf(&r, "| database bytes per session (SQLite file and WAL) | %.1f KB | |\n", float64(db1-db0)/float64(n)/1024)
	fmt.Fprintf(&r, "| `send` to a session idle for %s, until accepted (p50 / max of 10) | %s / %s | |\n", idle.Round(time.Second), ms(pct(accepted, 0.5)), ms(pct(accepted, 1)))
	fmt.Fprintf(&r, "| the same, until its turn ended (p50 / max) | %s / %s | |\n", ms(pct(turn, 0.5)), ms(pct(turn, 1)))
	return r.String(), nil
}
