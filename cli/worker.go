package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/metrics"
	"github.com/durable-pi/subagents/internal/version"
	"github.com/durable-pi/subagents/profiles"
	"github.com/durable-pi/subagents/worker"
)

// WorkerFlags are the settings `subagents dev` and `subagents worker` share.
type WorkerFlags struct {
	TaskQueue      string
	OutputMaxChars int
	Pi             string
	DataDir        string
	LogLevel       string
	LogFormat      string
	MetricsAddr    string
	Host           string
	WorkflowCache  int
	// WarmPool is the default of --warm-pool before Register: on for
	// `subagents dev`, off for `subagents worker`.
	WarmPool int
	WarmTTL  time.Duration
	// EarlyStart is the default of --early-start before Register: on for
	// `subagents dev`, whose one worker runs every task it resolves; off
	// for `subagents worker`, one of several that a run may land on.
	EarlyStart bool
	// ChildEnvAllow, ChildEnvDeny and ChildEnvStrict are the children's
	// environment policy (activities.EnvPolicy).
	ChildEnvAllow  string
	ChildEnvDeny   string
	ChildEnvStrict bool
}

// Register adds the flags to fs.
func (f *WorkerFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.TaskQueue, "task-queue", api.DefaultTaskQueue, "task queue the worker polls")
	fs.StringVar(&f.Pi, "pi", "", "pi executable (default: $SUBAGENTS_PI, the source tree's extension/node_modules/.bin/pi, then PATH)")
	fs.StringVar(&f.DataDir, "data-dir", "", "folder for session files and artifacts (default $SUBAGENTS_DATA_DIR or ~/.pi/subagents)")
	fs.IntVar(&f.OutputMaxChars, "output-max-chars", envInt("SUBAGENTS_OUTPUT_MAX_CHARS", activities.DefaultOutputMaxChars),
		"characters of a child's output returned in results; the rest is kept in its artifact file (env SUBAGENTS_OUTPUT_MAX_CHARS)")
	fs.StringVar(&f.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.Host, "host", os.Getenv("SUBAGENTS_HOST"),
		"name of this machine's task queue (<task-queue>@<host>), for tasks whose cwd is here (env SUBAGENTS_HOST; default: the hostname)")
	fs.IntVar(&f.WorkflowCache, "workflow-cache", envInt("SUBAGENTS_WORKFLOW_CACHE", worker.DefaultWorkflowCache),
		"workflows kept in memory between their tasks; an idle session beyond it costs the worker nothing until its next send (env SUBAGENTS_WORKFLOW_CACHE)")
	fs.IntVar(&f.WarmPool, "warm-pool", envInt("SUBAGENTS_WARM_POOL", f.WarmPool),
		"child pi processes kept started ahead of tasks like recent ones (about 110 MiB each), 0 for none (env SUBAGENTS_WARM_POOL)")
	fs.BoolVar(&f.EarlyStart, "early-start", envBool("SUBAGENTS_EARLY_START", f.EarlyStart),
		"start a task's child pi as soon as its delegation is resolved, while its session's workflow starts, when no warm child waits for it (env SUBAGENTS_EARLY_START=0 or 1)")
	f.WarmTTL = envDuration("SUBAGENTS_WARM_TTL", activities.DefaultWarmTTL)
	fs.Var(seconds{&f.WarmTTL}, "warm-ttl", "how long a warm child no task took stays: seconds or a duration like 2m (env SUBAGENTS_WARM_TTL; default "+f.WarmTTL.String()+")")
	fs.StringVar(&f.ChildEnvAllow, "child-env-allow", os.Getenv("SUBAGENTS_CHILD_ENV_ALLOW"),
		"comma-separated name patterns (globs) of variables a child gets even when a rule would drop them, e.g. GITHUB_TOKEN (env SUBAGENTS_CHILD_ENV_ALLOW)")
	fs.StringVar(&f.ChildEnvDeny, "child-env-deny", os.Getenv("SUBAGENTS_CHILD_ENV_DENY"),
		"comma-separated name patterns of variables a child never gets, beyond TEMPORAL_* and names saying PASSWORD, SECRET, TOKEN, CREDENTIAL or PRIVATE (env SUBAGENTS_CHILD_ENV_DENY)")
	fs.BoolVar(&f.ChildEnvStrict, "child-env-strict", os.Getenv("SUBAGENTS_CHILD_ENV_STRICT") == "1",
		"children get only --child-env-allow, a base set (PATH, HOME, locale, proxies, PI_*) and provider credentials: for a worker several users share (env SUBAGENTS_CHILD_ENV_STRICT=1)")
	fs.StringVar(&f.MetricsAddr, "metrics-addr", os.Getenv("SUBAGENTS_METRICS_ADDR"),
		"serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9090 (env SUBAGENTS_METRICS_ADDR; default off)")
}

