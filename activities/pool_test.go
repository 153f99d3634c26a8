package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
)

// warmUp teaches the harness's pool the kind of task h.input makes, with a
// run (cold, the first of its kind) that answers at once, and waits for the
// warm child the pool starts after it.
func (h *harness) warmUp() {
	h.t.Helper()
	h.model.Script("warmup", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"ready"}`)}})
	first := h.input("[[script:warmup]] go")
	first.SessionID = "warmup"
	if r := h.mustRun(first); r.Warm || r.Output != "ready" {
		h.t.Fatalf("warm-up run: warm %v output %q", r.Warm, r.Output)
	}
	h.waitWarm(1, 30*time.Second, nil, "no warm child")
}

// waitWarm waits until the pool holds at least n idle children: within
// limit, and, when ended is not nil, before ended closes (a run whose
// end would make the wait meaningless). what opens the failure.
func (h *harness) waitWarm(n int, limit time.Duration, ended <-chan struct{}, what string) {
	h.t.Helper()
	deadline := time.After(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for h.acts.PoolStats().Warm < n {
		select {
		case <-ended:
			h.t.Fatalf("%s: the run ended first (want %d idle): %+v", what, n, h.acts.PoolStats())
		case <-deadline:
			h.t.Fatalf("%s (want %d idle within %s): %+v", what, n, limit, h.acts.PoolStats())
		case <-tick.C:
		}
	}
}

// TestRunPiPooled runs the limits a cold child has on a warm child of the
// pool: each case first teaches the pool its kind with a run that answers
// at once, waits for a warm child, then runs on it and gets what a cold run
// gets.
func TestRunPiPooled(t *testing.T) {
	waitsMostly(t)
	two := 2
	three := 3
	busy := []scriptedmodel.Step{}
	for i := range 7 {
		busy = append(busy, scriptedmodel.Step{DelayMS: min(i, 1) * 1000, ToolCalls: []scriptedmodel.ToolCall{
			{Name: "bash", Arguments: fmt.Sprintf(`{"command":"echo step %d"}`, i)},
		}})
	}
	cases := []struct {
		name   string
		tune   func(*Config)
		steps  []scriptedmodel.Step
		adjust func(*api.RunPiInput)
		check  func(t *testing.T, r api.RunPiResult)
	}{
		{
			name:  "finalize",
			steps: []scriptedmodel.Step{{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"pooled"}`)}}},
			check: func(t *testing.T, r api.RunPiResult) {
				if r.Error != nil || r.Output != "pooled" || r.ExitCode != 0 || r.Finalize == nil || r.Usage.Turns != 1 {
					t.Fatalf("result %+v", r)
				}
			},
		},
		{
			name:   "loop detection",
			steps:  []scriptedmodel.Step{{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"ls"}`}}, Repeat: true}},
			adjust: func(in *api.RunPiInput) { in.LoopingToolCount = &three },
			check: func(t *testing.T, r api.RunPiResult) {
				if errCode(r) != errcode.LoopDetected || r.ToolCalls != 3 {
					t.Fatalf("error %+v after %d calls", r.Error, r.ToolCalls)
				}
			},
		},
		{
			name:   "timeout extended while tools run",
			steps:  append(busy, scriptedmodel.Step{Hang: true}),
			adjust: func(in *api.RunPiInput) { in.TimeoutSeconds, in.ExtendDebounceSeconds = 4, &two },
			check: func(t *testing.T, r api.RunPiResult) {
				if errCode(r) != errcode.Timeout || r.Error.Message != "Timed out after 4s. Consider resuming with a longer timeout." ||
					r.ToolCalls != 7 || r.DurationMS < 8000 {
					t.Fatalf("error %+v, %d calls in %d ms", r.Error, r.ToolCalls, r.DurationMS)
				}
			},
		},
		{
			name:  "output cap",
			tune:  func(c *Config) { c.OutputMaxChars = 100 },
			steps: []scriptedmodel.Step{{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"` + strings.Repeat("é", 250) + `"}`)}}},
			check: func(t *testing.T, r api.RunPiResult) {
				if errCode(r) != errcode.OutputTruncated || r.OutputTotalChars != 250 || r.OutputReturnedChars != 100 {
					t.Fatalf("error %+v total %d returned %d", r.Error, r.OutputTotalChars, r.OutputReturnedChars)
				}
			},
		},
		{
			name:  "stream hard cap",
			tune:  func(c *Config) { c.MaxStreamBytes = 64 << 10 },
			steps: []scriptedmodel.Step{{Text: strings.Repeat("flood ", 40<<10)}},
			check: func(t *testing.T, r api.RunPiResult) {
				if errCode(r) != errcode.OutputTruncated || !strings.Contains(r.Error.Message, "the child was stopped") {
					t.Fatalf("error %+v", r.Error)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) {
				cfg.WarmPool = 2
				if c.tune != nil {
					c.tune(cfg)
				}
			})
			t.Cleanup(h.acts.Close)
			h.model.Script("case", c.steps...)
			h.warmUp()
			in := h.input("[[script:case]] go")
			if c.adjust != nil {
				c.adjust(&in)
			}
			r := h.mustRun(in)
			if !r.Warm {
				t.Fatalf("ran cold: %+v", h.acts.PoolStats())
			}
			c.check(t, r)
		})
	}
}

