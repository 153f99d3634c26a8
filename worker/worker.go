// Package worker wires the subagent workflows and activities into a Temporal
// worker, and holds the worker's configuration.
package worker

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/gates"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/metrics"
	"github.com/durable-pi/subagents/profiles"
	"github.com/durable-pi/subagents/workflows"
)

// DefaultWorkflowCache is how many workflows a worker keeps in memory
// between their workflow tasks: every running delegation and session of a
// busy machine fits, so their next step needs no replay; thousands of idle
// sessions beyond it are replayed from history when a `send` comes, which
// takes milliseconds.
const DefaultWorkflowCache = 2000

// Config is a worker's configuration.
type Config struct {
	TaskQueue string
	// DataDir holds session files and artifacts (default DefaultDataDir()).
	DataDir string
	// LegacySessionsDir is where the sessions contract's own extension kept
	// its sessions (default ~/.pi/subagent-sessions): they are imported
	// when resumed here (activities.Config.LegacySessionsDir).
	LegacySessionsDir string
	Pi                Pi
	// ChildEnv is added to every child pi's environment.
	ChildEnv []string
	// ChildEnvPolicy decides which of the worker's own variables a child
	// sees (the secrets of the service never).
	ChildEnvPolicy activities.EnvPolicy
	// OutputMaxChars caps a child's output in results (default 8000).
	OutputMaxChars int
	// Host names this machine's queue (HostQueue; default DefaultHost()).
	Host string
	// Metrics, when set, gets the child runs' series; MetricsAddr is where
	// Serve publishes it ("" for nowhere).
	Metrics     *metrics.Metrics
	MetricsAddr string
	// MaxDepth is the deepest subagent this worker runs, whatever a
	// workflow's input says (0: the settings' maxDepth, default
	// profiles.DefaultMaxDepth); it may only lower the settings'.
	MaxDepth int
	// DelegationExtension is the pi extension file that gives a child the
	// delegation tools its profile lists (default: DelegationExtension's
	// search). None found: no child delegates.
	DelegationExtension string
	// ServiceEnv is what a child that delegates gets in its environment to
	// reach this service (default: serviceEnv).
	ServiceEnv []string
	// ServiceAddress and ServiceNamespace are the Temporal frontend and
	// namespace this worker polls, for a child that delegates (serviceEnv):
	// "" takes the process's TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE.
	ServiceAddress   string
	ServiceNamespace string
	// WorkflowCache sets the process's workflow cache size (the SDK's
	// sticky cache, shared by every worker of the process); 0 keeps it.
	WorkflowCache int
	// WarmPool and WarmTTL size the activities' pool of warm child pi
	// processes (activities.Config); 0: every child starts cold.
	WarmPool int
	WarmTTL  time.Duration
	// EarlyStart starts a task's child as its delegation is resolved
	// (activities.Config.EarlyStart): for a worker that runs what it
	// resolves, as `subagents dev`'s single worker does.
	EarlyStart bool
	// Logger receives the warm pool's own trouble; default slog's.
	Logger *slog.Logger
}

// NestedEntry is the file of this project's pi extension that a child
// which delegates loads (its index.ts registers nothing in a child).
const NestedEntry = "src/nested.ts"

// DelegationExtension finds the extension file a child that delegates
// loads: $SUBAGENTS_EXTENSION_DIR's, else the extension folder of the
// source tree this binary lies in (bin/subagents beside extension/), else
// "" (no child delegates).
func DelegationExtension() string {
	var dirs []string
	if d := os.Getenv("SUBAGENTS_EXTENSION_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Join(filepath.Dir(exe), "..", "extension"))
	}
	for _, d := range dirs {
		f := filepath.Join(d, NestedEntry)
		if _, err := os.Stat(f); err == nil {
			if abs, err := filepath.Abs(f); err == nil {
				return abs
			}
		}
	}
	return ""
}