// Logger builds the process logger the flags ask for.
func (f *WorkerFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.LogLevel)); err != nil {
		return nil, errcode.Errorf(errcode.InvalidInput, "--log-level %q: want debug, info, warn or error", f.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(f.LogFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, errcode.Errorf(errcode.InvalidInput, "--log-format %q: want text or json", f.LogFormat)
	}
}

// Setup builds the logger and the worker configuration from the flags.
func (f *WorkerFlags) Setup(ctx context.Context, stderr io.Writer) (*slog.Logger, worker.Config, error) {
	logger, err := f.Logger(stderr)
	if err != nil {
		return nil, worker.Config{}, err
	}
	cfg, err := f.Config(ctx)
	if err != nil {
		return nil, worker.Config{}, err
	}
	cfg.Logger = logger
	return logger, cfg, nil
}

// Config finds pi and resolves the data dir: everything a worker needs that
// can be wrong on this machine, checked before anything starts.
func (f *WorkerFlags) Config(ctx context.Context) (worker.Config, error) {
	pi, err := worker.FindPi(ctx, worker.DefaultPiLookup(f.Pi))
	if err != nil {
		return worker.Config{}, err
	}
	dataDir := f.DataDir
	if dataDir == "" {
		if dataDir, err = worker.DefaultDataDir(); err != nil {
			return worker.Config{}, err
		}
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return worker.Config{}, errcode.Wrap(errcode.InvalidInput, err, "--data-dir: "+err.Error())
	}
	if f.OutputMaxChars < 1 {
		return worker.Config{}, errcode.Errorf(errcode.InvalidInput, "--output-max-chars must be at least 1, not %d", f.OutputMaxChars)
	}
	if f.WorkflowCache < 1 {
		return worker.Config{}, errcode.Errorf(errcode.InvalidInput, "--workflow-cache must be at least 1, not %d", f.WorkflowCache)
	}
	if f.WarmPool < 0 || f.WarmPool > maxWarmPool {
		return worker.Config{}, errcode.Errorf(errcode.InvalidInput, "--warm-pool must be 0 to %d, not %d", maxWarmPool, f.WarmPool)
	}
	if f.WarmTTL <= 0 {
		return worker.Config{}, errcode.Errorf(errcode.InvalidInput, "--warm-ttl must be positive, not %s", f.WarmTTL)
	}
	keys, err := worker.KeyFileEnv(os.Environ())
	if err != nil {
		return worker.Config{}, err
	}
	cfg := worker.Config{TaskQueue: f.TaskQueue, DataDir: dataDir, Pi: pi, OutputMaxChars: f.OutputMaxChars, MetricsAddr: f.MetricsAddr,
		Host: f.Host, WorkflowCache: f.WorkflowCache, ChildEnv: keys, WarmPool: f.WarmPool, WarmTTL: f.WarmTTL, EarlyStart: f.EarlyStart,
		ChildEnvPolicy: activities.EnvPolicy{Allow: profiles.SplitList(f.ChildEnvAllow), Deny: profiles.SplitList(f.ChildEnvDeny), Strict: f.ChildEnvStrict}}
	if f.MetricsAddr != "" {
		cfg.Metrics = metrics.New()
	}
	return cfg, nil
}

// maxWarmPool bounds --warm-pool: each warm child holds about 110 MiB, and
// 64 of them are more than any one worker runs at once.
const maxWarmPool = 64

// envDuration reads a time from the environment as the time flags do
// (seconds or a duration), or def.
func envDuration(name string, def time.Duration) time.Duration {
	var d time.Duration
	if v := os.Getenv(name); v != "" && (seconds{&d}).Set(v) == nil {
		return d
	}
	return def
}

// envInt reads a whole number from the environment, or def when unset or
// not a number (the flag's own check then reports a bad value).
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// envBool reads a switch from the environment (1, true, yes, on; 0,
// false, no, off), or def when unset or neither.
func envBool(name string, def bool) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	return def
}

