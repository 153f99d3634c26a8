package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durable-pi/subagents/api"
)

// Defaults of the warm pool a Config turns on.
const (
	// DefaultWarmTTL: a key not used for two minutes is not coming back
	// soon; its processes (about 110 MiB each) go.
	DefaultWarmTTL = 2 * time.Minute
	// DefaultWarmMaxBytes bounds the pool's resident memory: four idle pi
	// processes fit. A larger pool gets warmChildBytes for each child
	// (warmMaxBytes).
	DefaultWarmMaxBytes = 512 << 20
	// warmChildBytes is the room a pool's default cap gives each of its
	// children: a warm child holds about 90-110 MiB here, more with a
	// profile's extensions; a cap that fitted four alone held a pool of
	// eight (--warm-pool 8) to four or five children.
	warmChildBytes = 128 << 20
	// keptTTL is how long a warm child that ended without finalizing waits
	// for its corrective run: the session sends it within milliseconds, so
	// one that did not come (retries used up, the task cancelled) is not
	// coming.
	keptTTL = 15 * time.Second
	// warmHandshake is how long a warm child may take to answer a command:
	// pi answers get_state at its start in about 450 ms and switch_session
	// in 27–49 ms; one that takes 30 s is broken, and the task runs cold.
	warmHandshake = 30 * time.Second
	// refillDelay holds back the refill after a run ends (release) until
	// the run's result has gone on: the worker's and the server's next steps
	// and the parent's tool result take about 50 ms here, and a pi starting
	// beside them (a core's worth for half a second) made them a third
	// slower. The refill that matters starts as a child is taken (take),
	// while the taken child's model works; this one only tops up what that
	// one could not start (the pool had no room then).
	refillDelay = 200 * time.Millisecond
	// heldRefill holds back the replacement of a child taken while another
	// of its kind is still idle: a pi start (half a second of a core)
	// beside the taken child's prompt made its first model call 100-115 ms
	// after the prompt instead of 75, and a short task's result is back a
	// few hundred milliseconds after the take; the next task of the kind
	// has the idle child meanwhile. A take that leaves none starts the
	// replacement at once.
	heldRefill = time.Second
	// earlyTTL is how long a child started early for a task waits for it:
	// its run comes within tens of milliseconds of the resolve, unless the
	// delegation's concurrency holds the task back or its run went to
	// another worker, and then it is not coming soon.
	earlyTTL = 30 * time.Second
)

// warmSpec is what a child pi must be started with to serve a task: the
// arguments of RPC mode (the task's flags, no session, no prompt), its
// folder and environment. key names it, with the files pi loads at its
// start, so that a changed pi or extension is never served warm.
type warmSpec struct {
	key  string
	args []string
	dir  string
	env  []string
}

// specFor is the warm spec of a run with these flags; key "" when a file
// it names cannot be read (the run goes cold, as without a pool).
func (a *Activities) specFor(flags []string, dir string, env []string, files []string) warmSpec {
	h := sha256.New()
	write := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	for _, f := range append([]string{a.cfg.Pi}, files...) {
		info, err := os.Stat(f)
		if err != nil {
			return warmSpec{}
		}
		write(f + "|" + strconv.FormatInt(info.Size(), 10) + "|" + strconv.FormatInt(info.ModTime().UnixNano(), 10))
	}
	write(dir)
	for _, kv := range env {
		write(kv)
	}
	// The session file comes with the child's start (startWarm): not
	// part of the key.
	args := append([]string{"--mode", "rpc"}, flags...)
	for _, arg := range args {
		write(arg)
	}
	return warmSpec{key: hex.EncodeToString(h.Sum(nil)[:12]), args: args, dir: dir, env: env}
}

