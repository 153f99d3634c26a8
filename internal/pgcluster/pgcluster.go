// Package pgcluster runs a Temporal cluster on PostgreSQL on this machine,
// the way docs/cluster.md's "A cluster on PostgreSQL" tells an operator to: a
// PostgreSQL server, the schema set up by Temporal's SQL tool, and each of
// Temporal's four services as a process of its own, configured through the
// environment variables of Temporal's server image. The cluster test and
// the bench use it. Everything it starts listens on 127.0.0.1 only, on
// ports below the ephemeral range, and is ended with the process that
// started it.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/durable-pi/subagents/internal/ports"
)

// Services are Temporal's services, in the order they are started: history
// first, because on a new database the first service to start writes the
// cluster's metadata, and services racing to write it fail with a
// duplicate key.
var Services = []string{"history", "matching", "frontend", "worker"}

// The server and schema tool, as `make cluster-tools` builds them from the
// Temporal module this project requires (go.mod's tool directives).
const (
	ServerPackage  = "go.temporal.io/server/cmd/server"
	SQLToolPackage = "go.temporal.io/server/cmd/tools/sql"
)

// Databases are the two the server uses, with the schema each gets.
var Databases = []struct{ Name, Schema string }{
	{"temporal", "postgresql/v12/temporal"},
	{"temporal_visibility", "postgresql/v12/visibility"},
}

// startTimeout bounds each wait for a process to be ready: PostgreSQL and
// each Temporal service take a second or two here; a loaded CI machine
// building in parallel gets a minute.
const startTimeout = time.Minute

// Tools are the Temporal server and SQL schema tool binaries.
type Tools struct{ Server, SQLTool string }

