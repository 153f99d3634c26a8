// Package dev is `subagents dev`: an embedded, durable Temporal with its UI
// and a worker, in one process.
package dev

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/cli"
	subclient "github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/devserver"
)

// devOptions are `subagents dev`: the embedded server's options (flag
// names follow `temporal server start-dev` where they overlap) and the
// worker's settings.
type devOptions struct {
	flags    cli.WorkerFlags
	server   devserver.Options
	headless bool
}

func (o *devOptions) register(fs *flag.FlagSet) {
	opts := &o.server
	o.flags.WarmPool = worker.DefaultDevWarmPool
	o.flags.EarlyStart = true
	fs.StringVar(&opts.IP, "ip", "127.0.0.1", "IP address the Temporal frontend (gRPC) listens on")
	fs.IntVar(&opts.Port, "port", 7233, "port of the Temporal frontend (gRPC)")
	fs.IntVar(&opts.HTTPPort, "http-port", 0,
		"port of Temporal's HTTP API on --ip, which must be loopback (default off: plain HTTP, which any web page can post to; it wants the API key as a bearer token)")
	fs.StringVar(&opts.UIIP, "ui-ip", "127.0.0.1", "IP address the Temporal UI listens on")
	fs.IntVar(&opts.UIPort, "ui-port", 0, "port of the Temporal UI (default --port + 1000)")
	fs.BoolVar(&o.headless, "headless", false, "do not start the Temporal UI")
	fs.StringVar(&opts.DBFile, "db-filename", "", "SQLite database file (default <data dir>/temporal.db)")
	fs.StringVar(&opts.Namespace, "namespace", "default", "namespace, created if missing")
	fs.BoolVar(&opts.Ephemeral, "ephemeral", false, "keep everything in memory: nothing survives a restart")
	o.flags.Register(fs)
}

// Main parses args, starts the server, the UI and the worker, and runs until
// ctx ends; then it stops the worker first and the server last.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o devOptions
	fs, err := cli.ParseFlags("dev", args, stderr, o.register)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errcode.Errorf(errcode.InvalidInput, "subagents dev takes no arguments, got %q", fs.Args())
	}
	return o.run(ctx, stdout, stderr)
}

func (o *devOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	opts := o.server
	if o.headless {
		opts.UIPort = -1
	}
	logger, cfg, err := o.flags.Setup(ctx, stderr)
	if err != nil {
		return err
	}
	if opts.Ephemeral && opts.DBFile != "" {
		return errcode.New(errcode.InvalidInput, "--ephemeral and --db-filename exclude each other")
	}
	if !opts.Ephemeral && opts.DBFile == "" {
		opts.DBFile = filepath.Join(cfg.DataDir, "temporal.db")
	}
	if opts.DBFile != "" {
		if opts.DBFile, err = filepath.Abs(opts.DBFile); err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, "--db-filename: "+err.Error())
		}
	}
	// The data dir holds the socket, the database and the keys: refused if
	// another account owns it, made 0700 if it is open (an older service,
	// or a folder made by hand).
	note, err := cli.SecureDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	if note != "" {
		logger.Warn(note)
	}
	// One service per data dir: a second `subagents dev` (two pis starting
	// the service at the same moment, or a person running it by hand) stops
	// here, and its clients use the first one's socket.
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	opts.SearchAttributes = api.SearchAttributes()
	opts.Logger = logger
	// The frontend answers only callers holding this key (README,
	// "Security"): the user's own, from the data dir.
	if opts.APIKey, err = connection.EnsureKey(cfg.DataDir); err != nil {
		return err
	}

	srv, err := devserver.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer srv.Stop()

	copts := srv.ClientOptions(sdkclient.Options{Logger: connection.NewSDKLogger(logger.With("component", "sdk"))})
	if cfg.Metrics != nil {
		copts.MetricsHandler = cfg.Metrics.Handler
	}
	c, err := sdkclient.DialContext(ctx, copts)
	if err != nil {
		return connection.Unavailable(srv.FrontendAddress(), err)
	}
	defer c.Close()

	// A child that may delegate reaches this service's frontend.
	cfg.ServiceAddress, cfg.ServiceNamespace = srv.FrontendAddress(), srv.Namespace()
	store := opts.DBFile
	if opts.Ephemeral {
		store = "in memory (--ephemeral)"
	}
	_, _ = fmt.Fprintf(stdout, "Temporal frontend: %s (namespace %q)\n", srv.FrontendAddress(), srv.Namespace())
	if addr := srv.HTTPAddress(); addr != "" {
		_, _ = fmt.Fprintf(stdout, "Temporal HTTP API: http://%s (loopback only; Authorization: Bearer <the API key>)\n", addr)
	}
	if url := srv.UIURL(); url != "" {
		_, _ = fmt.Fprintf(stdout, "Temporal UI:       %s/namespaces/%s/workflows\n", url, srv.Namespace())
		_, _ = fmt.Fprintf(stdout, "UI login:          %s (or `subagents ui`)\n", srv.UILoginURL("/namespaces/"+srv.Namespace()+"/workflows"))
	}
	_, _ = fmt.Fprintf(stdout, "API key:           %s (callers of this frontend need it)\n", connection.KeyPath(cfg.DataDir))
	_, _ = fmt.Fprintf(stdout, "Database:          %s\n", store)
	_, _ = fmt.Fprintf(stdout, "Data dir:          %s\n", cfg.DataDir)
	logger.Info("dev server ready", "frontend", srv.FrontendAddress(), "ui", srv.UIURL(), "db", store)
	// The client protocol on a Unix socket in the data dir, once the worker
	// polls: the pi extension talks to the service here, with no process of
	// its own, and takes an answer on it for "the service is ready".
	return worker.Serve(ctx, c, cfg, logger, stdout, func() (func(), error) {
		return cli.ServeSocketBanner(ctx, &subclient.Client{
			Temporal: c, TaskQueue: cfg.TaskQueue, Address: srv.FrontendAddress(), Namespace: srv.Namespace(), UIURL: srv.UIURL(),
		}, cfg, srv.UIURL() == "", stdout)
	})
}