// pool keeps child pi processes started in RPC mode ahead of the tasks
// that will use them, keyed by everything fixed at a pi's start. Each
// serves one task: it is taken, pointed at the task's session file, sent
// its prompt, and ends with the run. A task that finds none runs cold, as
// without a pool, and teaches the pool its key: twice as many processes
// as that key recently ran at once (one more for a key that ran one) are
// kept started, up to the pool's size (keyUse.keep) and within its memory
// cap. Idle ones older than the TTL, or over the memory cap, go.
type pool struct {
	a        *Activities
	size     int
	ttl      time.Duration
	maxBytes int64
	// earlyTTL and heldRefill are the constants but in this package's
	// tests.
	earlyTTL, heldRefill time.Duration
	log                  *slog.Logger

	mu   sync.Mutex
	idle map[string][]*warmChild
	keys map[string]*keyUse
	kept map[string]*warmChild // by session file
	// coming are the children being started, by key, oldest first: for
	// tasks about to run (early starts) and to refill the pool. A run of
	// the key that finds no idle child waits for the oldest of them
	// instead of starting its own, which would be ready later: a pi start
	// takes about half a second, and a second one beside it slows both.
	coming map[string][]*comingChild
	closed bool
	// startedHook, set by this package's tests, runs as a started child
	// has answered, before the pool hands it on.
	startedHook func()

	// refillStarts holds a token for each refill's pi start under way:
	// refills start one after another, within refillStartsAtOnce.
	refillStarts chan struct{}

	spawn chan spawnRequest
	stop  chan struct{}
	wg    sync.WaitGroup
	// refills are the refills under way: close waits for them, so that no
	// child starts after it.
	refills sync.WaitGroup

	hits, waited, misses, evictions, resumed, earlyStarted, earlyTaken atomic.Int64
}

type warmChild struct {
	p    *proc
	key  string
	born time.Time
	// early: started for a task that did not take it; it goes after
	// earlyTTL, not the pool's TTL.
	early bool
}

// comingChild is a child on its way: started early for a task that will
// run soon, or by a refill. A run that claims it (takes it out of
// pool.coming) gets it on ready (nil: it did not start); unclaimed, it
// joins the idle children once started.
type comingChild struct {
	ready  chan *proc
	refill bool
}

// keyUse is what the pool knows of a key: how many of its runs go on now,
// the most that went on at once, and when it was last asked for.
type keyUse struct {
	spec     warmSpec
	running  int
	peak     int
	starting int
	lastUsed time.Time
	// bytes is the resident memory of one of the key's children, as
	// last measured (overCapLocked): what its next one will take. Kinds
	// differ (a profile's extensions, its model's SDK), so each has its
	// own.
	bytes int64
}

// keep is how many children of the key the pool holds, within its size:
// two waves of the key's peak, so that the tasks a wave's end lets start
// (each lane's next step) find theirs ready while that wave's replacements
// still start; and at least one more than the peak, so that a key that
// ran one task at a time has the next one's child ready.
func (u *keyUse) keep(size int) int {
	return min(max(2*u.peak, u.peak+1), size)
}

// outranks reports whether u was used more recently than other (nil: a
// key the pool forgot), whose idle children it may then end for room.
func (u *keyUse) outranks(other *keyUse) bool {
	return other == nil || other.lastUsed.Before(u.lastUsed)
}

// mayEvict reports whether a key that holds have children (idle or
// starting) may end another key's idle child to start one more: only up
// to one more than its peak, not for its second wave.
func (u *keyUse) mayEvict(have int) bool { return have <= u.peak }

type spawnRequest struct {
	spec  warmSpec
	reply chan *proc
}

func newPool(a *Activities, size int, ttl time.Duration, maxBytes int64, log *slog.Logger) *pool {
	p := &pool{a: a, size: size, ttl: ttl, maxBytes: maxBytes, earlyTTL: earlyTTL, heldRefill: heldRefill, log: log,
		idle: map[string][]*warmChild{}, keys: map[string]*keyUse{}, kept: map[string]*warmChild{}, coming: map[string][]*comingChild{},
		refillStarts: make(chan struct{}, refillStartsAtOnce()),
		spawn:        make(chan spawnRequest), stop: make(chan struct{})}
	p.wg.Add(2)
	go p.spawner()
	go p.janitor()
	return p
}

// spawner starts every warm child from one goroutine locked to its thread:
// pi's Pdeathsig fires when the thread that started it ends, and this one
// ends only when the pool closes (or the worker dies).
func (p *pool) spawner() {
	defer p.wg.Done()
	runtime.LockOSThread()
	// Never unlocked: the thread ends with the goroutine, and with it
	// (Pdeathsig) any warm child the pool did not kill itself.
	for {
		select {
		case req := <-p.spawn:
			slot := p.a.newSlot()
			args := append([]string{"--session", slot}, req.spec.args...)
			child, err := startProc(p.a.reaper, p.a.cfg.Pi, args, req.spec.dir, req.spec.env, p.a.cfg.MaxStreamBytes)
			if err != nil {
				p.log.Warn("warm pool: pi did not start", "error", err)
				child = nil
			} else {
				child.slot = slot
			}
			req.reply <- child
		case <-p.stop:
			return
		}
	}
}