// Build compiles the server and the schema tool into dir, from the module
// at moduleDir (this project's root).
func Build(ctx context.Context, moduleDir, dir string) (Tools, error) {
	t := Tools{Server: filepath.Join(dir, "temporal-server"), SQLTool: filepath.Join(dir, "temporal-sql-tool")}
	for _, b := range [][2]string{{t.Server, ServerPackage}, {t.SQLTool, SQLToolPackage}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b[0], b[1])
		cmd.Dir = moduleDir
		if out, err := cmd.CombinedOutput(); err != nil {
			return t, fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return t, nil
}

// FindPostgres returns the folder of PostgreSQL's server programs (initdb,
// postgres): Debian's /usr/lib/postgresql/N/bin, the newest N, else PATH.
func FindPostgres() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL not found (no /usr/lib/postgresql/*/bin/initdb, no initdb on PATH): `make test` installs Debian's postgresql, or run apt-get install postgresql")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Cluster is a running PostgreSQL and Temporal's services on it.
type Cluster struct {
	// Address is the frontend's host:port.
	Address string
	// Env is the services' environment: the variables of Temporal's server
	// image, as an operator sets them.
	Env []string

	tools Tools
	dir   string
	// dynConfig is the dynamic config file the services read.
	dynConfig string
	// historyPort is history's gRPC port: listening there means its start
	// is done (StartServices).
	historyPort int
	pgDir       string
	pgPort      int
	pg          *process
	services    map[string]*process
	// releasePorts ends the reservations of the cluster's ports, held for
	// its life: its services are stopped and started again on the same
	// ports (an outage), and no other server on the machine may pick one
	// while nothing listens there.
	releasePorts []func()

	// spawns carries each process start to the spawner goroutine, which
	// runs them all on its one locked thread; stopSpawner ends it.
	spawns      chan spawnRequest
	stopSpawner chan struct{}
	spawnerOnce sync.Once
	stopOnce    sync.Once
}

// spawnRequest is one process start for the spawner, and where its error
// goes.
type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

// process is one process the cluster started, and its log.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// Start sets up a new cluster in dir (logs, dynamic config; the database
// in a folder of its own that the PostgreSQL user can own) and starts it.
// Stop ends it.
func Start(ctx context.Context, tools Tools, dir string) (c *Cluster, err error) {
	pgBin, err := FindPostgres()
	if err != nil {
		return nil, err
	}
	c = &Cluster{tools: tools, dir: dir, services: map[string]*process{}, spawns: make(chan spawnRequest), stopSpawner: make(chan struct{})}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.startPostgres(ctx, pgBin); err != nil {
		return nil, err
	}
	if err := c.SetUpSchema(ctx); err != nil {
		return nil, err
	}
	if err := c.configure(); err != nil {
		return nil, err
	}
	return c, c.StartServices(ctx)
}

// postgresUser is the account PostgreSQL runs as: itself, unless that is
// root, which PostgreSQL refuses; then Debian's postgres account.
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL does not run as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *Cluster) startPostgres(ctx context.Context, binDir string) error {
	cred, err := postgresUser()
	if err != nil {
		return err
	}
	// In the system's temp dir, not under dir: a test's folders are the
	// test user's alone, and PostgreSQL's account must own its data.
	if c.pgDir, err = os.MkdirTemp("", "subagents-pg-"); err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(c.pgDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	data := filepath.Join(c.pgDir, "data")
	// Trust on 127.0.0.1: a scratch server for one run. --no-sync: it is
	// thrown away with the run, so its set-up need not reach the disk.
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), "-D", data, "-U", "temporal", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if c.pgPort, err = c.holdPort(); err != nil {
		return err
	}
	// Four services, each with pools for both databases, need more than
	// PostgreSQL's default 100 connections.
	c.pg, err = c.spawn("postgres", cred, filepath.Join(binDir, "postgres"), nil,
		"-D", data, "-p", strconv.Itoa(c.pgPort), "-k", c.pgDir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300")
	if err != nil {
		return err
	}
	return c.waitFor(ctx, c.pg, "database system is ready to accept connections")
}

// SetUpSchema is what an operator runs: both databases created, their
// schema set up and brought to the version this server needs. Every step is
// idempotent, so it runs again after an upgrade.
func (c *Cluster) SetUpSchema(ctx context.Context) error {
	for _, db := range Databases {
		for _, args := range [][]string{
			{"create-database"},
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "--schema-name", db.Schema},
		} {
			if err := c.SQLTool(ctx, db.Name, args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// SQLTool runs Temporal's schema tool against database db.
func (c *Cluster) SQLTool(ctx context.Context, db string, args ...string) error {
	base := []string{"--plugin", "postgres12", "--ep", "127.0.0.1", "-p", strconv.Itoa(c.pgPort), "-u", "temporal", "--db", db}
	cmd := exec.CommandContext(ctx, c.tools.SQLTool, append(base, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("temporal-sql-tool %s on %s: %v\n%s", strings.Join(args, " "), db, err, out)
	}
	return nil
}

// configure writes the dynamic config and sets the services' environment.
func (c *Cluster) configure() error {
	src, err := DynamicConfig()
	if err != nil {
		return err
	}
	c.dynConfig = filepath.Join(c.dir, "dynamicconfig.yaml")
	if err := os.WriteFile(c.dynConfig, src, 0o644); err != nil {
		return err
	}
	c.Env = []string{
		"DB=postgres12", "POSTGRES_SEEDS=127.0.0.1", "DB_PORT=" + strconv.Itoa(c.pgPort),
		"POSTGRES_USER=temporal", "POSTGRES_PWD=",
		"BIND_ON_IP=127.0.0.1", "DYNAMIC_CONFIG_FILE_PATH=" + c.dynConfig, "LOG_LEVEL=warn",
	}
	// Every port the template names, each picked free below the ephemeral
	// range (membership ports must fit PostgreSQL's smallint).
	for _, name := range []string{
		"FRONTEND_GRPC_PORT", "FRONTEND_MEMBERSHIP_PORT", "FRONTEND_HTTP_PORT",
		"INTERNAL_FRONTEND_GRPC_PORT", "INTERNAL_FRONTEND_MEMBERSHIP_PORT", "INTERNAL_FRONTEND_HTTP_PORT",
		"HISTORY_GRPC_PORT", "HISTORY_MEMBERSHIP_PORT", "MATCHING_GRPC_PORT", "MATCHING_MEMBERSHIP_PORT",
		"WORKER_GRPC_PORT", "WORKER_MEMBERSHIP_PORT",
	} {
		p, err := c.holdPort()
		if err != nil {
			return err
		}
		c.Env = append(c.Env, name+"="+strconv.Itoa(p))
		switch name {
		case "FRONTEND_GRPC_PORT":
			c.Address = "127.0.0.1:" + strconv.Itoa(p)
		case "HISTORY_GRPC_PORT":
			c.historyPort = p
		}
	}
	return nil
}

// ValidateDynamicConfig checks the project's dynamic config with the
// server's own validator: every key known, every value of its type.
func (c *Cluster) ValidateDynamicConfig(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, c.tools.Server, "validate-dynamic-config", c.dynConfig).CombinedOutput()
	if err != nil || strings.Contains(strings.ToLower(string(out)), "error") || strings.Contains(strings.ToLower(string(out)), "warn") {
		return fmt.Errorf("docker/dynamicconfig.yaml: %v\n%s", err, out)
	}
	return nil
}

// DynamicConfig is the project's dynamic config for a cluster
// (docker/dynamicconfig.yaml), found from this source file's folder.
func DynamicConfig() ([]byte, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(root, "docker", "dynamicconfig.yaml"))
}

// moduleRoot is the folder of this project's go.mod, looked for upwards
// from the working directory (tests run in their package's folder).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/durable-pi/subagents\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the subagents source tree")
		}
		dir = parent
	}
}

// StartServices starts Temporal's four services, history first, and waits
// until the frontend answers a health check.
func (c *Cluster) StartServices(ctx context.Context) error {
	for _, svc := range Services {
		p, err := c.spawn(svc, nil, c.tools.Server, c.Env, "--allow-no-auth", "start", "--service", svc)
		if err != nil {
			return err
		}
		c.services[svc] = p
		if svc == "history" {
			// Listening means its start, cluster metadata included, is done.
			if err := c.waitListening(ctx, p, c.historyPort); err != nil {
				return err
			}
		}
	}
	return c.waitHealthy(ctx)
}

// KillServices SIGKILLs every Temporal service, as a crash of the servers
// would end them; PostgreSQL stays up.
func (c *Cluster) KillServices() {
	for _, svc := range Services {
		if p := c.services[svc]; p != nil {
			_ = p.cmd.Process.Kill()
			<-p.done
			delete(c.services, svc)
		}
	}
}

// Stop ends the services and PostgreSQL and removes the database.
func (c *Cluster) Stop() {
	c.KillServices()
	if c.pg != nil {
		// SIGINT is PostgreSQL's fast shutdown.
		_ = c.pg.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.pg.done:
		case <-time.After(10 * time.Second):
			_ = c.pg.cmd.Process.Kill()
			<-c.pg.done
		}
		c.pg = nil
	}
	if c.pgDir != "" {
		_ = os.RemoveAll(c.pgDir)
	}
	// Last: nothing is started after this.
	c.stopOnce.Do(func() {
		close(c.stopSpawner)
		for _, release := range c.releasePorts {
			release()
		}
	})
}

// holdPort picks a free port for the cluster and holds it until Stop.
func (c *Cluster) holdPort() (int, error) {
	p, release, err := ports.Hold("127.0.0.1")
	if err != nil {
		return 0, err
	}
	c.releasePorts = append(c.releasePorts, release)
	return p, nil
}

// Logs is the end of every log, for a failed test to show.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, name := range append([]string{"postgres"}, Services...) {
		data, err := os.ReadFile(filepath.Join(c.dir, name+".log"))
		if err != nil {
			continue
		}
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "--- %s.log (end)\n%s\n", name, data)
	}
	return b.String()
}

// spawn starts a process logging to dir/name.log (appended: a restarted
// service's log follows its last one). It gets SIGKILL when the thread that
// started it ends, so that a test binary that dies leaves nothing behind.
func (c *Cluster) spawn(name string, cred *syscall.Credential, path string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Dir = c.dir
	if cred != nil {
		cmd.Dir = c.pgDir
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := c.start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// start starts cmd on the spawner's thread. Pdeathsig is tied to the
// thread that forks, not to the process: a process started from any
// goroutine's thread was SIGKILLed when the Go runtime later gave that
// thread to a goroutine that locked it and ended (a worker's warm pool
// stopping, in a test binary that runs workers beside the cluster), which
// killed PostgreSQL in the middle of a test. The spawner keeps its thread
// until Stop.
func (c *Cluster) start(cmd *exec.Cmd) error {
	c.spawnerOnce.Do(func() { go c.spawner() })
	req := spawnRequest{cmd: cmd, err: make(chan error, 1)}
	select {
	case c.spawns <- req:
		return <-req.err
	case <-c.stopSpawner:
		return errors.New("the cluster was stopped")
	}
}

// spawner starts the cluster's processes from one thread it never gives
// back to other goroutines: it ends locked, and the runtime ends the
// thread with it (Pdeathsig then ends whatever it started that still
// runs; Stop ended the cluster's own processes before).
func (c *Cluster) spawner() {
	runtime.LockOSThread()
	for {
		select {
		case req := <-c.spawns:
			req.err <- req.cmd.Start()
		case <-c.stopSpawner:
			return
		}
	}
}

// waitFor waits until the process's log holds line.
func (c *Cluster) waitFor(ctx context.Context, p *process, line string) error {
	return c.poll(ctx, p, func() bool {
		b, _ := os.ReadFile(p.log)
		return strings.Contains(string(b), line)
	})
}

func (c *Cluster) waitListening(ctx context.Context, p *process, port int) error {
	return c.poll(ctx, p, func() bool {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	})
}

// waitHealthy waits until the frontend answers and serves the system
// namespace's workflows, which needs history and matching up too. The
// SDK's log lines are dropped: they only say the frontend is not up yet.
func (c *Cluster) waitHealthy(ctx context.Context) error {
	return c.poll(ctx, c.services["frontend"], func() bool {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		tc, err := sdkclient.DialContext(hctx, sdkclient.Options{HostPort: c.Address, Namespace: "temporal-system", Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			return false
		}
		defer tc.Close()
		_, err = tc.CheckHealth(hctx, &sdkclient.CheckHealthRequest{})
		return err == nil
	})
}

// poll calls ready every 100 ms until it holds, the process exits, or
// startTimeout passes.
func (c *Cluster) poll(ctx context.Context, p *process, ready func() bool) error {
	deadline := time.Now().Add(startTimeout)
	for !ready() {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited while starting\n%s", filepath.Base(p.log), c.Logs())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s\n%s", filepath.Base(p.log), startTimeout, c.Logs())
		}
	}
	return nil
}