// TestRefillStartsAsAChildIsTaken (issue 43): the pool replaces a warm
// child as a task takes it, while that task's model still works, not after
// its run ends: a plan's next step or a lane's reviewer that comes during
// the run finds a warm child. The run's model takes 15 s; the pool must be
// back to two idle children before it answers. The first take leaves one
// idle child, whose kind's replacement is held back (heldRefill, here an
// hour: TestRefillHeldWhileOneIsIdle); the second leaves none, and its
// replacements start at once.
func TestRefillStartsAsAChildIsTaken(t *testing.T) {
	waitsMostly(t)
	h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 2 })
	t.Cleanup(h.acts.Close)
	h.warmUp()
	h.acts.pool.heldRefill = time.Hour
	// The warm-up's run taught the pool a peak of one: it keeps two.
	h.waitWarm(2, time.Minute, nil, "the pool did not keep two children")
	h.model.Script("long", scriptedmodel.Step{DelayMS: 15000, ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"slow"}`)}})
	ended := make([]chan struct{}, 2)
	res := make([]api.RunPiResult, 2)
	errs := make([]error, 2)
	for i := range ended {
		ended[i] = make(chan struct{})
		go func() {
			defer close(ended[i])
			in := h.input("[[script:long]] go")
			in.SessionID = fmt.Sprintf("long-%d", i)
			res[i], errs[i] = h.run(in, nil)
		}()
		// Taken: the run's child asked the model.
		wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := h.model.WaitForRequests(wctx, i+1, func(r scriptedmodel.Request) bool { return r.Script == "long" })
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v (%+v)", i, err, h.acts.PoolStats())
		}
	}
	// Both taken, so the kind's peak is two: the pool of two keeps two.
	h.waitWarm(2, time.Minute, ended[0], "the pool was not whole again while the runs went on")
	for i := range ended {
		<-ended[i]
		if errs[i] != nil || !res[i].Warm || res[i].Output != "slow" {
			t.Fatalf("long run %d: warm %v output %q err %v", i, res[i].Warm, res[i].Output, errs[i])
		}
	}
}

// TestRefillHeldWhileOneIsIdle (issue 43): a take that leaves its kind an
// idle child does not start the replacement beside the taken child's
// prompt (a pi start there made its first model call a third later): the
// next task of the kind has the idle one. The run ends, and the pool is
// whole again.
func TestRefillHeldWhileOneIsIdle(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 2 })
	t.Cleanup(h.acts.Close)
	h.warmUp()
	h.waitWarm(2, time.Minute, nil, "the pool did not keep two children")
	h.acts.pool.heldRefill = time.Hour
	// The answer waits long enough for the look below, whatever the load:
	// the look itself follows the request at once.
	h.model.Script("held", scriptedmodel.Step{DelayMS: 3000, ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"done"}`)}})
	ended := make(chan struct{})
	var res api.RunPiResult
	var err error
	go func() {
		defer close(ended)
		res, err = h.run(h.input("[[script:held]] go"), nil)
	}()
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.model.WaitForRequests(wctx, 1, func(r scriptedmodel.Request) bool { return r.Script == "held" }); err != nil {
		t.Fatal(err)
	}
	h.acts.pool.mu.Lock()
	idle, starting := h.acts.pool.count(), h.acts.pool.startingAll()
	h.acts.pool.mu.Unlock()
	if idle != 1 || starting != 0 {
		t.Fatalf("as the taken child asked its model: %d idle, %d starting; want 1 idle and no refill", idle, starting)
	}
	<-ended
	if err != nil || !res.Warm || res.Output != "done" {
		t.Fatalf("the run: warm %v output %q err %v", res.Warm, res.Output, err)
	}
	// Its end refills the pool (release), the held refill still an hour off.
	h.waitWarm(2, time.Minute, nil, "the pool was not refilled after the run")
}

