// Package activities holds the Temporal activities that run child pi
// processes: spawn, event stream parsing, heartbeats, timeouts, loop
// detection, output limits, sanitizing and file context.
package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/extension"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Defaults of the limits a Config leaves at zero.
const (
	// DefaultHeartbeatInterval: progress reaches `status` and the UI within a
	// few seconds; the SDK batches heartbeats, so this is no load on the server.
	DefaultHeartbeatInterval = 2 * time.Second
	// DefaultOutputMaxChars is the task contract's output cap (SUBAGENTS_OUTPUT_MAX_CHARS).
	DefaultOutputMaxChars = 8000
	// DefaultMaxStreamBytes bounds what one run may write on stdout and
	// stderr together. pi repeats whole messages in message_end and agent_end,
	// so hours of real work stay far below it; a child printing without end
	// does not.
	DefaultMaxStreamBytes = 512 << 20
	// DefaultKillGrace is how long pi gets after SIGTERM before SIGKILL: pi
	// stops its tools and flushes its session file well within it (the delegate contract
	// uses the same 5 s).
	DefaultKillGrace = 5 * time.Second
)

// Config is what every child run needs from the worker.
type Config struct {
	// ChildEnvPolicy decides which of the worker's variables a child sees.
	ChildEnvPolicy EnvPolicy
	// Pi is the pi executable.
	Pi string
	// PathPrefix goes first on the child's PATH: the folder holding the
	// Node 22 that pi needs.
	PathPrefix string
	// DataDir holds session files and artifacts.
	DataDir string
	// Env is added to the child's environment after the worker's own
	// (tests point PI_CODING_AGENT_DIR at a scripted model this way).
	Env []string
	// Home is replaced by "~" in everything a run returns (default: the
	// worker user's home folder).
	Home string
	// LegacySessionsDir is where the sessions contract's own extension kept
	// its sticky sessions (default: Home's LegacySessionsDir): a session of
	// it is imported, once, the first time its ID is resumed here.
	LegacySessionsDir string
	HeartbeatInterval time.Duration
	// Heartbeat records a heartbeat by task token (the client's
	// RecordActivityHeartbeat): how a child that runs on through a server
	// outage still learns of a cancel. Nil: it runs to its end.
	Heartbeat      func(ctx context.Context, taskToken []byte, details ...any) error
	OutputMaxChars int
	// Admit decides, before pi starts, whether a run may have what its
	// input asks for. A workflow input is not to be trusted: whoever can
	// start a workflow on the task queue can write one by hand, with any
	// extension, tool or flag, so the worker checks it against the profiles
	// it reads itself (profiles.Activities.Admit). It also returns the
	// profile's apiKey, read at run time so that a key never travels through
	// a workflow history, and the task's output cap. Nil admits every run
	// with no key: this package's own tests only; the worker always sets it.
	Admit          func(api.RunPiInput) (profiles.Admission, error)
	MaxStreamBytes int64
	KillGrace      time.Duration
	// Observer, when set, is told about every child run (metrics).
	Observer RunObserver
	// WarmPool is how many child pi processes the worker may keep started
	// ahead of tasks (0: none; every child starts cold). WarmTTL (default
	// DefaultWarmTTL) is how long an unused one stays; WarmMaxBytes caps
	// their resident memory together (default 128 MiB a child of
	// WarmPool, DefaultWarmMaxBytes at least).
	WarmPool     int
	WarmTTL      time.Duration
	WarmMaxBytes int64
	// EarlyStart starts a task's child as soon as its delegation is
	// resolved (StartEarly), while the session's workflow and its run
	// are still on their way: pi's start (about 300 ms) then overlaps
	// those steps instead of following them. For a worker that runs the
	// tasks it resolves, as `subagents dev` does: with several workers a
	// run may land on another one, and the child started here is wasted.
	EarlyStart bool
	// Logger receives the pool's own trouble (a warm child that did not
	// start); default slog's.
	Logger *slog.Logger
}

// RunObserver is told how each child run ended; outcome is "completed" or
// the lower-case error code ("subagent_timeout", "cancelled", ...).
type RunObserver interface {
	ChildRun(agent, outcome string, elapsed time.Duration, usage api.Usage)
}

// Activities are the worker's activities; their dependencies live here.
type Activities struct {
	cfg       Config
	finalize  string // path of the child-side finalize extension
	sanitizer *Sanitizer
	pool      *pool // nil without a warm pool or early start
	reaper    *reaper
	// exiting counts the children whose runs settled and returned while
	// their pi still exits (exitInBackground).
	exiting sync.WaitGroup
	// recordHeartbeat is activity.RecordHeartbeat; a test sees every call
	// through it (the SDK's test environment holds all but the first of a
	// 30 s window back).
	recordHeartbeat func(ctx context.Context, details ...any)
}

