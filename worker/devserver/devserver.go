// Package devserver runs a complete Temporal inside this process: the server
// on a SQLite file (durable across restarts) and the Temporal UI beside it.
//
// It is what `subagents dev` and the end-to-end tests stand on. Only this
// package links go.temporal.io/server, so only the binaries that need an
// embedded server pay for it.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/primitives/timestamp"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/ports"
)

// Options configure an embedded server. The zero value of a field means its
// default, as with `temporal server start-dev`.
type Options struct {
	// IP the frontend gRPC service listens on (default 127.0.0.1).
	IP string
	// Port of the frontend gRPC service (default 7233).
	Port int
	// HTTPPort, when set, turns on the frontend's HTTP API (grpc-gateway)
	// on IP, which must then be a loopback address. Off by default, as in
	// `temporal server start-dev`: a web page may POST to it without a CORS
	// preflight (text/plain), and it speaks plain HTTP; with APIKey it
	// wants the key (an Authorization header a page cannot guess), without
	// one any page a user opens could start workflows.
	HTTPPort int
	// UIIP the Temporal UI listens on (default 127.0.0.1, whatever IP is:
	// opening the frontend to workers on other machines does not publish
	// the UI too).
	UIIP string
	// UIPort of the Temporal UI (default Port+1000, as the Temporal CLI does,
	// or a free port when that one is taken); negative disables the UI.
	UIPort int
	// uiPortDefault is true when UIPort was not chosen: a taken default
	// must not stop a service a pi starts by itself.
	uiPortDefault bool
	// DBFile is the SQLite database file; required unless Ephemeral.
	DBFile string
	// Ephemeral keeps everything in memory: nothing survives Stop.
	Ephemeral bool
	// Namespace is created at start if missing (default "default").
	Namespace string
	// Retention of closed workflows in Namespace, applied when the namespace
	// is created (default 30 days: long enough to read a finished
	// delegation's results and resume its sessions weeks later).
	Retention time.Duration
	// SearchAttributes are registered at start, on a new database and on an
	// existing one alike.
	SearchAttributes map[string]enumspb.IndexedValueType
	// APIKey, when set, is the only way into the frontend: a caller must
	// present it (the SDK's API key credentials, without TLS on loopback),
	// the UI asks the browser to log in with a token derived from it, and
	// the server's internal services speak mutual TLS (auth.go). Empty:
	// no authorization, as in `temporal server start-dev` (the tests'
	// in-process server).
	APIKey string
	// Logger receives the server's own logs at ServerLogLevel and above.
	Logger *slog.Logger
	// ServerLogLevel defaults to warn: the server is chatty at info.
	ServerLogLevel slog.Level
}

// Server is a running embedded Temporal.
type Server struct {
	opts     Options
	logLevel *slog.LevelVar
	server   temporal.Server
	ui       *uiserver.Server
	uiFront  *http.Server
	stopOnce sync.Once
	// dyn is the server's dynamic configuration (dynconfig.go).
	dyn *dynamicConfig
}

const (
	defaultIP        = "127.0.0.1"
	defaultPort      = 7233
	defaultNamespace = "default"
	// defaultRetention: see Options.Retention.
	defaultRetention = 30 * 24 * time.Hour
	clusterName      = "active"
	clusterID        = "5b5b4a36-5a2f-4d1c-9e0e-7d1b8c1f0a11"
)