// serviceEnv is what a child that delegates needs to reach this service:
// the task queue and data dir of this worker, the Temporal address and
// namespace the worker's process was given (never its API key or TLS
// material: a remote service's child that delegates needs them from
// ChildEnv), and this binary as the subagents command when it is one.
func serviceEnv(cfg Config) []string {
	env := []string{"SUBAGENTS_TASK_QUEUE=" + cfg.TaskQueue, "SUBAGENTS_DATA_DIR=" + cfg.DataDir}
	for k, v := range map[string]string{"TEMPORAL_ADDRESS": cfg.ServiceAddress, "TEMPORAL_NAMESPACE": cfg.ServiceNamespace} {
		if v = cmp.Or(v, os.Getenv(k)); v != "" {
			env = append(env, k+"="+v)
		}
	}
	slices.Sort(env)
	if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "subagents" {
		env = append(env, "SUBAGENTS_BIN="+exe)
	}
	return env
}

// DefaultDataDir is $SUBAGENTS_DATA_DIR, else ~/.pi/subagents
// (connection.DefaultDataDir).
func DefaultDataDir() (string, error) { return connection.DefaultDataDir() }

// Worker is the process's pollers: the shared task queue, with every
// workflow and activity, and its host's queue (HostQueue) with the steps
// that need the host's files.
type Worker struct {
	shared, host sdkworker.Worker
	acts         *activities.Activities
	// Queues are the task queues polled, shared first.
	Queues  []string
	dataDir string
	logger  *slog.Logger
	// stopSweep ends the sweeper Start began.
	stopSweep chan struct{}
	sweepDone chan struct{}
}

// sweepEvery is how often the worker removes lock and output files of
// sessions that are gone (activities.SweepSessions): they are a few bytes
// each, so hourly keeps the folder tidy at no noticeable cost.
const sweepEvery = time.Hour

// New returns the workers for cfg on c, with everything registered. It does
// not start them.
func New(c client.Client, cfg Config) (*Worker, error) {
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = api.DefaultTaskQueue
	}
	if cfg.Host == "" || cfg.Host == "auto" {
		cfg.Host = DefaultHost()
	}
	if !api.ValidHost(cfg.Host) {
		return nil, errcode.Errorf(errcode.InvalidInput, "--host %q cannot name a task queue (no '@', '/' or spaces)", cfg.Host)
	}
	if cfg.DataDir == "" {
		d, err := DefaultDataDir()
		if err != nil {
			return nil, err
		}
		cfg.DataDir = d
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("data dir %s: %v", cfg.DataDir, err))
	}
	if cfg.DelegationExtension == "" {
		cfg.DelegationExtension = DelegationExtension()
	}
	if cfg.ServiceEnv == nil {
		cfg.ServiceEnv = serviceEnv(cfg)
	}
	// The key that signs the session of each child that delegates, for the
	// service that takes its delegations (connection/nesting.go).
	nestingKey, err := connection.EnsureNestingKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	profs := &profiles.Activities{AgentDir: agentDir(cfg.ChildEnv), PromptDirs: profiles.DefaultPromptDirs(), MaxDepth: cfg.MaxDepth,
		// The knobs of a pi come with its requests: this process's values
		// are those of whichever pi started the service.
		Getenv:              profiles.WithoutCallerKnobs(os.Getenv),
		DelegationExtension: cfg.DelegationExtension, ServiceEnv: cfg.ServiceEnv, NestingKey: nestingKey}
	acts, err := activities.New(activities.Config{
		Pi:                cfg.Pi.Path,
		PathPrefix:        cfg.Pi.PathPrefix,
		DataDir:           cfg.DataDir,
		LegacySessionsDir: cfg.LegacySessionsDir,
		Env:               cfg.ChildEnv,
		ChildEnvPolicy:    cfg.ChildEnvPolicy,
		OutputMaxChars:    cfg.OutputMaxChars,
		Admit:             profs.Admit,
		Observer:          observer(cfg.Metrics),
		WarmPool:          cfg.WarmPool,
		WarmTTL:           cfg.WarmTTL,
		EarlyStart:        cfg.EarlyStart,
		Logger:            cfg.Logger,
		Heartbeat:         c.RecordActivityHeartbeat,
	})
	if err != nil {
		return nil, err
	}
	if cfg.Metrics != nil && (cfg.WarmPool > 0 || cfg.EarlyStart) {
		cfg.Metrics.WatchPool(acts.PoolStats)
	}
	if cfg.WorkflowCache > 0 {
		sdkworker.SetStickyWorkflowCacheSize(cfg.WorkflowCache)
	}
	opts := sdkworker.Options{
		// A cancel request reaches a running child only in the answer to a
		// heartbeat, and the SDK holds heartbeats back for up to 80% of the
		// heartbeat timeout. Two seconds keeps cancel prompt (pi is killed
		// within about 2 s) at one small RPC per running child per 2 s.
		MaxHeartbeatThrottleInterval:     2 * time.Second,
		DefaultHeartbeatThrottleInterval: 2 * time.Second,
		// A workflow task waits this long for the worker that cached its
		// workflow before any worker takes it. The default 5 s is what a
		// dead worker costs every session it ran; 1 s is still far above a
		// live worker's pickup (a few ms), and a miss only replays a short
		// history.
		StickyScheduleToStartTimeout: time.Second,
	}
	shared := sdkworker.New(c, cfg.TaskQueue, opts)
	Register(shared, acts, profs, &activities.Sessions{Client: c})
	hostQueue := api.HostQueue(cfg.TaskQueue, cfg.Host)
	host := sdkworker.New(c, hostQueue, opts)
	registerHostActivities(host, acts, profs)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Worker{shared: shared, host: host, acts: acts, Queues: []string{cfg.TaskQueue, hostQueue},
		dataDir: cfg.DataDir, logger: logger}, nil
}