// take hands out a warm child for spec, or nil: the task runs cold. With
// no idle child but one on its way for the key, it waits for that one
// (early: true when it was started early for a task), which is further
// along than a start of its own would be. Either way the key is counted
// as running until release.
func (p *pool) take(ctx context.Context, spec warmSpec) (child *proc, early bool) {
	p.mu.Lock()
	use := p.runningLocked(spec)
	use.peak = max(use.peak, use.running)
	for list := p.idle[spec.key]; len(list) > 0; list = p.idle[spec.key] {
		w := list[len(list)-1]
		p.idle[spec.key] = list[:len(list)-1]
		if w.p.ended() {
			// Died while idle: discarded, and the next one is tried.
			p.evictions.Add(1)
			continue
		}
		if w.early {
			// Started early for this task (or one like it), ready first.
			p.earlyTaken.Add(1)
		} else {
			p.hits.Add(1)
		}
		// Its replacement starts now, not when this run ends, when this
		// take left the kind no idle child: a task of the kind that comes
		// while this one runs (a plan's next step, a lane's reviewer)
		// finds it ready. While one is left, that task takes it, and the
		// replacement waits until this child's start of its task is done.
		delay := time.Duration(0)
		if len(p.idle[spec.key]) > 0 {
			delay = p.heldRefill
		}
		p.refillLocked(spec.key, delay)
		p.mu.Unlock()
		return w.p, w.early
	}
	list := p.coming[spec.key]
	if len(list) == 0 {
		p.misses.Add(1)
		// The key's peak grew: children for the next tasks start beside
		// this task's cold one.
		p.refillLocked(spec.key, 0)
		p.mu.Unlock()
		return nil, false
	}
	e := list[0]
	p.dropComingLocked(spec.key, e)
	p.mu.Unlock()
	// A refill's replacement starts once this child is up (refill), not
	// beside it: the run waits for this one.
	select {
	case c := <-e.ready:
		switch {
		case c == nil:
			p.misses.Add(1)
			return nil, false
		case e.refill:
			p.hits.Add(1)
			p.waited.Add(1)
			return c, false
		}
		p.earlyTaken.Add(1)
		return c, true
	case <-ctx.Done():
		p.misses.Add(1)
		// The run was cancelled while its child still started: the child
		// goes when it comes.
		go func() {
			if c := <-e.ready; c != nil {
				c.discard()
			}
		}()
		return nil, false
	}
}

// startEarly starts children for n tasks of spec's kind that are about to
// run, less those an idle or already starting child will serve. Unlike a
// refill it does not wait for the pool's room: these are the children the
// tasks would start themselves a few milliseconds later.
func (p *pool) startEarly(spec warmSpec, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for k := len(p.idle[spec.key]) + len(p.coming[spec.key]); k < n; k++ {
		e := &comingChild{ready: make(chan *proc, 1)}
		p.coming[spec.key] = append(p.coming[spec.key], e)
		p.earlyStarted.Add(1)
		p.refills.Add(1)
		go func() {
			defer p.refills.Done()
			child := p.startWarm(spec)
			p.mu.Lock()
			gone := p.arriveLocked(spec.key, e, child)
			p.mu.Unlock()
			reap(gone)
		}()
	}
}

// holdsKept reports whether a child is kept for sessionFile's corrective
// run: while it lives, the session file may be its slot's link.
func (p *pool) holdsKept(sessionFile string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.kept[sessionFile]
	return w != nil && !w.p.ended()
}

// keep holds child, whose run on sessionFile ended without finalizing, for
// that session's corrective run.
func (p *pool) keep(spec warmSpec, sessionFile string, child *proc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		child.discard()
		return
	}
	if old := p.kept[sessionFile]; old != nil {
		old.p.discard()
	}
	p.kept[sessionFile] = &warmChild{p: child, key: spec.key, born: time.Now()}
}