func (o *Options) applyDefaults() {
	if o.IP == "" {
		o.IP = defaultIP
	}
	if o.Port == 0 {
		o.Port = defaultPort
	}
	if o.UIIP == "" {
		o.UIIP = defaultIP
	}
	if o.UIPort == 0 {
		o.UIPort, o.uiPortDefault = o.Port+1000, true
	}
	if o.Namespace == "" {
		o.Namespace = defaultNamespace
	}
	if o.Retention == 0 {
		o.Retention = defaultRetention
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ServerLogLevel == 0 {
		o.ServerLogLevel = slog.LevelWarn
	}
}

// Start validates the options, checks every resource it will need (ports,
// database file) so that a mistake fails here and not at the first task,
// then starts the server, registers the namespace and search attributes, and
// starts the UI. Errors carry errcode.InvalidInput for what the caller can
// fix and errcode.ServiceUnavailable for everything else.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts.applyDefaults()
	if !opts.Ephemeral && opts.DBFile == "" {
		return nil, errcode.New(errcode.InvalidInput, "a database file is required unless the server is ephemeral")
	}
	if net.ParseIP(opts.IP) == nil {
		return nil, errcode.Errorf(errcode.InvalidInput, "--ip %q is not an IP address", opts.IP)
	}
	if ip := net.ParseIP(opts.UIIP); ip == nil {
		return nil, errcode.Errorf(errcode.InvalidInput, "--ui-ip %q is not an IP address", opts.UIIP)
	} else if opts.UIPort > 0 && !ip.IsLoopback() {
		// The UI speaks plain HTTP and answers loopback names only: off
		// loopback, its login would cross the network in the clear.
		return nil, errcode.Errorf(errcode.InvalidInput,
			"--ui-ip %s: the embedded UI serves plain HTTP and is for this machine's user only, so it listens on a loopback address; reach it from elsewhere through an SSH tunnel, or put Temporal's own UI behind your sign-on (README, \"Security\")", opts.UIIP)
	}
	if err := checkPortFree(opts.IP, opts.Port, "--port"); err != nil {
		return nil, err
	}
	if opts.HTTPPort != 0 {
		if !net.ParseIP(opts.IP).IsLoopback() {
			return nil, errcode.Errorf(errcode.InvalidInput,
				"--http-port serves Temporal's HTTP API in plain HTTP: it is allowed only when --ip is a loopback address, not %s", opts.IP)
		}
		if err := checkPortFree(opts.IP, opts.HTTPPort, "--http-port"); err != nil {
			return nil, err
		}
	}
	if opts.UIPort > 0 {
		if err := checkPortFree(opts.UIIP, opts.UIPort, "--ui-port"); err != nil {
			if !opts.uiPortDefault {
				return nil, err
			}
			// The default port is taken (another Temporal's UI, say): the
			// UI moves to a free one, which the banner and links name.
			free, ferr := ports.Free(opts.UIIP)
			if ferr != nil {
				return nil, err
			}
			opts.Logger.Warn("the UI's default port is taken; it listens on another", "taken", opts.UIPort, "port", free)
			opts.UIPort = free
		}
	}
	if !opts.Ephemeral {
		if err := checkDBFile(opts.DBFile); err != nil {
			return nil, err
		}
	}

	sqlConf, err := opts.prepareDatabase()
	if err != nil {
		return nil, err
	}
	logLevel := new(slog.LevelVar)
	logLevel.Set(opts.ServerLogLevel)
	srvOpts, dyn, err := opts.serverOptions(sqlConf, logLevel)
	if err != nil {
		return nil, err
	}
	srv, err := temporal.NewServer(srvOpts...)
	if err != nil {
		return nil, errcode.Wrap(errcode.ServiceUnavailable, err, "temporal server: "+err.Error())
	}
	if err := srv.Start(); err != nil {
		return nil, errcode.Wrap(errcode.ServiceUnavailable, err, "temporal server: "+err.Error())
	}
	s := &Server{opts: opts, server: srv, logLevel: logLevel, dyn: dyn}
	if !opts.Ephemeral {
		// SQLite creates the file with the process's umask (0644 here): the
		// database holds every prompt and result, for its owner only. Its
		// WAL and shared-memory files take the database file's mode.
		for _, f := range []string{opts.DBFile, opts.DBFile + "-wal", opts.DBFile + "-shm"} {
			if err := os.Chmod(f, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.Stop()
				return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("--db-filename: %v", err))
			}
		}
	}

	if err := s.registerSearchAttributes(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	s.dyn.settle()
	if opts.UIPort > 0 {
		if err := s.startUI(ctx); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// FrontendAddress is host:port of the frontend gRPC service.
func (s *Server) FrontendAddress() string {
	return net.JoinHostPort(s.opts.IP, strconv.Itoa(s.opts.Port))
}

// UIURL is the Temporal UI's address, or "" when the UI is off.
func (s *Server) UIURL() string {
	if s.opts.UIPort <= 0 {
		return ""
	}
	return "http://" + net.JoinHostPort(s.opts.UIIP, strconv.Itoa(s.opts.UIPort))
}

// HTTPAddress is host:port of the frontend's HTTP API, or "" when it is off
// (the default).
func (s *Server) HTTPAddress() string {
	if s.opts.HTTPPort == 0 {
		return ""
	}
	return net.JoinHostPort(s.opts.IP, strconv.Itoa(s.opts.HTTPPort))
}

// ClientOptions completes opts to reach this server: its frontend and
// namespace, and its API key when it has one.
func (s *Server) ClientOptions(opts sdkclient.Options) sdkclient.Options {
	opts.HostPort = s.FrontendAddress()
	opts.Namespace = s.opts.Namespace
	// A client of this server is on this machine, whatever address the
	// frontend listens on: no gzip, as connection.Uncompressed says why,
	// unless the caller chose a compression.
	if opts.ConnectionOptions.GrpcCompression == nil {
		opts.ConnectionOptions.GrpcCompression = &sdkclient.GrpcCompressionNone{}
	}
	if s.opts.APIKey != "" {
		opts.Credentials = sdkclient.NewAPIKeyStaticCredentials(s.opts.APIKey)
		// Plain gRPC on loopback: the SDK would turn TLS on for a key.
		opts.ConnectionOptions.TLSDisabled = true
	}
	return opts
}

// Namespace is the namespace the server was started with.
func (s *Server) Namespace() string { return s.opts.Namespace }

// Stop stops the UI, then the server. It is safe to call more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		// The server's internal workers warn about every connection they lose
		// while it shuts down; those lines say nothing about a real problem.
		s.logLevel.Set(slog.LevelError)
		s.stopUI()
		if err := s.server.Stop(); err != nil {
			s.opts.Logger.Warn("temporal server stop", "error", err)
		}
	})
}