// Start starts both pollers; if the second fails, the first is stopped.
func (w *Worker) Start() error {
	if err := w.shared.Start(); err != nil {
		return err
	}
	if err := w.host.Start(); err != nil {
		w.shared.Stop()
		return err
	}
	w.stopSweep, w.sweepDone = make(chan struct{}), make(chan struct{})
	go w.sweep()
	return nil
}

// sweep removes what sessions that are gone left in the data dir, at start
// and then every sweepEvery, until Stop.
func (w *Worker) sweep() {
	defer close(w.sweepDone)
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		if n, err := activities.SweepSessions(w.dataDir, time.Now()); err != nil {
			w.logger.Warn("session folder sweep", "error", err)
		} else if n > 0 {
			w.logger.Info("session folder sweep", "removed", n)
		}
		// Worktrees that runs which died left, whose sessions no attempt
		// holds any more: their change captured, then removed.
		if n, err := activities.SettleWorktrees(context.Background(), w.dataDir, w.logger); err != nil {
			w.logger.Warn("worktree settle", "error", err)
		} else if n > 0 {
			w.logger.Info("worktree settle", "settled", n)
		}
		select {
		case <-tick.C:
		case <-w.stopSweep:
			return
		}
	}
}

// Stop stops both, the host's first: running children end with their
// activities and continue on the next worker.
func (w *Worker) Stop() {
	if w.stopSweep != nil {
		close(w.stopSweep)
		<-w.sweepDone
		w.stopSweep = nil
	}
	w.host.Stop()
	w.shared.Stop()
	w.acts.Close()
}

// PoolStats are the warm pool's counters.
func (w *Worker) PoolStats() api.PoolStats { return w.acts.PoolStats() }

// DefaultHost is this machine's name, as a host queue names it.
func DefaultHost() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// observer is m as the activities' RunObserver, or none.
func observer(m *metrics.Metrics) activities.RunObserver {
	if m == nil {
		return nil
	}
	return m
}

