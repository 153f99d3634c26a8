package doctor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/profiles"
)

// Run runs every check in order, for cfg, looking with deps. A check that
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
	queues := folderQueues(cfg)
	rctx := Context{Cwd: cfg.Cwd, DataDir: cfg.DataDir, AgentDir: cfg.AgentDir, Address: cfg.Address, Namespace: cfg.Namespace, Local: cfg.Local, UIURL: cfg.UIURL}
	for _, q := range queues {
		rctx.TaskQueues = append(rctx.TaskQueues, q.Name)
	}
	var out []Result
	add := func(r Result) Result { out = append(out, r); return r }

	// The programs.
	pi := add(checkPi(ctx, deps.FindPi))
	prefix, _ := pi.Details["path"].(string)
	if prefix != "" {
		prefix = filepath.Dir(prefix)
	}
	add(checkNode(ctx, deps.NodeVersion, prefix))

	// The service, its socket and key: only a local one has them.
	lock := ServiceLock{}
	state := serviceOther
	keyFailed := false
	if cfg.Local {
		lock = deps.ServiceLock(cfg.DataDir)
		var r Result
		r, state = checkService(lock, lock.Held || deps.Answers(cfg.Address), cfg.Address, cfg.DataDir)
		add(r)
		if state == serviceRuns {
			add(checkSocket(ctx, deps.AskSocket, connection.SocketPath(cfg.DataDir),
				SocketInfo{Address: cfg.Address, Namespace: cfg.Namespace, TaskQueue: cfg.TaskQueue}))
		} else {
			add(skip(CheckSocket, "no subagents dev runs for this data dir, so no socket answers (see service)"))
		}
		mode := map[serviceState]keyMode{serviceRuns: keyNeeded, serviceOther: keyOptional, serviceDown: keyLater}[state]
		keyFailed = add(checkAPIKey(deps.ReadKey, cfg.DataDir, mode)).Status == Fail
	} else {
		why := "Temporal at " + cfg.Address + " is not this machine's local service: no local service, socket or key to check"
		add(skip(CheckService, why))
		add(skip(CheckSocket, why))
		add(skip(CheckAPIKey, why))
	}

	// Temporal: the namespace, its search attributes, the workers.
	var fe Frontend
	nsOK := false
	switch {
	case state == serviceDown:
		for _, name := range []string{CheckNamespace, CheckSearchAttributes, CheckWorkers} {
			add(skip(name, "needs the service, which does not run (see service)"))
		}
	case keyFailed:
		// Every call would be refused for want of the key: say so once.
		for _, name := range []string{CheckNamespace, CheckSearchAttributes, CheckWorkers} {
			add(skip(name, "needs the service's API key (see api_key)"))
		}
	default:
		f, closeFn, err := deps.Dial(ctx)
		if err == nil {
			defer closeFn()
			fe = f
		}
		ns := add(withTimeout(ctx, func(ctx context.Context) Result { return checkNamespace(ctx, fe, err, cfg) }))
		nsOK = ns.Status == OK
		if nsOK {
			add(withTimeout(ctx, func(ctx context.Context) Result { return checkSearchAttributes(ctx, fe, cfg.Namespace) }))
			add(withTimeout(ctx, func(ctx context.Context) Result { return checkWorkers(ctx, fe, queues, cfg.Now) }))
		} else {
			add(skip(CheckSearchAttributes, "needs the namespace (see namespace)"))
			add(skip(CheckWorkers, "needs the namespace (see namespace)"))
		}
	}

	// The folder's files.
	opts := profiles.Options{Cwd: cfg.Cwd, AgentDir: cfg.AgentDir, PromptDirs: cfg.PromptDirs}
	var list []*profiles.Profile
	set, loadErr := profiles.Load(opts)
	if loadErr == nil {
		list = set.List(true)
	}
	add(checkProfiles(list, loadErr, os.ReadFile))
	plans, plansErr := profiles.ListPlans(opts)
	add(checkPlans(plans, plansErr, cfg.AgentDir))
	add(checkSettings(cfg, os.ReadFile))
	settings, _ := profiles.LoadConfig(cfg.AgentDir, cfg.Cwd, cfg.Getenv)
	uses, unresolved := modelUses(list, settings.Models, defaultProvider(cfg.AgentDir, cfg.Cwd, os.ReadFile))
	home, _ := os.UserHomeDir()
	creds := readCredentials(cfg.AgentDir, os.ReadFile, cfg.Getenv, func(p string) bool { _, err := os.Stat(p); return err == nil }, home)
	add(checkModelKeys(uses, unresolved, creds, cfg.AgentDir))

	// The machine.
	switch {
	case cfg.UIURL == "":
		add(skip(CheckUI, "no UI address is known for "+cfg.Address+": pass --ui-url or set SUBAGENTS_UI_URL to check one"))
	case state == serviceDown:
		add(skip(CheckUI, "the service serves the UI, and it does not run (see service)"))
	default:
		add(checkUI(ctx, deps.HTTPGet, cfg.UIURL, cfg.Local))
	}
	add(checkDisk(deps.FreeSpace, cfg.DataDir, cfg.MinFree))

	// What was left behind.
	sessionLocks, sessionErr := deps.StaleSessionLocks(cfg.DataDir, cfg.Now)
	add(checkStaleLocks(lock, sessionLocks, sessionErr, cfg.DataDir))
	stale, staleErr := deps.StaleWorktrees(cfg.DataDir)
	add(checkStaleWorktrees(ctx, cfg, stale, staleErr, deps.Git, func(p string) bool {
		_, err := os.Stat(p)
		return err == nil || !errors.Is(err, fs.ErrNotExist)
	}))
	if nsOK {
		add(withTimeout(ctx, func(ctx context.Context) Result { return checkUnacknowledged(ctx, fe, cfg.Now, cfg.StaleAfter) }))
	} else {
		why := "needs Temporal and the namespace (see namespace)"
		switch {
		case state == serviceDown:
			why = "needs the service, which does not run (see service)"
		case keyFailed:
			why = "needs the service's API key (see api_key)"
		}
		add(skip(CheckUnacknowledged, why))
	}
	return newReport(rctx, out)
}

// withTimeout runs a check that calls Temporal within callTimeout.
func withTimeout(ctx context.Context, check func(context.Context) Result) Result {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return check(ctx)
}