// takeKept hands out the child kept for sessionFile when it was started
// for spec's key and still runs; like take, it counts the key as running.
func (p *pool) takeKept(spec warmSpec, sessionFile string) *proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.kept[sessionFile]
	if w == nil {
		return nil
	}
	delete(p.kept, sessionFile)
	if w.p.ended() {
		return nil
	}
	if w.key != spec.key {
		w.p.discard()
		return nil
	}
	p.runningLocked(spec)
	// The cap on what one run may print starts again, as for a new process.
	w.p.streamed.Store(0)
	p.resumed.Add(1)
	return w.p
}

// runningLocked counts a run of spec's key as going on, learning the key
// if it is new.
func (p *pool) runningLocked(spec warmSpec) *keyUse {
	use := p.keys[spec.key]
	if use == nil {
		use = &keyUse{spec: spec}
		p.keys[spec.key] = use
	}
	use.running++
	use.lastUsed = time.Now()
	return use
}

// release ends a run of spec's key and starts what the key needs again,
// now that its run no longer competes with the start.
func (p *pool) release(spec warmSpec) {
	p.mu.Lock()
	if use := p.keys[spec.key]; use != nil {
		use.running--
		use.lastUsed = time.Now()
	}
	p.refillLocked(spec.key, refillDelay)
	p.mu.Unlock()
}

// refillLocked refills key after delay, in the background: neither a
// take nor a run's result waits for a pi start.
func (p *pool) refillLocked(key string, delay time.Duration) {
	if p.closed {
		return
	}
	p.refills.Add(1)
	go func() {
		defer p.refills.Done()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-p.stop:
				return
			}
		}
		p.refill(key)
	}()
}

// refill starts warm children for key until it holds what keep says,
// within the pool's size and memory cap; up to one more than the key's
// peak, the oldest idle child of another key makes room.
func (p *pool) refill(key string) {
	for {
		p.mu.Lock()
		use := p.keys[key]
		if p.closed || use == nil || len(p.idle[key])+use.starting >= use.keep(p.size) {
			p.mu.Unlock()
			return
		}
		// A full pool makes room for one more than the key's peak by
		// ending the oldest idle child of a key used before it (never of
		// one used since: oldestOtherLocked); the second wave takes
		// only free room, so that two kinds that run together (a lane's
		// writer and reviewer of two profiles) do not end each other's.
		// Full is by count or by the memory cap: a child started past the
		// cap would be the janitor's to end within seconds, and the next
		// take's refill would start it again. Over the cap, the other
		// kind's child goes only if its memory makes the room.
		over := p.overCapLocked(key)
		if p.count()+p.startingAll() >= p.size || over > 0 {
			var victim *warmChild
			if use.mayEvict(len(p.idle[key]) + use.starting) {
				victim = p.oldestOtherLocked(key)
			}
			if victim == nil || (over > 0 && ResidentBytes(victim.p.pid) < over) {
				p.mu.Unlock()
				return
			}
			p.removeLocked(victim)
		}
		use.starting++
		spec := use.spec
		e := &comingChild{ready: make(chan *proc, 1), refill: true}
		p.coming[key] = append(p.coming[key], e)
		p.mu.Unlock()

		var child *proc
		select {
		case p.refillStarts <- struct{}{}:
			child = p.startWarm(spec)
			<-p.refillStarts
		case <-p.stop:
		}
		p.mu.Lock()
		use.starting--
		gone := p.arriveLocked(key, e, child)
		p.mu.Unlock()
		reap(gone)
		// On to the next child, or to the replacement of one a run
		// claimed while it started; the loop's top stops a closed pool.
		if child == nil || gone != nil {
			return
		}
	}
}

// overCapLocked is how far one more child of key would take the pool past
// its memory cap (zero or less: it fits). It counts the idle children's
// resident memory now, and for each child starting and for the next, its
// kind's as last measured: the largest idle one of the kind. A kind not
// measured yet counts nothing, so that its first child starts and is
// measured; counting another kind's figure instead could keep a smaller
// kind out for good.
func (p *pool) overCapLocked(key string) int64 {
	var total int64
	for k, l := range p.idle {
		var largest int64
		for _, w := range l {
			rss := ResidentBytes(w.p.pid)
			total += rss
			largest = max(largest, rss)
		}
		if use := p.keys[k]; use != nil && largest > 0 {
			use.bytes = largest
		}
	}
	for _, use := range p.keys {
		total += int64(use.starting) * use.bytes
	}
	if use := p.keys[key]; use != nil {
		total += use.bytes
	}
	return total - p.maxBytes
}

