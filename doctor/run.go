package doctor

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/profiles"
	"github.com/durable-pi/subagents/worker"
)

// Run runs every check, for cfg, looking with deps, within cfg.Timeout:
// the checks run in four lanes side by side (the programs; the service
// and Temporal; the folder's files; the machine and what was left
// behind), each check within its own bound, and the report lists them in
// Checks' order whatever order they ended in. A check that runs out of
// time says so as its verdict and the others still report. A check that
// needs what an earlier one found missing (the service, the namespace) is
// skipped, saying which. Nothing is started, stopped or changed.
func Run(ctx context.Context, cfg Config, deps Deps) Report {
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if cfg.Now.IsZero() {
		cfg.Now = time.Now()
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.MinFree == 0 {
		cfg.MinFree = DefaultMinFree
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	l := lanes{ctx: ctx, timeout: cfg.Timeout}

	queues := folderQueues(cfg)
	rctx := Context{Cwd: cfg.Cwd, DataDir: cfg.DataDir, AgentDir: cfg.AgentDir, Address: cfg.Address, Namespace: cfg.Namespace, Local: cfg.Local,
		UIURL: cmp.Or(cfg.UIURL, cfg.GuessUIURL)}
	for _, q := range queues {
		rctx.TaskQueues = append(rctx.TaskQueues, q.Name)
	}
	// Each lane puts its results in their own slots: the order is Checks'.
	slots := make([]Result, len(Checks))
	add := func(r Result) Result {
		slots[slices.Index(Checks, r.Name)] = r
		return r
	}

	var wg sync.WaitGroup
	lane := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	// What the lanes start from: whether the local service runs (its
	// lock, local), and else whether a Temporal answers at its address
	// (within frontendTimeout). The lanes that need neither start first:
	// a frontend that hangs takes nothing from pi's time.
	lock := ServiceLock{}
	if cfg.Local {
		lock = deps.ServiceLock(cfg.DataDir)
	}
	lane(func() { programsLane(l, cfg, deps, lock, add) })
	lane(func() { filesLane(l, cfg, add) })
	state := serviceOther
	if cfg.Local {
		var answered error
		if !lock.Held {
			actx, cancel := context.WithTimeout(ctx, frontendTimeout)
			answered = deps.Answers(actx, cfg.Address)
			cancel()
		}
		var r Result
		r, state = checkService(lock, answered, cfg.Address, cfg.DataDir)
		add(r)
	} else {
		add(skip(CheckService, "Temporal at "+cfg.Address+" is not this machine's local service: no local service, socket or key to check"))
	}
	answer := &socketAnswer{done: make(chan struct{})}
	lane(func() { serviceLane(l, cfg, deps, queues, state, answer, add) })
	lane(func() { machineLane(l, cfg, deps, lock, state, answer, add) })
	wg.Wait()
	// The report names the UI the check asked: where the service said.
	if u, _ := slots[slices.Index(Checks, CheckUI)].Details["url"].(string); u != "" {
		rctx.UIURL = u
	}
	return newReport(rctx, slots)
}

// socketAnswer is what the service said on its socket, for the UI check,
// which asks the UI where the service says it serves it. It is set once:
// when the socket check has the answer, or has none (it failed, ran out,
// or was not asked).
type socketAnswer struct {
	once sync.Once
	done chan struct{}
	info SocketInfo
	said bool
}

func (a *socketAnswer) set(info SocketInfo, said bool) {
	a.once.Do(func() { a.info, a.said = info, said; close(a.done) })
}

// wait is the answer, or none when ctx ends first.
func (a *socketAnswer) wait(ctx context.Context) (SocketInfo, bool) {
	select {
	case <-a.done:
		return a.info, a.said
	case <-ctx.Done():
		return SocketInfo{}, false
	}
}

// programsLane: pi, then the Node beside it.
func programsLane(l lanes, cfg Config, deps Deps, lock ServiceLock, add func(Result) Result) {
	lookup := worker.PiLookup{Flag: cfg.Pi}
	if deps.PiLookup != nil {
		lookup = deps.PiLookup(cfg.Pi)
	}
	var judged piJudged
	if cfg.Pi == "" && lock.Held && lock.Pid > 0 {
		// The running service's pi is the one its children run on.
		if deps.ServicePiLookup != nil {
			if sl, known := deps.ServicePiLookup(lock.Pid); known {
				lookup, judged.servicePid = sl, lock.Pid
			}
		}
		if judged.servicePid == 0 {
			judged.unreadPid = lock.Pid
		}
	}
	pi := add(l.check(CheckPi, piTimeout, func(ctx context.Context) Result {
		found, err := deps.FindPi(ctx, lookup)
		return checkPi(found, err, judged)
	}))
	if piMissing(pi) {
		// A Node elsewhere would be judged for nothing: pi runs on the
		// one beside it first, and without pi nothing runs on any.
		add(skip(CheckNode, "needs pi (see pi): the Node that matters is the one pi runs on, found beside it first"))
		return
	}
	prefix, _ := pi.Details["path"].(string)
	if prefix != "" {
		prefix = filepath.Dir(prefix)
	}
	add(l.check(CheckNode, commandTimeout, func(ctx context.Context) Result {
		return checkNode(ctx, deps.NodeVersion, prefix)
	}))
}

// serviceLane: the local service's socket and key, then Temporal: the
// namespace, then its search attributes, the workers and the waiting
// results side by side.
func serviceLane(l lanes, cfg Config, deps Deps, queues []Queue, state serviceState, answer *socketAnswer, add func(Result) Result) {
	keyFailed := false
	if cfg.Local {
		if state == serviceRuns {
			ask := func(ctx context.Context, path string) (SocketInfo, error) {
				info, err := deps.AskSocket(ctx, path)
				if err == nil {
					answer.set(info, true)
				}
				return info, err
			}
			add(l.check(CheckSocket, socketTimeout, func(ctx context.Context) Result {
				return checkSocket(ctx, ask, connection.SocketPath(cfg.DataDir),
					SocketInfo{Address: cfg.Address, Namespace: cfg.Namespace, TaskQueue: cfg.TaskQueue})
			}))
		}
		// No answer (when one came, this sets nothing).
		answer.set(SocketInfo{}, false)
		if state != serviceRuns {
			add(skip(CheckSocket, "no subagents dev runs for this data dir, so no socket answers (see service)"))
		}
		mode := map[serviceState]keyMode{serviceRuns: keyNeeded, serviceOther: keyOptional, serviceDown: keyLater, serviceHung: keyLater}[state]
		keyFailed = add(l.check(CheckAPIKey, localTimeout, func(context.Context) Result {
			return checkAPIKey(deps.ReadKey, cfg.DataDir, mode)
		})).Status == Fail
	} else {
		why := "Temporal at " + cfg.Address + " is not this machine's local service: no local service, socket or key to check"
		add(skip(CheckSocket, why))
		add(skip(CheckAPIKey, why))
		answer.set(SocketInfo{}, false)
	}

	needs := func(why string) {
		for _, name := range []string{CheckNamespace, CheckSearchAttributes, CheckWorkers, CheckUnacknowledged} {
			add(skip(name, why))
		}
	}
	switch {
	case state == serviceDown:
		needs("needs the service, which does not run (see service)")
		return
	case state == serviceHung:
		needs("needs a Temporal that answers at " + cfg.Address + ", and none does (see service)")
		return
	case keyFailed:
		// Every call would be refused for want of the key: say so once.
		needs("needs the service's API key (see api_key)")
		return
	}
	conn := &dialed{}
	defer conn.finish()
	ns := add(l.check(CheckNamespace, namespaceTimeout, func(ctx context.Context) Result {
		fe, closeFn, err := deps.Dial(ctx)
		if err == nil && !conn.keep(fe, closeFn) {
			err = ctx.Err()
		}
		return checkNamespace(ctx, fe, err, cfg)
	}))
	if ns.Status != OK {
		for _, name := range []string{CheckSearchAttributes, CheckWorkers} {
			add(skip(name, "needs the namespace (see namespace)"))
		}
		add(skip(CheckUnacknowledged, "needs Temporal and the namespace (see namespace)"))
		return
	}
	fe := conn.frontend()
	var wg sync.WaitGroup
	side := func(name string, f func(context.Context) Result) {
		wg.Add(1)
		go func() { defer wg.Done(); add(l.check(name, callTimeout, f)) }()
	}
	side(CheckSearchAttributes, func(ctx context.Context) Result { return checkSearchAttributes(ctx, fe, cfg.Namespace) })
	side(CheckWorkers, func(ctx context.Context) Result { return checkWorkers(ctx, fe, queues, cfg.Now) })
	side(CheckUnacknowledged, func(ctx context.Context) Result { return checkUnacknowledged(ctx, fe, cfg.Now, cfg.StaleAfter) })
	wg.Wait()
}

// filesLane: the folder's profiles, plans, settings and the keys for the
// models its profiles name.
func filesLane(l lanes, cfg Config, add func(Result) Result) {
	opts := profiles.Options{Cwd: cfg.Cwd, AgentDir: cfg.AgentDir, PromptDirs: cfg.PromptDirs, Getenv: cfg.Getenv}
	type listed struct {
		r    Result
		list []*profiles.Profile
	}
	got, _, late, why := within(l, localTimeout, func(context.Context) listed {
		var list []*profiles.Profile
		set, err := profiles.Load(opts)
		if err == nil {
			list = set.List(true)
		}
		return listed{checkProfiles(list, err, os.ReadFile), list}
	})
	if late {
		add(lateResult(CheckProfiles, why, got.r, false))
	} else {
		add(got.r)
	}
	add(l.check(CheckPlans, localTimeout, func(context.Context) Result {
		plans, err := profiles.ListPlans(opts)
		return checkPlans(plans, err, cfg.AgentDir, cfg.Cwd, profileLookup(opts, cfg.Getenv))
	}))
	add(l.check(CheckSettings, localTimeout, func(context.Context) Result { return checkSettings(cfg, os.ReadFile) }))
	if late {
		add(skip(CheckModelKeys, "needs the profiles, which could not be read in time (see profiles)"))
		return
	}
	add(l.check(CheckModelKeys, localTimeout, func(context.Context) Result {
		settings, _ := profiles.LoadConfig(cfg.AgentDir, cfg.Cwd, cfg.Getenv)
		uses, unresolved := modelUses(got.list, settings.Models, defaultProvider(cfg.AgentDir, cfg.Cwd, os.ReadFile))
		home, _ := os.UserHomeDir()
		creds := readCredentials(cfg.AgentDir, os.ReadFile, cfg.Getenv, func(p string) bool { _, err := os.Stat(p); return err == nil }, home)
		return checkModelKeys(uses, unresolved, creds, cfg.AgentDir)
	}))
}

// machineLane: the UI, the disk, and what was left behind. The UI and the
// git commands may each hang on their own: they run side by side.
func machineLane(l lanes, cfg Config, deps Deps, lock ServiceLock, state serviceState, answer *socketAnswer, add func(Result) Result) {
	var wg sync.WaitGroup
	side := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	side(func() {
		url, from := cfg.UIURL, uiGiven
		switch {
		case state == serviceDown || state == serviceHung:
			add(skip(CheckUI, "the service serves the UI, and it does not run (see service)"))
			return
		case url == "" && cfg.Local:
			// Where the running service says it serves the UI (its
			// --ui-port), else its frontend's port + 1000.
			info, said := answer.wait(l.ctx)
			switch {
			case !said && state == serviceRuns:
				// One cause, one failure: a guess at its UI would fail
				// for the socket's sake.
				add(skip(CheckUI, "the service says on its socket where it serves its UI, and its socket does not answer (see socket)"))
				return
			case said && info.UIURL != "":
				url, from = info.UIURL, uiFromService
			case said && info.Headless:
				add(skip(CheckUI, "the local service runs without the Temporal UI (--headless): pass --ui-url to check another"))
				return
			default:
				url, from = cfg.GuessUIURL, uiGuessed
			}
		}
		if url == "" {
			add(skip(CheckUI, "no UI address is known for "+cfg.Address+": pass --ui-url or set SUBAGENTS_UI_URL to check one"))
			return
		}
		add(l.check(CheckUI, httpTimeout, func(ctx context.Context) Result { return checkUI(ctx, deps.HTTPGet, url, from) }))
	})
	side(func() {
		add(l.check(CheckStaleWorktrees, worktreesTimeout, func(ctx context.Context) Result {
			stale, staleErr := deps.StaleWorktrees(cfg.DataDir)
			return checkStaleWorktrees(ctx, cfg, stale, staleErr, deps.Git, func(p string) bool {
				_, err := os.Stat(p)
				return err == nil || !errors.Is(err, fs.ErrNotExist)
			})
		}))
	})
	add(l.check(CheckDisk, localTimeout, func(context.Context) Result { return checkDisk(deps.FreeSpace, cfg.DataDir, cfg.MinFree) }))
	add(l.check(CheckStaleLocks, localTimeout, func(context.Context) Result {
		sessionLocks, sessionErr := deps.StaleSessionLocks(cfg.DataDir, cfg.Now)
		return checkStaleLocks(lock, sessionLocks, sessionErr, cfg.DataDir)
	}))
	wg.Wait()
}

// dialed holds the connection to Temporal the namespace check made, for
// the checks after it; one made after the doctor gave up on it is closed
// by itself.
type dialed struct {
	mu     sync.Mutex
	fe     Frontend
	close  func()
	closed bool
}

// keep takes the connection, or closes it when Run is done with it.
func (d *dialed) keep(fe Frontend, closeFn func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		closeFn()
		return false
	}
	d.fe, d.close = fe, closeFn
	return true
}

func (d *dialed) frontend() Frontend {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fe
}

// finish closes the connection, now or when it is made.
func (d *dialed) finish() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.close != nil {
		d.close()
	}
}