func checkPortFree(ip string, port int, flag string) error {
	if port < 1 || port > 65535 {
		return errcode.Errorf(errcode.InvalidInput, "%s %d is not a TCP port", flag, port)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf(
			"%s: cannot listen on %s (%v); is another Temporal or `subagents dev` running? choose another with %s",
			flag, addr, unwrapSyscall(err), flag))
	}
	return ln.Close()
}

func unwrapSyscall(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return sys.Err
		}
		return op.Err
	}
	return err
}

// checkDBFile makes the database's folder and proves the file can be written,
// without creating it (whether it exists decides if the schema is set up).
func checkDBFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("--db-filename: cannot create folder %s: %v", dir, err))
	}
	if info, err := os.Stat(path); err == nil {
		if info.IsDir() {
			return errcode.Errorf(errcode.InvalidInput, "--db-filename: %s is a folder, not a database file", path)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("--db-filename: %s is not writable: %v", path, err))
		}
		return f.Close()
	}
	probe, err := os.CreateTemp(dir, ".subagents-write-check-*")
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("--db-filename: folder %s is not writable: %v", dir, err))
	}
	_ = probe.Close()
	return os.Remove(probe.Name())
}

// prepareDatabase sets up the schema of a new database file and creates the
// namespace when it is missing.
func (o *Options) prepareDatabase() (*config.SQL, error) {
	conf := &config.SQL{PluginName: sqliteplugin.PluginName}
	if o.Ephemeral {
		// A shared in-memory database, named per process so two embedded
		// servers in one test binary do not meet.
		conf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		conf.DatabaseName = fmt.Sprintf("subagents-%d-%d", os.Getpid(), time.Now().UnixNano())
	} else {
		conf.ConnectAttributes = map[string]string{
			"mode": "rwc",
			// WAL: one fsync per commit instead of two, and readers (the UI,
			// visibility) never block the history writer. synchronous stays at
			// SQLite's FULL default, so a commit survives a power loss too:
			// the product promises to survive a crash of the whole machine.
			"journal_mode": "wal",
			// Wait for the write lock instead of failing with SQLITE_BUSY when
			// the server's connections contend; 10 s is far beyond any
			// transaction the server makes.
			"busy_timeout": "10000",
		}
		conf.DatabaseName = o.DBFile
	}
	// The SQLite plugin sets up an in-memory database's schema itself; a
	// file needs it once, when it is new.
	if !o.Ephemeral {
		info, err := os.Stat(o.DBFile)
		isNew := errors.Is(err, os.ErrNotExist) || (err == nil && info.Size() == 0)
		if !isNew {
			return o.createNamespace(conf)
		}
		if err := sqliteschema.SetupSchema(conf); err != nil {
			return nil, errcode.Wrap(errcode.ServiceUnavailable, err, "set up the database schema: "+err.Error())
		}
	}
	return o.createNamespace(conf)
}

// createNamespace creates the namespace, with the search attributes and
// retention, unless it exists.
func (o *Options) createNamespace(conf *config.SQL) (*config.SQL, error) {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, o.Namespace, false, o.SearchAttributes)
	if err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, "namespace "+o.Namespace+": "+err.Error())
	}
	ns.Detail.Config.Retention = timestamp.DurationPtr(o.Retention)
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return nil, errcode.Wrap(errcode.ServiceUnavailable, err, "create namespace "+o.Namespace+": "+err.Error())
	}
	return conf, nil
}