// New fills in cfg's defaults and writes the finalize extension to its cache
// path under the data dir.
func New(cfg Config) (*Activities, error) {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.OutputMaxChars <= 0 {
		cfg.OutputMaxChars = DefaultOutputMaxChars
	}
	if cfg.MaxStreamBytes <= 0 {
		cfg.MaxStreamBytes = DefaultMaxStreamBytes
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.Home == "" {
		cfg.Home, _ = os.UserHomeDir()
	}
	if cfg.LegacySessionsDir == "" && cfg.Home != "" {
		cfg.LegacySessionsDir = filepath.Join(cfg.Home, LegacySessionsDir)
	}
	path, err := writeFinalizeExtension(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	a := &Activities{cfg: cfg, finalize: path, sanitizer: NewSanitizer(cfg.Home), reaper: newReaper(), recordHeartbeat: activity.RecordHeartbeat}
	if cfg.WarmPool > 0 || cfg.EarlyStart {
		if cfg.WarmTTL <= 0 {
			cfg.WarmTTL = DefaultWarmTTL
		}
		cfg.WarmMaxBytes = warmMaxBytes(cfg.WarmMaxBytes, cfg.WarmPool)
		if cfg.Logger == nil {
			cfg.Logger = slog.Default()
		}
		a.cfg = cfg
		a.pool = newPool(a, cfg.WarmPool, cfg.WarmTTL, cfg.WarmMaxBytes, cfg.Logger)
	}
	return a, nil
}

// StartEarly starts the children of runs about to come (a delegation's
// tasks, resolved, their sessions not yet started) when the worker starts
// early (Config.EarlyStart): a run of the same kind then takes one instead
// of starting pi itself. Each run is admitted first, as RunPi would: a run
// that would be refused gets no child. The children start in the
// background; what the runs will find is in place when it returns (a
// millisecond or two of reading profiles), so that a run that comes at
// once still finds its child on the way.
func (a *Activities) StartEarly(runs []api.RunPiInput) {
	if a.pool == nil || !a.cfg.EarlyStart || len(runs) == 0 {
		return
	}
	var order []string
	specs := map[string]warmSpec{}
	count := map[string]int{}
	for _, in := range runs {
		var admission profiles.Admission
		if a.cfg.Admit != nil {
			var err error
			if admission, err = a.cfg.Admit(in); err != nil {
				continue
			}
			in = admission.Context.Apply(in)
		}
		_, spec := a.runSpec(in, admission)
		if spec.key == "" {
			continue
		}
		if _, seen := specs[spec.key]; !seen {
			order = append(order, spec.key)
			specs[spec.key] = spec
		}
		count[spec.key]++
	}
	for _, key := range order {
		a.pool.startEarly(specs[key], count[key])
	}
}

// Close waits for the children of settled runs to exit, ends the warm
// pool's idle children, then lets the reaper end whatever of the worker's
// children is still left (children of running tasks end with their runs).
// The worker calls it once it has stopped.
func (a *Activities) Close() {
	a.exiting.Wait()
	if a.pool != nil {
		a.pool.close()
	}
	a.reaper.close()
}

// PoolStats are the warm pool's counters (zero without a pool).
func (a *Activities) PoolStats() api.PoolStats {
	if a.pool == nil {
		return api.PoolStats{}
	}
	return a.pool.stats()
}

// FinalizeExtensionPath is where the child-side extension was written.
func (a *Activities) FinalizeExtensionPath() string { return a.finalize }

// writeFinalizeExtension writes the embedded extension under a name derived
// from its content, so workers of different versions sharing a data dir never
// overwrite each other's file while a child loads it.
func writeFinalizeExtension(dataDir string) (string, error) {
	sum := sha256.Sum256(extension.FinalizeSource)
	dir := filepath.Join(dataDir, "cache", "extensions")
	path := filepath.Join(dir, "subagent-finalize-"+hex.EncodeToString(sum[:6])+".ts")
	if b, err := os.ReadFile(path); err == nil && string(b) == string(extension.FinalizeSource) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("data dir: %v", err))
	}
	tmp, err := os.CreateTemp(dir, ".subagent-finalize-*")
	if err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("data dir: %v", err))
	}
	_, werr := tmp.Write(extension.FinalizeSource)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(tmp.Name())
		return "", errcode.Errorf(errcode.InvalidInput, "write the finalize extension: %v", errors.Join(werr, cerr))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return "", errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("write the finalize extension: %v", err))
	}
	return path, nil
}