// workerOptions are `subagents worker`: the worker's settings, the
// connection flags, and whether to set the namespace up and answer on the
// data dir's socket.
type workerOptions struct {
	flags         WorkerFlags
	conn          connection.Settings
	socket, setup bool
}

func (o *workerOptions) register(fs *flag.FlagSet) {
	o.flags.Register(fs)
	o.conn.RegisterFlags(fs)
	fs.BoolVar(&o.socket, "socket", false, "also answer the client protocol on <data dir>/"+connection.SocketName+", as subagents dev does")
	fs.BoolVar(&o.setup, "setup", false, "create the namespace and register the search attributes first, as `subagents setup` does")
}

// workerMain is `subagents worker`: the worker against an external Temporal,
// set up by the standard TEMPORAL_* environment and temporal.toml, with flags
// on top. It runs until ctx ends.
func workerMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o workerOptions
	if _, err := ParseFlags("worker", args, stderr, o.register); err != nil {
		return err
	}
	return o.run(ctx, stdout, stderr)
}

func (o *workerOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	logger, cfg, err := o.flags.Setup(ctx, stderr)
	if err != nil {
		return err
	}
	conn := o.conn
	// A worker beside a local service on this data dir uses its API key.
	conn.DataDir = cfg.DataDir
	if cfg.Metrics != nil {
		conn.Metrics = cfg.Metrics.Handler
	}
	c, err := conn.Dial(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	copts, err := conn.ClientOptions()
	if err != nil {
		return err
	}
	// A child that may delegate reaches this worker's Temporal, whatever
	// flag or file named it (worker.Config.ServiceAddress).
	cfg.ServiceAddress, cfg.ServiceNamespace = copts.HostPort, copts.Namespace
	// Before polling: a namespace or search attribute that is missing is
	// named with the command that fixes it, not found by the first start.
	if o.setup {
		err = worker.Setup(ctx, c, cmpNamespace(copts.Namespace), worker.DefaultRetention, stdout)
	} else {
		err = worker.Check(ctx, c, cmpNamespace(copts.Namespace))
	}
	if err != nil {
		return err
	}
	var socket func() (func(), error)
	if o.socket {
		socket = func() (func(), error) {
			return ServeSocketBanner(ctx, &client.Client{Temporal: c, TaskQueue: cfg.TaskQueue, Address: copts.HostPort, Namespace: copts.Namespace}, cfg, false, stdout)
		}
	}
	return worker.Serve(ctx, c, cfg, logger, stdout, socket)
}

// ServeSocketBanner is ServeSocket, and says where it answers.
func ServeSocketBanner(ctx context.Context, c *client.Client, cfg worker.Config, headless bool, stdout io.Writer) (stop func(), err error) {
	stop, err = ServeSocket(ctx, c, cfg, headless)
	if err == nil {
		_, _ = fmt.Fprintf(stdout, "Socket:            %s\n", connection.SocketPath(cfg.DataDir))
	}
	return stop, err
}

// ServeSocket answers the client protocol for c on the data dir's socket
// until ctx ends or stop is called; stop waits for the connections' calls.
// Its `service` answer says where c.UIURL serves the Temporal UI, or, for a
// service started headless, that it serves none.
func ServeSocket(ctx context.Context, c *client.Client, cfg worker.Config, headless bool) (stop func(), err error) {
	ln, err := ListenSocket(connection.SocketPath(cfg.DataDir))
	if err != nil {
		return nil, err
	}
	service := NewServer(c)
	// The socket's trouble goes to the service's log, in its format and level.
	service.Logger = cfg.Logger
	service.Info = &ServiceInfo{
		ContractVersion: client.ContractVersion, Op: "service", Address: c.Address, Namespace: c.Namespace,
		TaskQueue: c.TaskQueue, PID: os.Getpid(), DataDir: cfg.DataDir, Protocol: ProtocolVersion, Version: version.Version,
		UIURL: c.UIURL, Headless: headless && c.UIURL == "",
	}
	served := make(chan error, 1)
	go func() { served <- service.Serve(ctx, ln) }()
	return func() { _ = ln.Close(); <-served }, nil
}