func (o *Options) serverOptions(sqlConf *config.SQL, logLevel *slog.LevelVar) ([]temporal.ServerOption, *dynamicConfig, error) {
	servicePorts := map[string]int{"frontend": o.Port}
	services := []string{"history", "matching", "worker"}
	if o.APIKey != "" {
		services = append(services, string(primitives.InternalFrontendService))
	}
	for _, svc := range services {
		p, err := ports.Free(o.IP)
		if err != nil {
			return nil, nil, errcode.Wrap(errcode.ServiceUnavailable, err, "find a free port for the "+svc+" service: "+err.Error())
		}
		servicePorts[svc] = p
	}
	frontend := net.JoinHostPort(o.IP, strconv.Itoa(o.Port))
	httpAddress := ""
	if o.HTTPPort != 0 {
		httpAddress = net.JoinHostPort(o.IP, strconv.Itoa(o.HTTPPort))
	}

	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = o.IP
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	// One shard: a single process on one SQLite file gains nothing from more.
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{clusterName: {
			Enabled:                true,
			InitialFailoverVersion: 1,
			RPCAddress:             frontend,
			HTTPAddress:            httpAddress,
			// Fixed, so that a restarted server on the same file is the
			// same cluster.
			ClusterID: clusterID,
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for svc, port := range servicePorts {
		rpc := config.RPC{GRPCPort: port, BindOnIP: o.IP}
		if svc == "frontend" {
			// Zero leaves the HTTP API off (see Options.HTTPPort).
			rpc.HTTPPort = o.HTTPPort
		}
		conf.Services[svc] = config.Service{RPC: rpc}
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	serverOpts := []temporal.ServerOption{}
	if o.APIKey != "" {
		internode, err := internodeTLS()
		if err != nil {
			return nil, nil, errcode.Wrap(errcode.ServiceUnavailable, err, "make the internal certificates: "+err.Error())
		}
		conf.Global.TLS.Internode = internode
		// Empty: the system workers find the internal frontend (over the
		// internode TLS) instead of the public one, which wants the key.
		conf.PublicClient.HostPort = ""
		claims := keyClaims{bearer: []byte("Bearer " + o.APIKey)}
		serverOpts = append(serverOpts,
			temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claims }),
			temporal.WithAuthorizer(keyAuthorizer{authorization.NewDefaultAuthorizer()}),
			temporal.ForServices(append(slices.Clone(temporal.DefaultServices), string(primitives.InternalFrontendService))),
		)
	} else {
		serverOpts = append(serverOpts, temporal.ForServices(temporal.DefaultServices))
	}

	hosts := map[primitives.ServiceName]static.Hosts{}
	for svc, port := range servicePorts {
		hosts[primitives.ServiceName(svc)] = static.SingleLocalHost(net.JoinHostPort(o.IP, strconv.Itoa(port)))
	}

	dyn := &dynamicConfig{static: dynamicconfig.StaticClient{
		// Search attributes registered at start: dynamicConfig reads them
		// through until registerSearchAttributes has run.
		// The UI and `subagents list` both page through visibility; the
		// default of 10 requests per second throttles a UI left open.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// One worker per task queue on one machine: extra partitions only add
		// forwarding hops between pollers and tasks.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// Every hop between a workflow and its tasks (a workflow task after
		// an activity, a child start, a signal to another workflow) is a
		// transfer task, and the default reader looks for new ones at most
		// 20 times a second per shard: up to 50 ms on each hop, about 200
		// ms on a one-task delegation. Reads are batched and cheap on one
		// local database, so let it look as often as tasks come.
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): 1000,
		// A caller refused for want of the API key is told what to pass
		// (keyAuthorizer), not only "Request unauthorized".
		dynamicconfig.ExposeAuthorizerErrors.Key(): true,
	}}

	return append(serverOpts,
		temporal.WithConfig(&conf),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(newServerLogger(o.Logger.With("component", "temporal"), logLevel)),
		temporal.WithDynamicConfigClient(dyn),
	), dyn, nil
}

// registerSearchAttributes adds the search attributes the namespace lacks. A
// new database already has them (prepareDatabase); an older one may not.
func (s *Server) registerSearchAttributes(ctx context.Context) error {
	if len(s.opts.SearchAttributes) == 0 {
		return nil
	}
	c, err := sdkclient.DialContext(ctx, s.ClientOptions(sdkclient.Options{Logger: quietSDKLogger{}}))
	if err != nil {
		return errcode.Wrap(errcode.ServiceUnavailable, err, "connect to the embedded server: "+err.Error())
	}
	defer c.Close()
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.opts.Namespace})
	if err != nil {
		return errcode.Wrap(errcode.ServiceUnavailable, err, "list search attributes: "+err.Error())
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range s.opts.SearchAttributes {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        s.opts.Namespace,
		SearchAttributes: missing,
	})
	if err != nil {
		return errcode.Wrap(errcode.ServiceUnavailable, err, "add search attributes: "+err.Error())
	}
	return nil
}