// TestPoolKeepsTwoWavesOfAKind: the children the pool holds for a kind,
// from how many of its runs went on at once, and when it may end another
// kind's to make room.
func TestPoolKeepsTwoWavesOfAKind(t *testing.T) {
	for _, c := range []struct{ peak, size, want int }{
		{peak: 1, size: 4, want: 2}, // a plan's steps in sequence: the next one's child, and its replacement
		{peak: 2, size: 4, want: 4}, // two lanes: both reviewers' children are ready as the writers end
		{peak: 3, size: 4, want: 4},
		{peak: 2, size: 3, want: 3},
		{peak: 1, size: 1, want: 1},
		{peak: 8, size: 4, want: 4},
	} {
		if got := (&keyUse{peak: c.peak}).keep(c.size); got != c.want {
			t.Errorf("peak %d, pool of %d: keeps %d, want %d", c.peak, c.size, got, c.want)
		}
	}
	// In a full pool another kind's child makes room up to one more than
	// the peak, never for the second wave.
	for _, c := range []struct {
		peak, have int
		want       bool
	}{
		{peak: 2, have: 0, want: true},
		{peak: 2, have: 2, want: true},
		{peak: 2, have: 3, want: false},
		{peak: 1, have: 1, want: true},
		{peak: 1, have: 2, want: false},
	} {
		if got := (&keyUse{peak: c.peak}).mayEvict(c.have); got != c.want {
			t.Errorf("peak %d holding %d: may evict %v, want %v", c.peak, c.have, got, c.want)
		}
	}
	// Only the kind used last ends the other's children: two kinds that
	// both want more than the pool holds do not end each other's in turn.
	now := time.Now()
	earlier, later := &keyUse{lastUsed: now.Add(-time.Second)}, &keyUse{lastUsed: now}
	for _, c := range []struct {
		name       string
		key, other *keyUse
		want       bool
	}{
		{"used since the other", later, earlier, true},
		{"used before the other", earlier, later, false},
		{"used with the other", later, &keyUse{lastUsed: now}, false},
		{"the other forgotten", earlier, nil, true},
	} {
		if got := c.key.outranks(c.other); got != c.want {
			t.Errorf("%s: outranks %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRunWaitsForTheRefillUnderWay: a run that finds no idle child while
// the pool's refill for its kind is still starting takes that child when
// it is up, instead of starting a pi of its own beside it.
func TestRunWaitsForTheRefillUnderWay(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 1 })
	t.Cleanup(h.acts.Close)
	h.warmUp()
	p := h.acts.pool
	// Every child started from now on waits here until the test lets it
	// join the pool: the refill is still under way when the second run
	// comes.
	hold := make(chan struct{})
	p.mu.Lock()
	p.startedHook = func() { <-hold }
	p.mu.Unlock()
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	coming := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		n := 0
		for _, l := range p.coming {
			n += len(l)
		}
		return n
	}
	h.model.Script("quick", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"quick"}`)}})
	before := h.acts.PoolStats()
	first := h.input("[[script:quick]] go")
	first.SessionID = "first"
	if r := h.mustRun(first); !r.Warm || r.Output != "quick" {
		t.Fatalf("first run: warm %v output %q", r.Warm, r.Output)
	}
	// The first run took the idle child; its replacement is on its way.
	for deadline := time.Now().Add(10 * time.Second); coming() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no refill under way after the take: %d coming, %+v", coming(), h.acts.PoolStats())
		}
	}
	second := h.input("[[script:quick]] go")
	second.SessionID = "second"
	ended := make(chan struct{})
	var res api.RunPiResult
	var err error
	go func() {
		defer close(ended)
		res, err = h.run(second, nil)
	}()
	// The second run claims the refill's child and waits for it.
	for deadline := time.Now().Add(10 * time.Second); coming() != 0; time.Sleep(10 * time.Millisecond) {
		select {
		case <-ended:
			t.Fatalf("the second run ended without the refill's child: %+v", h.acts.PoolStats())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second run did not claim the child on its way: %+v", h.acts.PoolStats())
		}
	}
	release()
	<-ended
	st := h.acts.PoolStats()
	if err != nil || !res.Warm || res.Early || res.Output != "quick" {
		t.Fatalf("second run: warm %v early %v output %q err %v", res.Warm, res.Early, res.Output, err)
	}
	if st.Hits != before.Hits+2 || st.Waited != before.Waited+1 || st.Misses != before.Misses {
		t.Fatalf("pool counters: before %+v after %+v", before, st)
	}
}

// TestWarmMaxBytes: the pool's memory cap by default gives each child of
// the pool room (a pool of eight is not held to four), never less than the
// default; a configured cap is kept as it is.
func TestWarmMaxBytes(t *testing.T) {
	for _, c := range []struct {
		configured int64
		size       int
		want       int64
	}{
		{0, 1, DefaultWarmMaxBytes},   // early start alone, or a pool of one
		{0, 4, DefaultWarmMaxBytes},   // subagents dev's pool: 4 × 128 MiB
		{0, 8, 8 * warmChildBytes},    // --warm-pool 8
		{-1, 64, 64 * warmChildBytes}, // the most --warm-pool takes
		{300 << 20, 8, 300 << 20},     // configured: as it is
	} {
		if got := warmMaxBytes(c.configured, c.size); got != c.want {
			t.Errorf("warmMaxBytes(%d, %d) = %d MiB, want %d MiB", c.configured, c.size, got>>20, c.want>>20)
		}
	}
}

// TestRefillKeepsToTheMemoryCap: a refill starts no child past the pool's
// memory cap, which the janitor would end within seconds and the next
// take's refill start again; a cap below one child keeps none, even with
// no child idle to measure. Another kind's idle child makes room only when
// its memory is enough.
func TestRefillKeepsToTheMemoryCap(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 4 })
	t.Cleanup(h.acts.Close)
	h.warmUp()
	// The warm-up's run taught the pool a peak of one: it keeps two.
	h.waitWarm(2, time.Minute, nil, "the pool did not keep two children")
	p := h.acts.pool
	setCap := func(bytes int64) {
		p.mu.Lock()
		p.maxBytes = bytes
		p.mu.Unlock()
	}
	idleOf := func(key string) int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.idle[key])
	}
	p.mu.Lock()
	var key string
	var child int64
	for k, l := range p.idle {
		key = k
		for _, w := range l {
			child = max(child, ResidentBytes(w.p.pid))
		}
	}
	p.mu.Unlock()
	if child == 0 {
		t.Fatal("no resident memory read for an idle child")
	}

	setCap(child * 3 / 2)
	p.sweep(time.Now())
	if st := h.acts.PoolStats(); st.Warm != 1 || st.Evictions != 1 {
		t.Fatalf("a cap of one and a half children: %+v, want one idle and one evicted", st)
	}
	// The kind still wants two: the refill sees the cap and starts none.
	p.refill(key)
	if n := idleOf(key); n != 1 || h.acts.PoolStats().Evictions != 1 {
		t.Fatalf("after a refill within a cap of one and a half children: %d idle, %+v; want 1", n, h.acts.PoolStats())
	}

	// Another kind, used since and measured at the same size, wants one:
	// the first kind's idle child makes the room, and goes.
	other := "another kind"
	p.mu.Lock()
	spec := p.keys[key].spec
	spec.key = other
	p.keys[other] = &keyUse{spec: spec, peak: 1, lastUsed: time.Now(), bytes: child}
	p.mu.Unlock()
	p.refill(other)
	if n, m := idleOf(key), idleOf(other); n != 0 || m != 1 {
		t.Fatalf("a refill of another kind in a full cap: %d idle of the first kind, %d of the other; want 0 and 1", n, m)
	}

	// The first kind, used since, measured twice the size: the other's
	// idle child would not make room enough, so it stays and nothing
	// starts.
	p.mu.Lock()
	p.keys[key].lastUsed = time.Now()
	p.keys[key].bytes = 2 * child
	p.mu.Unlock()
	p.refill(key)
	if n, m := idleOf(key), idleOf(other); n != 0 || m != 1 || h.acts.PoolStats().Evictions != 2 {
		t.Fatalf("a refill of a kind bigger than the room another's child frees: %d idle of it, %d of the other, %+v; want 0 and 1", n, m, h.acts.PoolStats())
	}

	// A cap below one child: the idle one goes; the first kind, with no
	// child left to measure, goes by its last measure and starts none.
	setCap(child / 2)
	p.sweep(time.Now())
	p.refill(key)
	if st := h.acts.PoolStats(); st.Warm != 0 || st.Evictions != 3 {
		t.Fatalf("a cap of half a child: %+v, want none idle and three evicted", st)
	}
}

// TestWarmPoolForgetsUnusedChildren: a warm child no task takes within the
// pool's time to live is ended, and the pool then holds nothing.
func TestWarmPoolForgetsUnusedChildren(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.WarmPool = 2
		cfg.WarmTTL = time.Second
	})
	t.Cleanup(h.acts.Close)
	h.warmUp()
	for deadline := time.Now().Add(30 * time.Second); h.acts.PoolStats().Warm > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("warm children outlived their time to live: %+v", h.acts.PoolStats())
		}
	}
	if st := h.acts.PoolStats(); st.Evictions < 1 || st.Misses != 1 || st.Hits != 0 {
		t.Fatalf("pool counters %+v", st)
	}
}

// TestWarmChildKeptForCorrectiveRun: a warm child that ends without
// subagent_finalize stays for its session's corrective run, which goes on in
// the same process (no new start, no session switch).
func TestWarmChildKeptForCorrectiveRun(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 2 })
	t.Cleanup(h.acts.Close)
	h.model.Script("forgot", scriptedmodel.Step{Text: "Forgot to finalize."},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"fixed"}`)}})
	h.warmUp()
	in := h.input("[[script:forgot]] go")
	r1 := h.mustRun(in)
	if !r1.Warm || r1.Finalize != nil || h.acts.PoolStats().Kept != 1 {
		t.Fatalf("first run: warm %v finalize %+v, pool %+v", r1.Warm, r1.Finalize, h.acts.PoolStats())
	}
	in.Prompt = "You did not call subagent_finalize. Call it now with your result."
	r2 := h.mustRun(in)
	st := h.acts.PoolStats()
	if !r2.Warm || r2.Output != "fixed" || st.Resumed != 1 || st.Kept != 0 {
		t.Fatalf("corrective run: warm %v output %q, pool %+v", r2.Warm, r2.Output, st)
	}
	if r2.SessionFile != r1.SessionFile {
		t.Fatalf("session files %s and %s", r1.SessionFile, r2.SessionFile)
	}
	msgs, err := readMessages(r2.SessionFile)
	if err != nil || len(msgs) < 4 {
		t.Fatalf("session file holds %d messages (%v): both runs belong in it", len(msgs), err)
	}
}

