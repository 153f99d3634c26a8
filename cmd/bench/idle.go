package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/google/uuid"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
)

// idleWarmUp is how many sessions warm a model's worker up (its caches,
// pools and code) before its baseline; idleSends how many sessions each
// kind of send reaches.
const idleWarmUp, idleSends = 200, 10

// idleModel is what one session model's idle sessions cost (idleSessions).
type idleModel struct {
	version    int
	started    time.Duration
	rss0, rss1 int64
	db0, db1   int64
	// running of total: the sessions' workflows (warm-up included) that
	// visibility counts as Running.
	running, total int64
	// timers are the timers the sessions' runs hold (TimerStarted without
	// TimerFired or TimerCanceled in an open run's history), holding the
	// sessions that hold one.
	timers, holding int
	idle            time.Duration
	// The raw `send` update (accepted, turn ended), version 4 only; for
	// version 5, refused is its error.
	update, updateTurn []time.Duration
	refused            error
	// The client library's Send (returned, turn ended: Wait on it).
	send, sendTurn []time.Duration
}

// idleSessions holds n sessions of each model side by side whose first turn
// (the stub child) ended and which take a `send` for their idle TTL (an
// hour by default): version 4's, started before the upgrade, as open
// workflows that wait with a timer; version 5's (api.CurrentVersion) as
// runs closed with their turn that a send reopens (SubagentSendUntil).
func (b *bench) idleSessions(n int) (string, error) {
	const cacheSize = 1000
	var models []idleModel
	for _, v := range []int{4, api.CurrentVersion} {
		m, err := b.idleModel(v, n, cacheSize)
		if err != nil {
			return "", fmt.Errorf("idle sessions of version %d: %w", v, err)
		}
		models = append(models, m)
	}
	old, cur := models[0], models[1]
	var r strings.Builder
	r.WriteString("\n## Idle sticky sessions\n\n")
	if len(sections) > 0 {
		// Run apart from a whole bench: say how (as the plans section).
		fmt.Fprintf(&r, "Measured apart from the rest of this page: `go run ./cmd/bench %s` (%s, same machine).\n\n", benchArgs(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	}
	fmt.Fprintf(&r, "For each session model, %d sessions (stub child, started 64 at a time) each ran its first turn and takes a `send` for its idle TTL (an hour by default). ", n)
	fmt.Fprintf(&r, "Version 4 (a session started before the upgrade to version 5, input `Version: 4`) waits for it as an open workflow: Running, with a timer for its idle hour and, while it is in the worker's cache, its workflow state; ")
	fmt.Fprintf(&r, "version %d (`api.CurrentVersion`) closes its run with its turn and records until when it takes a send (SubagentSendUntil), and a send reopens it as the next run of its workflow ID (`SendToSession`). ", cur.version)
	fmt.Fprintf(&r, "Each model runs on a `subagents worker` process of its own (`--workflow-cache %d`: version 4's sessions beyond it are evicted and cost the worker nothing until a `send`), measured by its resident memory after a warm-up of %d sessions; version 4 first, then version %d, on one embedded server. ", cacheSize, idleWarmUp, cur.version)
	fmt.Fprintf(&r, "The sends go to the sessions that have waited the longest (evicted from version 4's cache), %d of each kind, one after another. One run, on a machine others share: the figures are noisy. "+
		"Version 4's memory per session falls as the sessions outnumber its cache (here it holds up to %d of %d); version %d's closed runs are in no worker's cache and hold no timer.\n\n", idleSends, cacheSize, n+idleWarmUp, cur.version)
	fmt.Fprintf(&r, "| figure | version 4 (stays open) | version %d (closes with its turn) | ratio 5/4 | target |\n| --- | --- | --- | --- | --- |\n", cur.version)
	row := func(figure, a, b, ratio, target string) {
		fmt.Fprintf(&r, "| %s | %s | %s | %s | %s |\n", figure, a, b, ratio, target)
	}
	ratio := func(a, b float64) string {
		if a <= 0 || b < 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", b/a)
	}
	rate := func(m idleModel) float64 { return float64(n) / m.started.Seconds() }
	row(fmt.Sprintf("%d sessions started and their first turn ended: wall, sessions/s", n), fmt.Sprintf("%s, %.0f/s", ms(old.started), rate(old)),
		fmt.Sprintf("%s, %.0f/s", ms(cur.started), rate(cur)), ratio(rate(old), rate(cur))+" (sessions/s)", "")
	row("worker resident memory: before, after", fmt.Sprintf("%d MiB, %d MiB", old.rss0>>20, old.rss1>>20), fmt.Sprintf("%d MiB, %d MiB", cur.rss0>>20, cur.rss1>>20), "", "")
	perSession := func(m idleModel) float64 { return float64(m.rss1-m.rss0) / float64(n) / 1024 }
	row("worker memory per idle session", fmt.Sprintf("%.1f KB", perSession(old)), fmt.Sprintf("%.1f KB", perSession(cur)), ratio(perSession(old), perSession(cur)), "≤ 20 KB")
	dbPer := func(m idleModel) float64 { return float64(m.db1-m.db0) / float64(n) / 1024 }
	row("database bytes per session (SQLite file and WAL)", fmt.Sprintf("%.1f KB", dbPer(old)), fmt.Sprintf("%.1f KB", dbPer(cur)), ratio(dbPer(old), dbPer(cur)), "")
	row("sessions' workflows Running (visibility: `ExecutionStatus=\"Running\" AND WorkflowType=\"Session\"` on the model's task queue, warm-up included)",
		fmt.Sprintf("%d of %d", old.running, old.total), fmt.Sprintf("%d of %d", cur.running, cur.total), "", "")
	row(fmt.Sprintf("timers the %d sessions hold (an open run's TimerStarted without TimerFired or TimerCanceled, from their histories)", n),
		fmt.Sprintf("%d (in %d sessions)", old.timers, old.holding), fmt.Sprintf("%d (in %d sessions)", cur.timers, cur.holding), "", "")
	p50 := func(d []time.Duration) float64 { return float64(pct(d, 0.5)) }
	lat := func(d []time.Duration) string { return ms(pct(d, 0.5)) + " / " + ms(pct(d, 1)) }
	refused := "-"
	if cur.refused != nil {
		refused = "refused: " + firstLine(cur.refused.Error())
	}
	row(fmt.Sprintf("raw `send` update (Temporal's `update send`) to a session idle for %s / %s, until accepted (p50 / max of %d)", old.idle.Round(time.Second), cur.idle.Round(time.Second), idleSends),
		lat(old.update), refused, "", "")
	row("the same, until its turn ended (p50 / max)", lat(old.updateTurn), "-", "", "")
	row(fmt.Sprintf("the client library's `Send` (as `subagents send` sends) to another such session, until it returned (p50 / max of %d)", idleSends),
		lat(old.send), lat(cur.send), ratio(p50(old.send), p50(cur.send)), "")
	row("the same, until its turn ended (`Wait` on what `Send` returned; p50 / max)", lat(old.sendTurn), lat(cur.sendTurn), ratio(p50(old.sendTurn), p50(cur.sendTurn)), "")
	return r.String(), nil
}

// idleModel starts n sessions of workflow code version on a `subagents
// worker` process of their own and measures them (idleSessions).
func (b *bench) idleModel(version, n, cacheSize int) (idleModel, error) {
	m := idleModel{version: version}
	queue := fmt.Sprintf("bench-idle-v%d", version)
	w := exec.Command(b.bin, "worker", "--address", b.address, "--task-queue", queue, "--data-dir", filepath.Join(b.dataDir, queue),
		"--pi", b.stubPath, "--workflow-cache", strconv.Itoa(cacheSize), "--log-level", "error")
	if err := w.Start(); err != nil {
		return m, err
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
	// As the client library starts a session (its search attributes and
	// memo), directly, with the model's version.
	startMany := func(k int) ([]string, time.Duration, error) {
		ids := make([]string, k)
		for i := range ids {
			ids[i] = uuid.NewString()
		}
		wall, err := inFlight(k, 64, func(i int) error {
			in := api.SessionInput{SessionID: ids[i], Prompt: "stub", Cwd: b.workDir, Name: "idle", Version: version}
			opts := sdkclient.StartWorkflowOptions{ID: in.SessionID, TaskQueue: queue,
				TypedSearchAttributes: api.SessionAttributes(api.AgentName(""), b.workDir, api.StateRunning, ""),
				Memo:                  api.SessionMemo(api.TaskSpec{Name: in.Name, Prompt: in.Prompt, Cwd: b.workDir}, "", "")}
			if _, err := b.tc.ExecuteWorkflow(b.ctx, opts, api.SessionWorkflowName, in); err != nil {
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
	if _, _, err := startMany(idleWarmUp); err != nil {
		return m, err
	}
	m.rss0, m.db0 = activities.ResidentBytes(w.Process.Pid), dbBytes()
	began := time.Now()
	ids, wall, err := startMany(n)
	if err != nil {
		return m, err
	}
	m.started = wall
	m.rss1, m.db1 = activities.ResidentBytes(w.Process.Pid), dbBytes()
	if m.running, m.total, err = b.countRunning(queue, int64(n+idleWarmUp)); err != nil {
		return m, err
	}
	if m.timers, m.holding, err = b.openTimers(ids); err != nil {
		return m, err
	}
	// Sends to the sessions that have waited the longest: the raw update
	// to the first ones, the client library's Send to the next.
	m.idle = time.Since(began)
	for i := range idleSends {
		acc, turn, err := b.sendUpdate(ids[i])
		if version >= 5 {
			if err == nil {
				return m, fmt.Errorf("the send update to version %d's closed session %s was accepted", version, ids[i])
			}
			m.refused = err
			break
		}
		if err != nil {
			return m, err
		}
		m.update, m.updateTurn = append(m.update, acc), append(m.updateTurn, turn)
	}
	for _, id := range ids[idleSends : 2*idleSends] {
		t0 := time.Now()
		env, err := c.Send(b.ctx, client.SendRequest{TaskID: id, Prompt: "stub again"})
		if err != nil {
			return m, err
		}
		m.send = append(m.send, time.Since(t0))
		done, err := c.Wait(b.ctx, env.DelegationID, time.Minute)
		if err != nil {
			return m, err
		}
		if !done.Done || len(done.Items) != 1 || done.Items[0].Status != string(api.StateCompleted) {
			return m, fmt.Errorf("send to idle session %s: %+v", id, done)
		}
		m.sendTurn = append(m.sendTurn, time.Since(t0))
	}
	return m, nil
}

// sendUpdate sends a turn to session id with Temporal's raw `send` update
// and waits for it: how long until it was accepted, and until it ended.
func (b *bench) sendUpdate(id string) (accepted, ended time.Duration, err error) {
	t0 := time.Now()
	h, err := b.tc.UpdateWorkflow(b.ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: api.SendUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
		Args: []any{api.SendRequest{Prompt: "stub again"}},
	})
	if err != nil {
		return 0, 0, err
	}
	var acc api.SendAccepted
	if err := h.Get(b.ctx, &acc); err != nil {
		return 0, 0, err
	}
	accepted = time.Since(t0)
	wh, err := b.tc.UpdateWorkflow(b.ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: api.WaitUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
		Args: []any{api.WaitRequest{Turn: acc.Turn}},
	})
	if err != nil {
		return 0, 0, err
	}
	var st api.SessionStatus
	if err := wh.Get(b.ctx, &st); err != nil {
		return 0, 0, err
	}
	if st.LastTurn == nil || st.LastTurn.Turn != 2 || st.LastTurn.State != api.StateCompleted {
		return 0, 0, fmt.Errorf("send to an idle session: %+v", st.LastTurn)
	}
	return accepted, time.Since(t0), nil
}

// countRunning counts, once visibility has a record of each of the want
// sessions on queue and their count of Running ones settled, how many
// of them are Running.
func (b *bench) countRunning(queue string, want int64) (running, total int64, err error) {
	count := func(q string) (int64, error) {
		resp, err := b.tc.CountWorkflow(b.ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: q})
		return resp.GetCount(), err
	}
	of := fmt.Sprintf(` AND WorkflowType="%s" AND TaskQueue="%s"`, api.SessionWorkflowName, queue)
	last := int64(-1)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		if total, err = count(strings.TrimPrefix(of, " AND ")); err != nil {
			return 0, 0, err
		}
		if running, err = count(`ExecutionStatus="Running"` + of); err != nil {
			return 0, 0, err
		}
		if total == want && running == last || time.Now().After(deadline) {
			return running, total, nil
		}
		last = running
	}
}

// openTimers reads the sessions' histories (their latest runs): the timers
// they hold, and how many sessions hold one.
func (b *bench) openTimers(ids []string) (timers, holding int, err error) {
	open := make([]int, len(ids))
	_, err = inFlight(len(ids), 16, func(i int) error {
		it := b.tc.GetWorkflowHistory(b.ctx, ids[i], "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return err
			}
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_TIMER_STARTED:
				open[i]++
			case enumspb.EVENT_TYPE_TIMER_FIRED, enumspb.EVENT_TYPE_TIMER_CANCELED:
				open[i]--
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				// A closed run holds no timer.
				open[i] = 0
			}
		}
		return nil
	})
	for _, k := range open {
		timers += k
		if k > 0 {
			holding++
		}
	}
	return timers, holding, err
}