// refillStartsAtOnce is how many refills may start a pi at once: half
// the machine's cores (at least one). A pi start is about half a second of
// one core, and the refills a wave of takes sets off (four tasks: four
// refills) start while the children taken run their tasks; all at once
// on two cores they took the CPU those children's turns needed. Early
// starts do not wait for this: their tasks would start the pi themselves.
func refillStartsAtOnce() int { return max(1, runtime.NumCPU()/2) }

// arriveLocked puts a child that finished starting (nil: it did not) where
// it goes: to the run that claimed e meanwhile, which waits for it, or
// among key's idle children. It returns the child to end instead when the
// pool closed meanwhile (reap it without p.mu, before close returns).
func (p *pool) arriveLocked(key string, e *comingChild, child *proc) (gone *proc) {
	if !p.dropComingLocked(key, e) {
		e.ready <- child // buffered for this one value
		return nil
	}
	if child == nil {
		return nil
	}
	if p.closed {
		return child
	}
	p.idle[key] = append(p.idle[key], &warmChild{p: child, key: key, born: time.Now(), early: !e.refill})
	return nil
}

// reap ends a child the pool will not keep and waits for its exit; nil is
// nothing to reap.
func reap(child *proc) {
	if child != nil {
		child.discard()
		<-child.exited
	}
}

// dropComingLocked takes e out of key's children on their way; false when
// it was no longer there (a run claimed it).
func (p *pool) dropComingLocked(key string, e *comingChild) bool {
	list := p.coming[key]
	i := slices.Index(list, e)
	if i < 0 {
		return false
	}
	if list = slices.Delete(list, i, i+1); len(list) == 0 {
		delete(p.coming, key)
	} else {
		p.coming[key] = list
	}
	return true
}

// startingAll is how many children are being started, for every key.
func (p *pool) startingAll() int {
	n := 0
	for _, use := range p.keys {
		n += use.starting
	}
	return n
}

// startWarm starts a child for spec and waits for it to answer (pi has
// loaded everything and waits for commands); nil if it does not.
func (p *pool) startWarm(spec warmSpec) *proc {
	reply := make(chan *proc, 1)
	select {
	case p.spawn <- spawnRequest{spec: spec, reply: reply}:
	case <-p.stop:
		return nil
	}
	child := <-reply
	if child == nil {
		return nil
	}
	if err := command(child, "ready", map[string]any{"type": "get_state"}); err != nil {
		// pi's stderr may echo what it was given: masked like all it says.
		p.log.Warn("warm pool: pi did not answer", "error", err, "stderr", p.a.sanitizer.Sanitize(lastLine(child.stderr.String())))
		child.discard()
		return nil
	}
	p.mu.Lock()
	hook := p.startedHook
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	return child
}

// writeCommand sends one RPC command, named id, to a child.
func writeCommand(child *proc, id string, cmd map[string]any) error {
	cmd["id"] = id
	line, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	_, err = child.stdin.Write(append(line, '\n'))
	return err
}

// command sends one RPC command to a waiting child and reads its answer.
func command(child *proc, id string, cmd map[string]any) error {
	if err := writeCommand(child, id, cmd); err != nil {
		return err
	}
	deadline := time.NewTimer(warmHandshake)
	defer deadline.Stop()
	for {
		select {
		case rec, ok := <-child.lines:
			if !ok {
				return fmt.Errorf("pi exited")
			}
			var r struct {
				Type    string `json:"type"`
				ID      string `json:"id"`
				Success bool   `json:"success"`
				Error   string `json:"error"`
			}
			if json.Unmarshal(rec, &r) != nil || r.Type != "response" || r.ID != id {
				continue
			}
			if !r.Success {
				return fmt.Errorf("%s: %s", cmd["type"], r.Error)
			}
			return nil
		case <-deadline.C:
			return fmt.Errorf("%s: no answer within %s", cmd["type"], warmHandshake)
		}
	}
}