// TestRefusedPromptIsTheRunsError: a warm child that refuses its prompt
// over RPC (pi answers the command with success false) fails the run with
// pi's reason, not with "pi ended without an answer".
func TestRefusedPromptIsTheRunsError(t *testing.T) {
	a := &Activities{cfg: Config{OutputMaxChars: 100}, sanitizer: NewSanitizer("/home/tester")}
	r := &childRun{a: a, in: api.RunPiInput{Turn: 1}, timeout: time.Second}
	r.stream.Apply([]byte(`{"id":"prompt","type":"response","command":"prompt","success":false,"error":"Model not found: nope/x"}`))
	res := api.RunPiResult{SessionFile: filepath.Join(t.TempDir(), "s.jsonl")}
	a.fill(&res, r, outcome{warm: true})
	if res.Error == nil || res.Error.Code != errcode.Failed || res.Error.Message != "pi refused the run: prompt: Model not found: nope/x" {
		t.Fatalf("error %+v", res.Error)
	}
}

// TestWarmChildDeadBeforeItsTaskRunsCold: a warm child killed while idle
// whose death the pool has not seen yet takes the task's prompt into its
// pipe and ends without a word. The task runs cold instead of failing (a
// pool problem never fails a task). The child is stopped before the take
// and killed once the prompt is in its pipe, which is that race made sure.
func TestWarmChildDeadBeforeItsTaskRunsCold(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 2 })
	t.Cleanup(h.acts.Close)
	h.warmUp()
	h.model.Script("late", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"cold after all"}`)}})

	p := h.acts.pool
	p.mu.Lock()
	var idle []int
	for _, list := range p.idle {
		for _, w := range list {
			idle = append(idle, w.p.pid)
		}
	}
	p.mu.Unlock()
	if len(idle) == 0 {
		t.Fatal("no idle warm child")
	}
	for _, pid := range idle {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}

	in := h.input("[[script:late]] go")
	sessionFile := SessionFile(h.acts.cfg.DataDir, in.Cwd, in.Agent, in.SessionID)
	type ran struct {
		res api.RunPiResult
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := h.run(in, nil)
		done <- ran{res, err}
	}()
	// The take links the session file to the child's slot, then writes
	// the prompt, which a stopped child's pipe holds.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if info, err := os.Lstat(sessionFile); err == nil && info.Mode()&os.ModeSymlink != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task took no warm child")
		}
	}
	time.Sleep(100 * time.Millisecond)
	for _, pid := range idle {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	got := <-done
	if got.err != nil || got.res.Error != nil || got.res.Output != "cold after all" || got.res.Warm {
		t.Fatalf("RunPi: %v, result warm %v error %+v output %q", got.err, got.res.Warm, got.res.Error, got.res.Output)
	}
	if info, err := os.Lstat(sessionFile); err != nil || !info.Mode().IsRegular() {
		t.Fatalf("session file %s: %v %v", sessionFile, info, err)
	}
	if msgs, err := readMessages(sessionFile); err != nil || len(msgs) < 2 {
		t.Fatalf("session file holds %d messages (%v)", len(msgs), err)
	}
}

// TestEarlyStart: a run whose child was started early (StartEarly, as the
// worker does when it resolves a delegation) takes that child, started or
// still starting, with no warm pool; it reports Early, and its session file
// is what a cold run writes. A child started early that no run takes goes
// after its time to live; a run the worker would refuse gets none.
func TestEarlyStart(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.EarlyStart = true })
	t.Cleanup(h.acts.Close)
	h.model.Script("early", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"early"}`)}})

	for _, wait := range []bool{false, true} {
		in := h.input("[[script:early]] go")
		in.SessionID = fmt.Sprintf("early-%v", wait)
		before := h.acts.PoolStats()
		h.acts.StartEarly([]api.RunPiInput{in})
		if wait {
			// Ready before the run comes: it waits among the idle.
			h.waitWarm(1, 30*time.Second, nil, "the early child never became ready")
		} else {
			// Still starting when the run comes: the run waits for it.
			for deadline := time.Now().Add(10 * time.Second); h.acts.PoolStats().EarlyStarted == before.EarlyStarted; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("StartEarly started nothing")
				}
			}
		}
		r := h.mustRun(in)
		st := h.acts.PoolStats()
		if r.Error != nil || r.Output != "early" || !r.Early || r.Warm || st.EarlyTaken != before.EarlyTaken+1 {
			t.Fatalf("wait %v: result early %v warm %v error %+v output %q, pool %+v", wait, r.Early, r.Warm, r.Error, r.Output, st)
		}
		if info, err := os.Lstat(r.SessionFile); err != nil || !info.Mode().IsRegular() {
			// The link to the child's slot is settled once pi has exited.
			for deadline := time.Now().Add(10 * time.Second); err != nil || !info.Mode().IsRegular(); info, err = os.Lstat(r.SessionFile) {
				if time.Now().After(deadline) {
					t.Fatalf("session file %s: %v %v", r.SessionFile, info, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if msgs, err := readMessages(r.SessionFile); err != nil || len(msgs) < 3 {
			t.Fatalf("session file holds %d messages (%v)", len(msgs), err)
		}
	}
	// With no warm pool, nothing is kept after the runs.
	if st := h.acts.PoolStats(); st.Warm != 0 {
		t.Fatalf("pool after the runs: %+v", st)
	}

	// Started for a run that does not come: it goes after its TTL.
	h.acts.pool.mu.Lock()
	h.acts.pool.earlyTTL = time.Second
	h.acts.pool.mu.Unlock()
	unused := h.input("[[script:early]] go")
	unused.Cwd = t.TempDir()
	h.acts.StartEarly([]api.RunPiInput{unused})
	h.waitWarm(1, 30*time.Second, nil, "the early child never became ready")
	for deadline := time.Now().Add(30 * time.Second); h.acts.PoolStats().Warm > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("an early child no run took outlived its TTL: %+v", h.acts.PoolStats())
		}
	}

	// A run the worker refuses gets no child.
	started := h.acts.PoolStats().EarlyStarted
	h.acts.cfg.Admit = func(api.RunPiInput) (profiles.Admission, error) {
		return profiles.Admission{}, errcode.New(errcode.DepthExceeded, "too deep")
	}
	h.acts.StartEarly([]api.RunPiInput{h.input("[[script:early]] go")})
	time.Sleep(200 * time.Millisecond)
	if st := h.acts.PoolStats(); st.EarlyStarted != started {
		t.Fatalf("a refused run got an early child: %+v", st)
	}
}

