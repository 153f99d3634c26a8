// Package e2e holds the end-to-end tests: a real embedded Temporal server, our
// worker, real pi from the lockfile and the project's scripted model. They
// share this one harness.
package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/ports"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/devserver"
)

// testTimeout bounds one test's waits: a cold pi start plus a few turns take
// a few seconds here; a minute leaves room for a loaded CI machine.
const testTimeout = time.Minute

// shared is the embedded server most tests use, each on its own task queue.
var shared struct {
	server *devserver.Server
	client sdkclient.Client
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	logger := testLogger()
	srv, err := devserver.Start(context.Background(), devserver.Options{
		Port:             freePort(),
		UIPort:           -1,
		Ephemeral:        true,
		SearchAttributes: api.SearchAttributes(),
		Logger:           logger,
	})
	if err != nil {
		logger.Error("start the shared embedded server", "error", err)
		return 1
	}
	defer srv.Stop()
	// What the tests built (the subagents binaries, the Temporal server,
	// the releases) goes with the run: hundreds of megabytes each time
	// otherwise.
	defer func() {
		for _, dir := range []string{binary.dir, clusterBinaries.dir, thisRelease.out, nextRelease.out} {
			if dir != "" {
				_ = os.RemoveAll(dir)
			}
		}
	}()
	c, err := dial(srv)
	if err != nil {
		logger.Error("dial the shared embedded server", "error", err)
		return 1
	}
	defer c.Close()
	shared.server, shared.client = srv, c
	return m.Run()
}