func (p *pool) count() int {
	n := 0
	for _, l := range p.idle {
		n += len(l)
	}
	return n
}

// oldestOtherLocked is the oldest idle child of another key that was used
// less recently than key, which a refill of key may end for room; nil when
// there is none. Only the kind used last takes room from the other: two
// kinds whose keeps together pass the pool's size, refilled at once, ended
// each other's children in turn for as long as both refills ran (41
// evictions in 30 s in the end-to-end warm pool test).
func (p *pool) oldestOtherLocked(key string) *warmChild {
	var oldest *warmChild
	for k, l := range p.idle {
		if k != key && len(l) > 0 && p.keys[key].outranks(p.keys[k]) && (oldest == nil || l[0].born.Before(oldest.born)) {
			oldest = l[0]
		}
	}
	return oldest
}

func (p *pool) removeLocked(w *warmChild) {
	l := p.idle[w.key]
	for i, x := range l {
		if x == w {
			p.idle[w.key] = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if len(p.idle[w.key]) == 0 {
		delete(p.idle, w.key)
	}
	p.evictions.Add(1)
	w.p.discard()
}

// janitor ends idle children past their TTL, dead ones, and the oldest
// while the pool is over its memory cap; it forgets keys unused for a TTL.
func (p *pool) janitor() {
	defer p.wg.Done()
	// Often enough that an expired child goes within a few seconds of its
	// TTL; each pass reads one /proc file per idle child.
	tick := time.NewTicker(min(p.ttl/4, 5*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.sweep(time.Now())
		case <-p.stop:
			return
		}
	}
}

func (p *pool) sweep(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var all []*warmChild
	for _, l := range p.idle {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].born.Before(all[j].born) })
	// The live ones, oldest first, with their resident memory: the
	// oldest go while the pool is over its cap.
	type sized struct {
		w   *warmChild
		rss int64
	}
	var live []sized
	var total int64
	for _, w := range all {
		ttl := p.ttl
		if w.early {
			ttl = min(ttl, p.earlyTTL)
		}
		if w.p.ended() || now.Sub(w.born) > ttl {
			p.removeLocked(w)
			continue
		}
		rss := ResidentBytes(w.p.pid)
		live = append(live, sized{w, rss})
		total += rss
	}
	for _, l := range live {
		if total <= p.maxBytes {
			break
		}
		total -= l.rss
		p.removeLocked(l.w)
	}
	for file, w := range p.kept {
		if now.Sub(w.born) > keptTTL {
			delete(p.kept, file)
			p.evictions.Add(1)
			w.p.discard()
		}
	}
	for k, use := range p.keys {
		if use.running == 0 && use.starting == 0 && now.Sub(use.lastUsed) > p.ttl {
			delete(p.keys, k)
		}
	}
}

// warmMaxBytes is the memory cap of a pool of size children: what the
// configuration says, or by default room for each of them, DefaultWarmMaxBytes
// at least.
func warmMaxBytes(configured int64, size int) int64 {
	if configured > 0 {
		return configured
	}
	return max(DefaultWarmMaxBytes, int64(size)*warmChildBytes)
}

// ResidentBytes is a process's resident memory, from /proc (0 elsewhere).
func ResidentBytes(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// stats reads the counters and the idle count.
func (p *pool) stats() api.PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return api.PoolStats{Warm: p.count(), Kept: len(p.kept), Resumed: p.resumed.Load(), Hits: p.hits.Load(), Waited: p.waited.Load(), Misses: p.misses.Load(),
		Evictions: p.evictions.Load(), EarlyStarted: p.earlyStarted.Load(), EarlyTaken: p.earlyTaken.Load()}
}

// close kills every idle child and stops the pool's goroutines; children
// taken by running tasks end with their runs.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var children []*proc
	for _, l := range p.idle {
		for _, w := range l {
			children = append(children, w.p)
		}
	}
	for _, w := range p.kept {
		children = append(children, w.p)
	}
	p.idle, p.kept = map[string][]*warmChild{}, map[string]*warmChild{}
	p.mu.Unlock()
	close(p.stop)
	p.refills.Wait()
	p.wg.Wait()
	// Reaped before close returns: nothing of the pool runs after it.
	for _, c := range children {
		c.discard()
	}
	for _, c := range children {
		<-c.exited
	}
}