// TestThenStartsAsTheChildFinalizes: the runs a plan step's run carries
// (Then) get their children started early as its child finalizes with
// SUCCESS, before the run returns, with no warm pool; the next step's run
// takes that child. A child that finalizes with ERROR starts nothing.
func TestThenStartsAsTheChildFinalizes(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.EarlyStart = true })
	t.Cleanup(h.acts.Close)
	h.model.Script("then-ok", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"first"}`)}})
	h.model.Script("then-err", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"ERROR","result":"","error":"no"}`)}})
	h.model.Script("then-next", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"next"}`)}})

	next := h.input("[[script:then-next]] go")
	next.SessionID = "then-next"
	failing := h.input("[[script:then-err]] go")
	failing.SessionID, failing.Then = "then-err", []api.RunPiInput{next}
	before := h.acts.PoolStats()
	if r := h.mustRun(failing); r.Finalize == nil || r.Finalize.Status != "ERROR" {
		t.Fatalf("the failing step: %+v", r.Finalize)
	}
	if st := h.acts.PoolStats(); st.EarlyStarted != before.EarlyStarted {
		t.Fatalf("a step that finalized with ERROR started the next: %+v", st)
	}

	first := h.input("[[script:then-ok]] go")
	first.SessionID, first.Then = "then-first", []api.RunPiInput{next}
	if r := h.mustRun(first); r.Error != nil || r.Output != "first" {
		t.Fatalf("the first step: error %+v output %q", r.Error, r.Output)
	}
	if st := h.acts.PoolStats(); st.EarlyStarted != before.EarlyStarted+1 {
		t.Fatalf("the next step's child did not start as the first finalized: %+v", st)
	}
	r := h.mustRun(next)
	if st := h.acts.PoolStats(); r.Error != nil || r.Output != "next" || !r.Early || st.EarlyTaken != before.EarlyTaken+1 {
		t.Fatalf("the next step: early %v error %+v output %q, pool %+v", r.Early, r.Error, r.Output, st)
	}
}