// testLogger writes to stderr only with -v, so failures stay readable.
func testLogger() *slog.Logger {
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func dial(srv *devserver.Server) (sdkclient.Client, error) {
	return sdkclient.Dial(sdkclient.Options{
		HostPort:  srv.FrontendAddress(),
		Namespace: srv.Namespace(),
		Logger:    sdklog.NewStructuredLogger(testLogger()),
	})
}

// handedPorts are the ports freePort gave out, each with its +1000 (where
// `subagents dev` puts its UI by default).
var handedPorts struct {
	sync.Mutex
	m map[int]bool
}

// freePort is a free port for a server a test starts (internal/ports: below
// Linux's ephemeral range). Tests run in parallel, and a port is only free
// until its server binds it: one never given out before in this process,
// nor 1000 below or above one that was, is not one another test is about
// to bind. Its reservation against other processes' picks (ports.Hold)
// lasts as long as this test binary: a test that kills its service and
// starts it again on the same port (the schedule's catch-up, a crash)
// leaves the port unbound meanwhile, for longer than ports.Free's minute,
// and TestCluster's binary and the services of both runs pick ports beside
// it. A run picks a few hundred of the 12,768.
func freePort() int {
	handedPorts.Lock()
	defer handedPorts.Unlock()
	if handedPorts.m == nil {
		handedPorts.m = map[int]bool{}
	}
	for {
		p, release, err := ports.Hold("127.0.0.1")
		if err != nil {
			panic(err)
		}
		if !handedPorts.m[p] && !handedPorts.m[p+1000] {
			handedPorts.m[p], handedPorts.m[p+1000] = true, true
			return p
		}
		release()
	}
}

// env is one test's world: a scripted model, a pi config dir pointing at it,
// a data dir, and a task queue of its own.
type env struct {
	t         *testing.T
	model     *scriptedmodel.Server
	agentDir  string
	dataDir   string
	workDir   string
	taskQueue string
	pi        worker.Pi
	// outputMaxChars, when set, is the worker's output cap.
	outputMaxChars int
	// warmPool is the test's worker's warm pool (keepWarm).
	warmPool int
	// spawnPerCall makes a parent pi's extension run the subagents command
	// as a process per call instead of through `subagents serve`.
	spawnPerCall bool
	// parentEnvExtra goes after parentEnv (the later value of a variable
	// wins).
	parentEnvExtra []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	model, err := scriptedmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	root := t.TempDir()
	e := &env{
		t:         t,
		model:     model,
		agentDir:  filepath.Join(root, "pi-agent"),
		dataDir:   filepath.Join(root, "data"),
		workDir:   filepath.Join(root, "work"),
		taskQueue: "e2e-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
		pi:        findPi(t),
	}
	if err := model.WritePiAgentDir(e.agentDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(e.workDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// piFound is the pi of this source tree, looked up once per test binary:
// the lookup runs `pi --version` (about half a second of CPU), which every
// test would otherwise pay again for the same answer.
var piFound struct {
	once sync.Once
	pi   worker.Pi
	err  error
}

// findPi finds the pi that `npm ci` installed in this source tree.
func findPi(t *testing.T) worker.Pi {
	t.Helper()
	piFound.once.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			piFound.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		piFound.pi, piFound.err = worker.FindPi(ctx, worker.PiLookup{TreeRoots: []string{root}})
	})
	if piFound.err != nil {
		t.Fatalf("pi from the lockfile: %v (run `make test`, which runs npm ci)", piFound.err)
	}
	return piFound.pi
}

func (e *env) workerConfig() worker.Config {
	return worker.Config{
		TaskQueue:      e.taskQueue,
		DataDir:        e.dataDir,
		Pi:             e.pi,
		ChildEnv:       scriptedmodel.PiEnv(e.agentDir),
		OutputMaxChars: e.outputMaxChars,
		WarmPool:       e.warmPool,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// keepWarm gives the test's worker a warm pool of one child per kind, as
// `subagents dev` keeps: the test's second task of a kind runs on a warm
// child, so that what it checks of a child holds for pooled children too.
// A test whose tasks are each of their own kind takes none: its pool's
// refill after each task is a pi started for nothing (about 0.7 s of CPU).
// In a run of the package (2026-11-29) the tests' workers with a pool for
// all started 159 warm children, 69 taken, all of them in the 40 tests
// that call this; the other 83 workers' pools were taken from never. The
// tests' worker processes (startWorkerProcessAt), the services the tests
// start and TestWarmPool keep pools of their own. A new test that runs two
// tasks of one kind calls it, so that its second runs on a pooled child.
func (e *env) keepWarm() { e.warmPool = 1 }

// startWorker runs a worker on c until the test ends or stop is called.
func (e *env) startWorker(c sdkclient.Client) (stop func()) {
	e.t.Helper()
	return e.startWorkerWith(c, e.workerConfig())
}

// startWorkerWith runs a worker with cfg on c until the test ends or stop
// is called.
func (e *env) startWorkerWith(c sdkclient.Client, cfg worker.Config) (stop func()) {
	e.t.Helper()
	w, err := worker.New(c, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		e.t.Fatal(err)
	}
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	e.t.Cleanup(cancel)
	return ctx
}

// finalizeStep is a model answer that finalizes with status SUCCESS.
func finalizeStep(result string) scriptedmodel.Step {
	args, _ := json.Marshal(map[string]string{"status": "SUCCESS", "result": result})
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "subagent_finalize", Arguments: string(args)}}}
}

// readPid reads a process ID that a child's bash tool wrote to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil || pid <= 1 {
		t.Fatalf("pid in %s: %q", path, b)
	}
	return pid
}

// chaosReport, when set (`make chaos`), is the BENCHMARKS.md whose chaos
// sections the long runs rewrite with their figures.
var chaosReport = flag.String("chaos-report", "", "file whose <!-- chaos:NAME --> sections get the chaos figures")

// reliabilityHeading heads the chaos sections; cmd/bench keeps it and them.
const reliabilityHeading = "## Reliability suite (`make chaos`)"

// reportChaos puts text into the report's section for the running test,
// between <!-- chaos:NAME --> and <!-- /chaos:NAME -->, appended when the
// file has none yet.
func reportChaos(t *testing.T, text string) {
	t.Helper()
	if *chaosReport == "" {
		return
	}
	b, err := os.ReadFile(*chaosReport)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	open, end := "<!-- chaos:"+t.Name()+" -->", "<!-- /chaos:"+t.Name()+" -->"
	section := open + "\n" + strings.TrimSpace(text) + "\n" + end
	s := string(b)
	i, j := strings.Index(s, open), strings.Index(s, end)
	if i >= 0 && j > i {
		s = s[:i] + section + s[j+len(end):]
	} else {
		if !strings.Contains(s, reliabilityHeading) {
			s = strings.TrimRight(s, "\n") + "\n\n" + reliabilityHeading + "\n"
		}
		s = strings.TrimRight(s, "\n") + "\n\n" + section + "\n"
	}
	if err := os.WriteFile(*chaosReport, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