// Register registers every workflow and activity on r, under the names that
// histories record.
func Register(r sdkworker.Registry, acts *activities.Activities, profs *profiles.Activities, sessions *activities.Sessions) {
	res := resolver{profs: profs, acts: acts}
	r.RegisterWorkflowWithOptions(workflows.Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.Delegation, workflow.RegisterOptions{Name: api.DelegationWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.ReadSession, workflow.RegisterOptions{Name: api.ReadSessionWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.Plan, workflow.RegisterOptions{Name: api.PlanWorkflowName})
	r.RegisterActivityWithOptions(gatesOf(acts, profs).RunGate, activity.RegisterOptions{Name: api.RunGateActivityName})
	r.RegisterActivityWithOptions(acts.ReadSession, activity.RegisterOptions{Name: api.ReadSessionActivityName})
	r.RegisterActivityWithOptions(acts.RunPi, activity.RegisterOptions{Name: api.RunPiActivityName})
	r.RegisterActivityWithOptions(res.ResolveTasks, activity.RegisterOptions{Name: api.ResolveTasksActivityName})
	r.RegisterActivityWithOptions(sessions.LookupSessions, activity.RegisterOptions{Name: api.LookupSessionsActivityName})
	r.RegisterActivityWithOptions(sessions.SendToSession, activity.RegisterOptions{Name: api.SendToSessionActivityName})
	r.RegisterActivityWithOptions(sessions.CancelNested, activity.RegisterOptions{Name: workflows.CancelNestedActivityName})
	// Schedules (docs/schedules.md): a fire, the result it leaves, and its preparation.
	r.RegisterWorkflowWithOptions(workflows.Scheduled, workflow.RegisterOptions{Name: api.ScheduledWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.ScheduledResult, workflow.RegisterOptions{Name: api.ScheduledResultWorkflowName})
	r.RegisterActivityWithOptions(schedulingOf(profs).PrepareScheduled, activity.RegisterOptions{Name: api.PrepareScheduledActivityName})
}

// registerHostActivities registers what runs on a host queue: the steps
// that need a cwd or a session file on this machine.
func registerHostActivities(r sdkworker.Registry, acts *activities.Activities, profs *profiles.Activities) {
	r.RegisterActivityWithOptions(acts.RunPi, activity.RegisterOptions{Name: api.RunPiActivityName})
	r.RegisterActivityWithOptions(acts.ReadSession, activity.RegisterOptions{Name: api.ReadSessionActivityName})
	r.RegisterActivityWithOptions(gatesOf(acts, profs).RunGate, activity.RegisterOptions{Name: api.RunGateActivityName})
	r.RegisterActivityWithOptions(resolver{profs: profs, acts: acts}.ResolveTasks, activity.RegisterOptions{Name: api.ResolveTasksActivityName})
	r.RegisterActivityWithOptions(schedulingOf(profs).PrepareScheduled, activity.RegisterOptions{Name: api.PrepareScheduledActivityName})
}

// schedulingOf is a schedule's preparation, reading settings and plans where profs does.
func schedulingOf(profs *profiles.Activities) *activities.Scheduling {
	return &activities.Scheduling{AgentDir: profs.AgentDir, PromptDirs: profs.PromptDirs, Getenv: profs.Getenv}
}

// gatesOf is the gate activity, reading the settings where profs does and
// starting its command under the reaper of acts.
func gatesOf(acts *activities.Activities, profs *profiles.Activities) *gates.Activities {
	return &gates.Activities{AgentDir: profs.AgentDir, Getenv: profs.Getenv, Procs: acts}
}

// resolver is the ResolveTasks activity: the tasks' profiles, after which
// the worker starts the children of the tasks about to run, if it starts
// early (activities.Config.EarlyStart).
type resolver struct {
	profs *profiles.Activities
	acts  *activities.Activities
}

func (r resolver) ResolveTasks(ctx context.Context, req profiles.ResolveRequest) ([]profiles.ResolvedTask, error) {
	out, err := r.profs.ResolveTasks(ctx, req)
	if err != nil {
		return out, err
	}
	var runs []api.RunPiInput
	for i, t := range out {
		if i < len(req.Tasks) && req.Tasks[i].Early && t.Error == nil {
			in := t.Child
			in.Cwd, in.Depth = req.Tasks[i].Cwd, req.Depth
			runs = append(runs, in)
		}
	}
	r.acts.StartEarly(runs)
	return out, nil
}

// agentDir is the pi config dir the children see: PI_CODING_AGENT_DIR of
// their environment, else pi's default.
func agentDir(childEnv []string) string {
	for i := len(childEnv) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(childEnv[i], "PI_CODING_AGENT_DIR="); ok {
			return v
		}
	}
	return profiles.DefaultAgentDir()
}

// DefaultDevWarmPool is `subagents dev`'s pool: four children, what one
// delegate_to_subagents call runs at once, in about 450 MiB.
const DefaultDevWarmPool = 4
