// Command bench measures what Temporal adds to a child pi run, side by side
// in one process run, and writes the figures to BENCHMARKS.md:
//
//	go run ./cmd/bench [-n 20] [-out BENCHMARKS.md]
//
// Everything runs on this machine: the scripted model (answering at once),
// an embedded Temporal in memory, one worker, and real pi from the lockfile.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/durable-pi/subagents/api"

	"github.com/google/uuid"
	enums "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/pgcluster"
	"github.com/durable-pi/subagents/internal/ports"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/internal/syncbuf"
	"github.com/durable-pi/subagents/profiles"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/devserver"
)

func main() {
	n := flag.Int("n", 20, "runs of each kind")
	idle := flag.Int("idle", 10000, "idle sticky sessions to hold")
	out := flag.String("out", "BENCHMARKS.md", "file to write the figures to")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	only := flag.String("only", "", "comma-separated sections to run (overhead, load, recovery); default all")
	flag.Parse()
	sections = map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sections[s] = true
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	idleCount = *idle
	if err := run(*n, *out); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// sections are the parts of the run that -only selects; empty: all.
var sections map[string]bool

// idleCount is -idle.
var idleCount int

func want(section string) bool { return len(sections) == 0 || sections[section] }

type bench struct {
	ctx      context.Context
	root     string
	model    *scriptedmodel.Server
	pi       worker.Pi
	agentDir string
	workDir  string
	dataDir  string
	bin      string
	dbFile   string
	stubPath string
	address  string
	c        *client.Client
	warm     *client.Client // a worker with a warm pool of children
	warmPool func() api.PoolStats
	stub     *client.Client
	tc       sdkclient.Client
}

func run(n int, outPath string) error {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	root, err := os.MkdirTemp("", "subagents-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(root) }()
	b := &bench{ctx: ctx, root: root, agentDir: filepath.Join(root, "agent"), workDir: filepath.Join(root, "work"), dataDir: filepath.Join(root, "data")}
	if err := os.MkdirAll(filepath.Join(b.workDir, ".pi", "agents"), 0o755); err != nil {
		return err
	}
	// finalize: false on both sides, so the direct pi run and the child do
	// the same work: one model answer, no tool.
	// Read-only tools on both sides too: the subagent tool (the SingleResult contract)
	// runs read-only agents only.
	profile := "---\nname: bench\nmodel: " + scriptedmodel.ModelRef + "\nfinalize: false\ntools: " + strings.Join(profiles.ReadOnlyTools, ", ") + "\n---\nAnswer briefly.\n"
	if err := os.WriteFile(filepath.Join(b.workDir, ".pi", "agents", "bench.md"), []byte(profile), 0o644); err != nil {
		return err
	}
	if b.model, err = scriptedmodel.Start(); err != nil {
		return err
	}
	defer func() { _ = b.model.Close() }()
	b.model.Script("bench", scriptedmodel.Step{Text: "done", Repeat: true})
	// The recovery task's child is still waiting for its answer when its
	// worker is killed; the next attempt, which has no session file yet,
	// asks again and waits as long.
	b.model.Script("recover", scriptedmodel.Step{Text: "done", DelayMS: 3000}, scriptedmodel.Step{Text: "done"})
	if err := b.model.WritePiAgentDir(b.agentDir); err != nil {
		return err
	}
	if b.pi, err = worker.FindPi(ctx, worker.PiLookup{TreeRoots: []string{mustAbs(".")}}); err != nil {
		return err
	}
	b.bin = filepath.Join(root, "subagents")
	for _, c := range [][2]string{{b.bin, "./cmd/subagents"}, {filepath.Join(root, "subagents-dev"), "./cmd/subagents-dev"}} {
		if out, err := exec.Command("go", "build", "-o", c[0], c[1]).CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", c[1], err, out)
		}
	}

	// A database file, as `subagents dev` keeps (WAL, synchronous FULL):
	// what a user's tasks pay for durability is part of the figures.
	b.dbFile = filepath.Join(root, "temporal.db")
	srv, err := devserver.Start(ctx, devserver.Options{Port: freePort(), UIPort: -1, DBFile: b.dbFile, SearchAttributes: api.SearchAttributes(), Logger: quiet})
	if err != nil {
		return err
	}
	defer srv.Stop()
	b.address = srv.FrontendAddress()
	if b.tc, err = sdkclient.Dial(sdkclient.Options{HostPort: b.address, Logger: sdklog.NewStructuredLogger(quiet)}); err != nil {
		return err
	}
	defer b.tc.Close()
	// Workers in this process, each on a queue of its own, stopped when
	// the run ends.
	var workers []*worker.Worker
	defer func() {
		for _, w := range workers {
			w.Stop()
		}
	}()
	startWorker := func(cfg worker.Config) (*client.Client, error) {
		w, err := worker.New(b.tc, cfg)
		if err != nil {
			return nil, err
		}
		if err := w.Start(); err != nil {
			return nil, err
		}
		workers = append(workers, w)
		return &client.Client{Temporal: b.tc, TaskQueue: cfg.TaskQueue, Address: b.address}, nil
	}
	if b.c, err = startWorker(worker.Config{TaskQueue: "bench", DataDir: b.dataDir, Pi: b.pi, ChildEnv: scriptedmodel.PiEnv(b.agentDir)}); err != nil {
		return err
	}
	ww, err := worker.New(b.tc, worker.Config{TaskQueue: "bench-warm", DataDir: b.dataDir, Pi: b.pi, ChildEnv: scriptedmodel.PiEnv(b.agentDir),
		WarmPool: worker.DefaultDevWarmPool, Logger: quiet})
	if err != nil {
		return err
	}
	if err := ww.Start(); err != nil {
		return err
	}
	var stopOnce sync.Once
	stopWarm := func() { stopOnce.Do(ww.Stop) }
	defer stopWarm()
	b.warm = &client.Client{Temporal: b.tc, TaskQueue: "bench-warm", Address: b.address}
	b.warmPool = ww.PoolStats

	// The stub child for the load figures: no Node start, so what is
	// measured is the orchestration.
	stub := filepath.Join(root, "stubpi")
	b.stubPath = stub
	if out, err := exec.Command("go", "build", "-o", stub, "./internal/stubpi").CombinedOutput(); err != nil {
		return fmt.Errorf("build the stub: %v\n%s", err, out)
	}
	if b.stub, err = startWorker(worker.Config{TaskQueue: "bench-stub", DataDir: filepath.Join(root, "stub-data"), Pi: worker.Pi{Path: stub, Version: "stub"}}); err != nil {
		return err
	}

	if sections["serial"] {
		start := time.Now()
		for range 40 {
			if _, err := b.stubTasks(1); err != nil {
				return err
			}
		}
		fmt.Printf("40 serial stub tasks: %s\n", time.Since(start))
		return nil
	}
	if sections["timeline"] {
		for range 3 {
			if err := b.timeline(); err != nil {
				return err
			}
		}
		return nil
	}
	var report strings.Builder
	for _, sec := range []struct {
		name string
		run  func() (string, error)
	}{
		{"overhead", func() (string, error) {
			// The warm worker's children are this process's: stopped after
			// its figures, they stay out of the memory the later sections
			// sample below this process.
			defer stopWarm()
			return b.overhead(n)
		}},
		{"pi", func() (string, error) { return b.fromPi(max(n/2, 3)) }},
		{"service", func() (string, error) { return b.localService(n) }},
		{"load", b.load},
		{"idle", func() (string, error) { return b.idleSessions(idleCount) }},
		{"recovery", func() (string, error) { return b.recovery(3) }},
		{"recovery", func() (string, error) { return b.devRestart(3) }},
	} {
		if !want(sec.name) {
			continue
		}
		r, err := sec.run()
		if err != nil {
			return err
		}
		report.WriteString(r)
	}
	if want("recovery") {
		report.WriteString(levers)
	}
	report.WriteString(keptChaosSections(outPath))
	fmt.Print(report.String())
	return os.WriteFile(outPath, []byte(report.String()), 0o644)
}

// overhead runs one task three ways in turn, n times each, after two
// warm-up runs: pi alone, through the client library, and `subagents run`.
func (b *bench) overhead(n int) (string, error) {
	// Warm up: the first pi start fills the OS page cache, the first
	// workflow the worker's caches.
	for range 2 {
		if _, err := b.direct(); err != nil {
			return "", err
		}
		if _, _, err := b.library(); err != nil {
			return "", err
		}
	}
	var direct, lib, cli, warmLib, warmCLI []time.Duration
	var sessionEvents, delegationEvents []int
	for range n {
		// Every run starts with the pool refilled after the last one: the
		// starts of its children do not compete with the runs measured.
		b.settle()
		d, err := b.direct()
		if err != nil {
			return "", err
		}
		direct = append(direct, d)
		l, env, err := b.library()
		if err != nil {
			return "", err
		}
		lib = append(lib, l)
		sessionEvents = append(sessionEvents, b.events(env.Items[0].TaskID))
		delegationEvents = append(delegationEvents, b.events(env.DelegationID))
		c, err := b.command("bench")
		if err != nil {
			return "", err
		}
		cli = append(cli, c)
		b.settle()
		wl, _, err := b.libraryOn(b.warm)
		if err != nil {
			return "", err
		}
		warmLib = append(warmLib, wl)
		b.settle()
		wc, err := b.command("bench-warm")
		if err != nil {
			return "", err
		}
		warmCLI = append(warmCLI, wc)
	}
	report := b.report(n, direct, lib, cli, warmLib, warmCLI, sessionEvents, delegationEvents)
	// A task whose child forgets subagent_finalize once and gets corrective
	// feedback: a second RunPi in the same turn.
	forgot := "[[steps:" + stepsJSON(textStep("forgot"), toolStep("subagent_finalize", map[string]string{"status": "SUCCESS", "result": "done"})) + "]] Do it."
	var retriedEvents []int
	for range 3 {
		env, err := b.c.Start(b.ctx, client.StartRequest{Tasks: []api.TaskSpec{{Name: "retried", Prompt: forgot, Model: scriptedmodel.ModelRef, Cwd: b.workDir}}, IdleTTLSeconds: -1})
		if err != nil {
			return "", err
		}
		done, err := b.c.Wait(b.ctx, env.DelegationID, time.Minute)
		if err != nil || !done.Done || done.Items[0].Output != "done" || done.Items[0].Attempts != 2 {
			return "", fmt.Errorf("retried task: %v %+v", err, done.Items)
		}
		retriedEvents = append(retriedEvents, b.events(env.Items[0].TaskID))
	}
	report += fmt.Sprintf("Per task whose child forgot `subagent_finalize` once (two child runs in its turn): session workflow %d. "+
		"A session that stays for a `send` (the default) adds 5 events while it waits; a delegation's events are shared by its tasks. Target ≤ 30 for a one-turn task.\n", medianInt(retriedEvents))
	return report, nil
}

// settle waits until the warm pool holds the two children it keeps for
// the bench's one key (its peak of one, and one more), and a moment more
// for their start to be over.
func (b *bench) settle() {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b.warmPool().Warm >= 2 {
			break
		}
	}
}

// direct is the floor: the same pi invocation, without Temporal.
func (b *bench) direct() (time.Duration, error) {
	session := filepath.Join(b.dataDir, "direct", uuid.NewString()+".jsonl")
	if err := os.MkdirAll(filepath.Dir(session), 0o755); err != nil {
		return 0, err
	}
	cmd := exec.Command(b.pi.Path, "--mode", "json", "--session", session, "--model", scriptedmodel.ModelRef,
		"--no-extensions", "--tools", strings.Join(profiles.ReadOnlyTools, ","), "[[script:bench]] Say done.")
	cmd.Dir = b.workDir
	cmd.Env = append(os.Environ(), append(scriptedmodel.PiEnv(b.agentDir), "PATH="+b.pi.PathPrefix+":"+os.Getenv("PATH"))...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"agent_settled"`) {
		return 0, fmt.Errorf("direct pi: %v\n%.2000s", err, out)
	}
	return time.Since(start), nil
}

func (b *bench) request() client.StartRequest {
	return client.StartRequest{Tasks: []api.TaskSpec{{Name: "bench", Prompt: "[[script:bench]] Say done.", Profile: "bench", Cwd: b.workDir}}, IdleTTLSeconds: -1}
}

// library is one task through the client library: start and wait.
func (b *bench) library() (time.Duration, client.Envelope, error) { return b.libraryOn(b.c) }

func (b *bench) libraryOn(c *client.Client) (time.Duration, client.Envelope, error) {
	start := time.Now()
	env, err := c.Start(b.ctx, b.request())
	if err != nil {
		return 0, env, err
	}
	done, err := c.Wait(b.ctx, env.DelegationID, time.Minute)
	if err != nil {
		return 0, done, err
	}
	if !done.Done || done.Items[0].Output != "done" {
		return 0, done, fmt.Errorf("library run: %+v", done)
	}
	return time.Since(start), done, nil
}

// command is one task as a user runs it: `subagents run` on queue.
func (b *bench) command(queue string) (time.Duration, error) {
	cmd := exec.Command(b.bin, "run", "--json", "--address", b.address, "--task-queue", queue, "--agent", "bench", "[[script:bench]] Say done.")
	cmd.Dir = b.workDir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"output": "done"`) {
		return 0, fmt.Errorf("subagents run: %v\n%.2000s", err, out)
	}
	return time.Since(start), nil
}

func (b *bench) events(id string) int {
	it := b.tc.GetWorkflowHistory(b.ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			return -1
		}
		n++
	}
	return n
}

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func medianInt(v []int) int {
	s := append([]int(nil), v...)
	sort.Ints(s)
	return s[len(s)/2]
}

func (b *bench) report(n int, direct, lib, cli, warmLib, warmCLI []time.Duration, sessionEvents, delegationEvents []int) string {
	var r strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&r, "# Benchmarks\n\nMachine: %s, %d cores, %s/%s, %s; pi %s with Node from the lockfile.\n",
		host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), b.pi.Version)
	fmt.Fprintf(&r, "Date: %s. Command: `make bench` (`go run ./cmd/bench -n %d`).\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), n)
	r.WriteString("## Overhead per task\n\n")
	r.WriteString("One task whose child answers at once (scripted model, `finalize: false`), run three ways in turn, ")
	fmt.Fprintf(&r, "%d times each, after two warm-up runs: pi alone (`pi --mode json --session ...`), ", n)
	r.WriteString("the same task through the client library against the embedded server (start + wait), and `subagents run --json` as a process.\n\n")
	r.WriteString("Then the same two through a worker with a warm pool (`--warm-pool 4`, as `subagents dev` runs): its child was started in RPC mode before the task came, and is pointed at the task's session file.\n\n")
	r.WriteString("| run | p50 | p99 | added p50 | ratio p50 | target |\n| --- | --- | --- | --- | --- | --- |\n")
	d50 := pct(direct, 0.5)
	for _, row := range []struct {
		name, target string
		d            []time.Duration
	}{{"pi alone", "", direct}, {"client library, pool off", "", lib}, {"`subagents run`, pool off", "≤ 1.05×", cli},
		{"client library, warm pool", "", warmLib}, {"`subagents run`, warm pool", "≤ 0.5×", warmCLI}} {
		p50 := pct(row.d, 0.5)
		fmt.Fprintf(&r, "| %s | %s | %s | %s | %.2f× | %s |\n", row.name, ms(p50), ms(pct(row.d, 0.99)), ms(p50-d50), float64(p50)/float64(d50), row.target)
	}
	r.WriteString("\n## History\n\n")
	fmt.Fprintf(&r, "Events per one-turn task (median, workflow code version %d, a session that completes after its turn): session workflow %d, delegation workflow %d. ",
		api.CurrentVersion, medianInt(sessionEvents), medianInt(delegationEvents))
	return r.String()
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// freePort is a free port whose +1000 (a `subagents dev`'s UI) is free too
// (internal/ports: below Linux's ephemeral range).
func freePort() int {
	p, err := ports.Free("127.0.0.1", 1000)
	if err != nil {
		panic(err)
	}
	return p
}

// stubTasks runs one delegation of k stub tasks, all at once, on the
// embedded server, and returns its wall time from start to done.
func (b *bench) stubTasks(k int) (time.Duration, error) { return b.stubTasksOn(b.stub, k) }

// stubTasksOn is stubTasks through c.
func (b *bench) stubTasksOn(c *client.Client, k int) (time.Duration, error) {
	req := client.StartRequest{MaxConcurrency: k, IdleTTLSeconds: -1}
	for i := range k {
		req.Tasks = append(req.Tasks, api.TaskSpec{Name: fmt.Sprintf("t%d", i), Prompt: "stub", Cwd: b.workDir})
	}
	start := time.Now()
	env, err := c.Start(b.ctx, req)
	if err != nil {
		return 0, err
	}
	done, err := c.Wait(b.ctx, env.DelegationID, time.Minute)
	if err != nil {
		return 0, err
	}
	if !done.Done || done.Status != "completed" {
		return 0, fmt.Errorf("stub delegation: %+v", done)
	}
	return time.Since(start), nil
}

// load measures fan-out and throughput with the stub child.
func (b *bench) load() (string, error) {
	var r strings.Builder
	const reps = 5
	// In blocks, not alternating: the server is still writing the
	// visibility records of a 16-task run for a few hundred milliseconds,
	// which a 1-task run right after it would pay for.
	block := func(k int) ([]time.Duration, error) {
		var out []time.Duration
		for i := range reps + 1 {
			d, err := b.stubTasks(k)
			if err != nil {
				return nil, err
			}
			if i > 0 { // the first run warms up
				out = append(out, d)
			}
		}
		time.Sleep(2 * time.Second)
		return out, nil
	}
	one, err := block(1)
	if err != nil {
		return "", err
	}
	sixteen, err := block(16)
	if err != nil {
		return "", err
	}
	r.WriteString("\n## Fan-out (stub child)\n\n")
	fmt.Fprintf(&r, "A delegation of 16 tasks at concurrency 16 against one of 1 task, %d times each, the stub child (`internal/stubpi`) answering at once: ", reps)
	fmt.Fprintf(&r, "1 task p50 %s, 16 tasks p50 %s, ratio %.2f×.\n", ms(pct(one, 0.5)), ms(pct(sixteen, 0.5)), float64(pct(sixteen, 0.5))/float64(pct(one, 0.5)))

	// The same work on a Temporal cluster on PostgreSQL (README, "A
	// cluster on PostgreSQL"), side by side: each concurrency on one
	// server, then on the other.
	cluster, stopCluster, clusterErr := b.stubCluster()
	defer stopCluster()
	r.WriteString("\n## Throughput (stub child)\n\nOne-task delegations kept in flight at each concurrency until the count is done, ")
	r.WriteString("on the embedded server (`subagents dev`: SQLite, WAL, synchronous FULL) and, in turn, on a Temporal cluster on PostgreSQL ")
	r.WriteString("(`internal/pgcluster`: Debian's PostgreSQL 15 with its defaults, fsync on; the four services as processes of their own, 4 history shards, the server built from the module; one in-process worker, as for the embedded server). Same machine, same worker code.\n\n")
	r.WriteString("| concurrency | tasks | embedded: wall | embedded: tasks/s | cluster: wall | cluster: tasks/s | target (embedded) |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range []int{1, 16, 64} {
		total := max(4*c, 40)
		wall, err := inFlight(total, c, func(int) error { _, err := b.stubTasks(1); return err })
		if err != nil {
			return "", err
		}
		cwall, crate := "-", "-"
		if clusterErr == nil {
			cw, err := inFlight(total, c, func(int) error { _, err := b.stubTasksOn(cluster, 1); return err })
			if err != nil {
				return "", err
			}
			cwall, crate = ms(cw), fmt.Sprintf("%.1f", float64(total)/cw.Seconds())
		}
		target := ""
		if c == 16 {
			target = "≥ 40 tasks/s"
		}
		fmt.Fprintf(&r, "| %d | %d | %s | %.1f | %s | %s | %s |\n", c, total, ms(wall), float64(total)/wall.Seconds(), cwall, crate, target)
	}
	if clusterErr != nil {
		fmt.Fprintf(&r, "\nThe cluster was not measured: %v\n", clusterErr)
	}
	return r.String(), nil
}

// stubCluster starts a Temporal cluster on PostgreSQL, sets up its
// namespace as `subagents setup` does, and runs a stub-child worker on it.
// stop ends all of it (and is safe to call when err is set).
func (b *bench) stubCluster() (c *client.Client, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	dir := filepath.Join(b.root, "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, stop, err
	}
	tools, err := pgcluster.Build(b.ctx, ".", filepath.Join(dir, "bin"))
	if err != nil {
		return nil, stop, err
	}
	cl, err := pgcluster.Start(b.ctx, tools, dir)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, cl.Stop)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tc, err := sdkclient.Dial(sdkclient.Options{HostPort: cl.Address, Logger: sdklog.NewStructuredLogger(quiet)})
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, tc.Close)
	if err := worker.Setup(b.ctx, tc, "default", 24*time.Hour, io.Discard); err != nil {
		return nil, stop, err
	}
	w, err := worker.New(tc, worker.Config{TaskQueue: "bench-stub", DataDir: filepath.Join(dir, "data"), Pi: worker.Pi{Path: b.stubPath, Version: "stub"}, Logger: quiet})
	if err != nil {
		return nil, stop, err
	}
	if err := w.Start(); err != nil {
		return nil, stop, err
	}
	stops = append(stops, w.Stop)
	return &client.Client{Temporal: tc, TaskQueue: "bench-stub", Address: cl.Address}, stop, nil
}

// levers records what was changed to get these figures and what each change
// bought, measured with this command (`-only` sections) while changing the
// code.
const levers = `
## Levers tried

Measured with this command on this machine while changing the code (` + "`-only serial`" + ` is 40 one-task stub delegations in a row, ` + "`-only load`" + ` the throughput table).

| change | before | after |
| --- | --- | --- |
| wait by polling the status query → wait in the workflows' ` + "`wait`" + ` update (2026-11-22, -n 10) | client library +875 ms | +128 ms |
| the update's answer is the result (no status call after it) | +128 ms | +107 ms |
| the dev server's history transfer queue reads new tasks up to 1,000 times a second instead of 20 per shard (every hop between a workflow and its tasks waited up to 50 ms) | 40 serial stub tasks 13.4 s; 3.0 tasks/s at concurrency 1, 12.7 at 64 | 2.9 s; 13.3 and 13.6 tasks/s |
| workflow code version 2: the starter sets the search attributes, one upsert per change, no signal from a session that completes, profiles resolved in a local activity | session 21 events, delegation 27 | session 12 (17 while it waits for a send), delegation 21; serial and load within noise |
| SQLite: 8 connections with WAL instead of the plugin's one | 12.7 tasks/s at 64 | 6.2 tasks/s (writers wait in SQLite's busy handler): not kept |
| search attribute cache not refreshed on every read | | no change beyond noise: not kept |
| 8 workflow and activity task pollers instead of 2 | | no change beyond noise: not kept |
| the extension acknowledges delivered results beside the next model call instead of before it | | one ` + "`subagents`" + ` process fewer on the parent's path |
| the extension sends its calls to one ` + "`subagents serve`" + ` per parent pi instead of starting the command for each (-only pi, then make bench) | from inside pi: 1 task 1.49×, 4 tasks 1.45× | 1.37×, 1.16× |
| [local service] the extension reaches ` + "`subagents dev`" + ` on its socket (no process per parent), loads compiled to one JavaScript file, and asks nothing at pi's start (-only pi, 2026-11-23) | pi start with the extension 1.09× | 1.02–1.06× (an empty extension: 1.01–1.07×) |
| [warm children] a warm pool of child pi processes in RPC mode, one task each (-only overhead, -only pi, 2026-11-23) | ` + "`subagents run`" + ` 1.24×; from inside pi 1 task 1.29×, 4 tasks 1.23× | 0.52×; 0.93×, 0.87× |
| a warm child's key one above its kind's peak (back-to-back tasks of one kind find a child while the last one taken is replaced) | ` + "`subagents run`" + ` right after another task 1.79× (a miss) | 0.63×, then 0.52× once each run starts after the refill |

Where the rest goes. One stub task through the client library now takes about 75 ms from start to
result: two workflows, about eight hops of 3 to 8 ms through the server, a child process start. A real
pi child takes about 100 ms longer inside the activity than alone while the server writes its history
and visibility records on the same two cores. Under load the server's CPU bounds throughput near 16
tasks/s here: a CPU profile of the load run spends about 20% in visibility writes (SQLite statements are
parsed anew on every call), 17% in history updates, and the rest in gRPC, protobuf and the SDK; more
throughput needs fewer writes per task (one workflow for a one-task delegation) or a server that is not
on the same two cores as the children. From inside pi, each call of the ` + "`subagents`" + ` command costs
about 55 ms of process start (its binary links the embedded server and UI: 834 Go packages to
initialise) and 117 MiB of resident memory; the parent makes four of them per delegation (list at
session start, start, wait, ack), and loading the extension adds about 125 ms to a pi start. The
extension now keeps one ` + "`subagents serve`" + ` per parent pi instead, which took the four-task case under
its target; what the one-task case still adds is the extension's start, the second model call of the
parent, the two workflows' hops and the child pi's slower start beside the server.

With the warm pool the child's start is off the path: a warm child answers ` + "`switch_session`" + ` in
about 30 ms and the one-turn prompt in about 50 ms. What a pooled one-task delegation still adds over
its floor is the orchestration (two workflows, about 40 ms for a stub task here, eager activity dispatch
on already) and the parent's own second model call; a one-task delegation as one workflow, not two, is
the next lever. Eager workflow start applies only where the client shares the worker's process (the
socket of ` + "`subagents dev`" + `); ` + "`subagents run`" + ` and this bench's library client are separate clients.
`

// recovery kills a worker process (SIGKILL) while its child runs and times
// how long until a new worker's attempt reaches the model, and until the
// task is done.
func (b *bench) recovery(reps int) (string, error) {
	var resumed, done []time.Duration
	c := &client.Client{Temporal: b.tc, TaskQueue: "bench-recovery", Address: b.address}
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(b.bin, "worker", "--address", b.address, "--task-queue", "bench-recovery",
			"--data-dir", filepath.Join(b.dataDir, "recovery"), "--pi", b.pi.Path, "--log-level", "error")
		cmd.Env = append(os.Environ(), scriptedmodel.PiEnv(b.agentDir)...)
		return cmd, cmd.Start()
	}
	for range reps {
		w, err := start()
		if err != nil {
			return "", err
		}
		var w2 *exec.Cmd
		_, res, fin, err := b.crashRun(c,
			func() { _ = w.Process.Kill(); _ = w.Wait() },
			func() error { w2, err = start(); return err })
		if err != nil {
			return "", err
		}
		resumed, done = append(resumed, res), append(done, fin)
		_ = w2.Process.Signal(os.Interrupt)
		_ = w2.Wait()
	}
	var r strings.Builder
	r.WriteString("\n## Recovery from a killed worker\n\n")
	fmt.Fprintf(&r, "`subagents worker` as a process, SIGKILLed 1.5 s into a child run and started again at once, %d times: ", reps)
	fmt.Fprintf(&r, "the new worker's attempt reaches the model after p50 %s (max %s), target ≤ 5 s; the task is done after p50 %s (max %s) (the scripted model takes 3 s over this answer, as it did for the killed attempt). ",
		ms(pct(resumed, 0.5)), ms(pct(resumed, 1)), ms(pct(done, 0.5)), ms(pct(done, 1)))
	r.WriteString("Defaults: heartbeat every 2 s, heartbeat timeout 5 s, first retry after 200 ms, sticky workflow tasks released after 1 s.\n")
	return r.String(), nil
}

// crashRun starts the recovery task through c, lets its child run 1.5 s
// (a heartbeat or two go out, as in a real run), kills what runs it with
// kill and starts it again with restart. It times, from the kill, when
// restart returned, when the new attempt reached the model and when the
// task was done.
func (b *bench) crashRun(c *client.Client, kill func(), restart func() error) (ready, resumed, done time.Duration, err error) {
	before := len(b.model.RequestsFor("recover"))
	env, err := c.Start(b.ctx, client.StartRequest{Tasks: []api.TaskSpec{{Name: "recover", Prompt: "[[script:recover]] Say done.", Profile: "bench", Cwd: b.workDir}}, IdleTTLSeconds: -1})
	if err != nil {
		return 0, 0, 0, err
	}
	reached := func(n int) error {
		wctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		_, err := b.model.WaitForRequests(wctx, n, func(r scriptedmodel.Request) bool { return r.Script == "recover" })
		return err
	}
	if err := reached(before + 1); err != nil {
		return 0, 0, 0, err
	}
	time.Sleep(1500 * time.Millisecond)
	kill()
	killed := time.Now()
	if err := restart(); err != nil {
		return 0, 0, 0, err
	}
	ready = time.Since(killed)
	if err := reached(before + 2); err != nil {
		return 0, 0, 0, err
	}
	resumed = time.Since(killed)
	fin, err := c.Wait(b.ctx, env.DelegationID, 2*time.Minute)
	if err != nil || !fin.Done || fin.Items[0].Output != "done" {
		return 0, 0, 0, fmt.Errorf("recovery run: %v %+v", err, fin)
	}
	return ready, resumed, time.Since(killed), nil
}

// timeline prints the events of one stub task's delegation and session with
// their offsets from the delegation's start: where its time goes.
func (b *bench) timeline() error {
	start := time.Now()
	req := client.StartRequest{IdleTTLSeconds: -1, Tasks: []api.TaskSpec{{Name: "t", Prompt: "stub", Cwd: b.workDir}}}
	env, err := b.stub.Start(b.ctx, req)
	if err != nil {
		return err
	}
	startReturned := time.Since(start)
	if _, err := b.stub.Wait(b.ctx, env.DelegationID, time.Minute); err != nil {
		return err
	}
	fmt.Printf("start returned after %s, wait after %s\n", startReturned, time.Since(start))
	for _, id := range []string{env.DelegationID, env.Items[0].TaskID} {
		it := b.tc.GetWorkflowHistory(b.ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		fmt.Println(id)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			fmt.Printf("  %7.1f ms  %s\n", float64(ev.GetEventTime().AsTime().Sub(start))/float64(time.Millisecond), ev.GetEventType())
		}
	}
	return nil
}

// fromPi measures delegation as a pi user meets it: a real parent pi with
// the extension, whose model asks for one task (the subagent tool) or four
// (delegate_to_subagents), against the floor of the same pi runs without
// Temporal: the parent's and the children's, the children of a batch started
// together. The peak memory is that of every process this bench started
// (parent pi, subagents commands, child pi), sampled every 10 ms; the
// embedded server and worker run inside the bench process and are reported
// apart.
func (b *bench) fromPi(n int) (string, error) {
	svc, err := b.startService("pi")
	if err != nil {
		return "", err
	}
	defer svc.stop()
	cold, err := b.startService("pi-cold", "--warm-pool", "0")
	if err != nil {
		return "", err
	}
	defer cold.stop()
	ext := mustAbs("extension")
	one := "[[steps:" + stepsJSON(toolStep("subagent", map[string]any{"agent": "bench", "task": "[[script:bench]] Say done."}), textStep("done")) + "]] Delegate."
	var tasks []map[string]string
	for i := range 4 {
		tasks = append(tasks, map[string]string{"name": fmt.Sprintf("t%d", i), "prompt": "[[script:bench]] Say done.", "profile": "bench"})
	}
	none := "[[steps:" + stepsJSON(textStep("done")) + "]] Answer."
	four := "[[steps:" + stepsJSON(toolStep("delegate_to_subagents", map[string]any{"tasks": tasks}), textStep("done")) + "]] Delegate four."
	// own is the peak of the processes the parents started themselves
	// (their descendants, pi excluded), over every delegating run.
	var own int64
	parentOn := func(svc *service, prompt string) (time.Duration, int64, error) {
		d, peak, started, err := b.parentPi(svc, ext, prompt)
		own = max(own, started)
		return d, peak, err
	}
	parent := func(prompt string) (time.Duration, int64, error) { return parentOn(svc, prompt) }
	// checked is parentOn that fails unless the delegation reached its n
	// children.
	checked := func(svc *service, prompt string, n int) (time.Duration, int64, error) {
		children := len(b.model.RequestsFor("bench"))
		d, p, err := parentOn(svc, prompt)
		if err == nil {
			err = b.childAnswered(children, n)
		}
		return d, p, err
	}
	plain := func(k int) (time.Duration, int64, error) {
		// One plain run, then k started together: the parent's run and its
		// children's, as fast as pi alone can do them.
		return sampled(func() error {
			if _, err := b.direct(); err != nil {
				return err
			}
			errs := make(chan error, k)
			for range k {
				go func() {
					_, err := b.direct()
					errs <- err
				}()
			}
			var first error
			for range k {
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			return first
		})
	}
	type series struct {
		d    []time.Duration
		peak int64
	}
	// pi's own cost of loading an extension, any extension: the floor of
	// what loading this one can cost.
	noop := mustAbs("e2e/testdata/extensions/noop.ts")
	// The npm peer, side by side: one task through its subagent tool, four
	// through its workflowScript with runs.all.
	pr, peerErr := b.installPeer()
	peerOne := "[[steps:" + stepsJSON(toolStep("subagent", map[string]any{"agent": "peer", "task": "[[script:bench]] Say done.", "async": false}), textStep("done")) + "]] Delegate."
	var runsAll []string
	for i := range 4 {
		runsAll = append(runsAll, fmt.Sprintf("{key: 't%d', agent: 'peer', task: '[[script:bench]] Say done.'}", i))
	}
	peerFour := "[[steps:" + stepsJSON(toolStep("subagent", map[string]any{
		"workflowScript": "const r = await runs.all([" + strings.Join(runsAll, ", ") + "]); return r.map((x) => x.output);", "async": false,
	}), textStep("done")) + "]] Delegate four."
	// Where the time of a warm one-task delegation goes, from its model
	// calls: parent, child, parent again.
	var phases delegationPhases
	var floor1, floor4, del1, del4, del1Cold, del4Cold, ext0, noop0, bare0, plain0, peer1, peer4 series
	add := func(s *series, d time.Duration, p int64) { s.d = append(s.d, d); s.peak = max(s.peak, p) }
	// The start rows (pi with and without an extension) differ by a few
	// percent, within this machine's noise over one run each per round:
	// they are sampled startReps times per round.
	const startReps = 6
	// A kind of run: its series, how to run it once, how many times a round.
	type kind struct {
		into *series
		run  func() (time.Duration, int64, error)
		reps int
	}
	kinds := []kind{
		{&floor1, func() (time.Duration, int64, error) { return plain(1) }, 1},
		{&plain0, func() (time.Duration, int64, error) {
			return sampled(func() error { _, err := b.direct(); return err })
		}, startReps},
		// The same run as a user's pi without this extension: no -e, no
		// --no-extensions; then with an empty extension; then with this one.
		{&bare0, func() (time.Duration, int64, error) {
			d, p, _, err := b.parentPi(svc, "", none)
			return d, p, err
		}, startReps},
		{&noop0, func() (time.Duration, int64, error) {
			d, p, _, err := b.parentPi(svc, noop, none)
			return d, p, err
		}, startReps},
		{&ext0, func() (time.Duration, int64, error) { return parent(none) }, startReps},
		{&del1, func() (time.Duration, int64, error) {
			before, children := len(b.model.Requests()), len(b.model.RequestsFor("bench"))
			var t0 time.Time
			d, p, started, err := b.parentPiAt(svc.address, svc.dataDir, ext, one, func() { t0 = time.Now() })
			own = max(own, started)
			if err == nil {
				err = b.childAnswered(children, 1)
			}
			if err == nil {
				phases.add(t0, d, b.model.Requests()[before:])
			}
			return d, p, err
		}, 1},
		{&del1Cold, func() (time.Duration, int64, error) { return checked(cold, one, 1) }, 1},
		{&floor4, func() (time.Duration, int64, error) { return plain(4) }, 1},
		{&del4, func() (time.Duration, int64, error) { return checked(svc, four, 4) }, 1},
		{&del4Cold, func() (time.Duration, int64, error) { return checked(cold, four, 4) }, 1},
	}
	if peerErr == nil {
		kinds = append(kinds,
			kind{&peer1, func() (time.Duration, int64, error) { return pr.run(b, peerOne) }, 1},
			kind{&peer4, func() (time.Duration, int64, error) { return pr.run(b, peerFour) }, 1})
	}
	// In turn, so that every kind meets the same machine; the first round
	// warms up.
	for i := range n + 1 {
		for _, k := range kinds {
			for range k.reps {
				// The warm pool refills after a delegation: measured runs
				// do not share the machine with its starts.
				svc.quiet()
				d, p, err := k.run()
				if err != nil {
					return "", err
				}
				if i > 0 {
					add(k.into, d, p)
				}
			}
		}
	}
	var r strings.Builder
	r.WriteString("\n## From inside pi\n\n")
	fmt.Fprintf(&r, "A real parent pi (`--mode json -e ./extension`, scripted model) delegating through the extension, against the floor of the same pi runs without Temporal, in turn, %d times each after a warm-up (the four start rows %d times each: %d runs per round). ", n, n*startReps, startReps)
	r.WriteString("The floor of one task is two plain runs in sequence (parent, child); of four, one plain run followed by four started together. ")
	r.WriteString("The service is a `subagents dev` process (as the extension starts it), reached on its socket. ")
	r.WriteString("Peak memory is the sum of the resident sets of every process of the run but the service (parent pi, what it started, child pi), sampled every 10 ms.\n\n")
	r.WriteString("| run | p50 | p99 | ratio p50 | target | peak RSS of the processes |\n| --- | --- | --- | --- | --- | --- |\n")
	row := func(name string, s series, floor series, target string) {
		ratio := float64(pct(s.d, 0.5)) / float64(pct(floor.d, 0.5))
		fmt.Fprintf(&r, "| %s | %s | %s | %.2f× | %s | %d MiB |\n", name, ms(pct(s.d, 0.5)), ms(pct(s.d, 0.99)), ratio, target, s.peak>>20)
	}
	row("plain pi, one answer (`--no-extensions`, as a child runs)", plain0, plain0, "")
	row("pi as a user starts it, one answer (no `-e`)", bare0, bare0, "")
	row("the same with an extension that does nothing (pi's cost of loading one)", noop0, bare0, "")
	row("the same with this extension, no delegation", ext0, bare0, "≤ 1.03×")
	// Against the empty extension: what this one costs beyond pi's own
	// price for loading any (its TypeScript loader, jiti).
	row("this extension against the one that does nothing (its own cost)", ext0, noop0, "")
	row("floor: parent + child", floor1, floor1, "")
	row("parent pi, `subagent` tool, 1 task, pool off", del1Cold, floor1, "")
	row("parent pi, `subagent` tool, 1 task, warm pool", del1, floor1, "≤ 0.8×")
	row("floor: parent, then 4 children at once", floor4, floor4, "")
	row("parent pi, `delegate_to_subagents`, 4 tasks, pool off", del4Cold, floor4, "")
	row("parent pi, `delegate_to_subagents`, 4 tasks, warm pool", del4, floor4, "≤ 1.0×")
	if peerErr == nil {
		row("npm peer "+peerVersion+", `subagent` tool, 1 task (children in the parent's process, not durable)", peer1, floor1, "")
		row("npm peer "+peerVersion+", `workflowScript` with `runs.all`, 4 tasks", peer4, floor4, "")
	} else {
		fmt.Fprintf(&r, "\nThe npm peer %s was not measured: %v\n", peerVersion, peerErr)
	}
	r.WriteString(phases.report())
	fmt.Fprintf(&r, "\nProcesses a parent pi started itself during its delegations (pi and the service excluded), peak: %d MiB (target ≤ 15 MiB; `subagents serve` was 117 MiB). ", own>>20)
	fmt.Fprintf(&r, "The service (`subagents dev`: embedded server, UI, worker) after the runs: %d MiB resident, and its warm children (pool of 4) %d MiB together; the same service with `--warm-pool 0`: %d MiB.\n",
		activities.ResidentBytes(svc.cmd.Process.Pid)>>20, readProcs().below(svc.cmd.Process.Pid)>>20, activities.ResidentBytes(cold.cmd.Process.Pid)>>20)
	return r.String(), nil
}

// childAnswered checks that a delegating run reached its children: n more
// child model calls than before (a refused delegation still lets the
// parent end, and would be timed as if it had run).
func (b *bench) childAnswered(before, n int) error {
	if got := len(b.model.RequestsFor("bench")) - before; got != n {
		return fmt.Errorf("the delegation reached %d child model calls, want %d", got, n)
	}
	return nil
}

// delegationPhases splits runs of a parent pi that delegates one task at
// the model calls it and its child make: parent, child, parent again.
type delegationPhases struct {
	start, handOff, answer, end []time.Duration
}

func (p *delegationPhases) add(t0 time.Time, total time.Duration, reqs []scriptedmodel.Request) {
	if len(reqs) != 3 || t0.IsZero() {
		return
	}
	p.start = append(p.start, reqs[0].Time.Sub(t0))
	p.handOff = append(p.handOff, reqs[1].Time.Sub(reqs[0].Time))
	p.answer = append(p.answer, reqs[2].Time.Sub(reqs[1].Time))
	p.end = append(p.end, t0.Add(total).Sub(reqs[2].Time))
}

func (p *delegationPhases) report() string {
	if len(p.start) == 0 {
		return ""
	}
	return fmt.Sprintf("\nWhere a warm one-task delegation's time goes (medians, from the model calls): the parent's start to its first model call %s; "+
		"that call to the child's model call (the tool call, the service, the warm child's switch to its session and prompt) %s; "+
		"the child's call to the parent's next one (the child's answer, its finalize, back to the parent's tool result) %s; "+
		"the parent's last call to its exit %s. A plain pi exits a few milliseconds after its one model call; a pi that made a second one waits "+
		"at exit for V8's background tier-up of the HTTP parser's WebAssembly (undici's llhttp) before it can end, 70-100 ms here (a parent run by hand "+
		"under `node --liftoff-only` ends 5 ms after its last call): the parent pays it whatever runs its tool, while each of the floor's runs makes one call.\n",
		ms(pct(p.start, 0.5)), ms(pct(p.handOff, 0.5)), ms(pct(p.answer, 0.5)), ms(pct(p.end, 0.5)))
}

func toolStep(name string, args any) scriptedmodel.Step {
	b, _ := json.Marshal(args)
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: name, Arguments: string(b)}}}
}

func textStep(text string) scriptedmodel.Step { return scriptedmodel.Step{Text: text} }

func stepsJSON(steps ...scriptedmodel.Step) string {
	b, _ := json.Marshal(steps)
	return string(b)
}

// sampled runs fn and samples the resident memory of every descendant of
// this process while it runs, every 10 ms.
func sampled(fn func() error) (time.Duration, int64, error) {
	d, peak, _, err := sampledTree(nil, fn)
	return d, peak, err
}

// sampledTree is sampled that also keeps the peak below the process whose
// pid root reports (0 until it runs), from the same reading of /proc: one
// scan per tick for both, so that a run with two figures loads the machine
// no more than a run with one.
func sampledTree(root func() int, fn func() error) (time.Duration, int64, int64, error) {
	stop := make(chan struct{})
	type peaks struct{ all, below int64 }
	peakC := make(chan peaks, 1)
	go func() {
		var p peaks
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			ps := readProcs()
			p.all = max(p.all, ps.below(os.Getpid()))
			if root != nil {
				if pid := root(); pid > 0 {
					p.below = max(p.below, ps.below(pid))
				}
			}
			select {
			case <-stop:
				peakC <- p
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	err := fn()
	d := time.Since(start)
	close(stop)
	p := <-peakC
	return d, p.all, p.below, err
}

// procs is one reading of /proc: each process's children and resident set.
type procs struct {
	children map[int][]int
	rss      map[int]int64
	// cpu is the CPU time each process used, in clock ticks.
	cpu map[int]int64
}

// isReaper is whether process pid is a worker's reaper (a re-exec of
// /proc/self/exe, so named "exe" in its stat).
func isReaper(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
	return err == nil && strings.TrimRight(string(b), "\x00") == activities.ReaperName
}

func readProcs() procs {
	ps := procs{children: map[int][]int{}, rss: map[int]int64{}, cpu: map[int]int64{}}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which may hold spaces: state ppid
		// ..., utime and stime are the 14th and 15th fields overall, rss
		// (in pages) the 24th.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 22 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		// A reaper of this process's own workers (the bench's harness,
		// not the run measured): left out, as the services are.
		if strings.HasSuffix(s[:strings.LastIndexByte(s, ')')], "(exe") && isReaper(d.Name()) {
			continue
		}
		pages, _ := strconv.ParseInt(f[21], 10, 64)
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ps.children[ppid] = append(ps.children[ppid], p)
		ps.rss[p] = pages * int64(os.Getpagesize())
		ps.cpu[p] = utime + stime
	}
	return ps
}

// below sums the resident sets of the processes below pid, the services'
// subtrees left out.
func (ps procs) below(pid int) int64 { return ps.sumBelow(pid, ps.rss) }

// cpuBelow sums the CPU time of the processes below pid, the services'
// subtrees left out.
func (ps procs) cpuBelow(pid int) int64 { return ps.sumBelow(pid, ps.cpu) }

func (ps procs) sumBelow(pid int, of map[int]int64) int64 {
	var sum int64
	var walk func(int)
	walk = func(p int) {
		for _, c := range ps.children[p] {
			if services.has(c) {
				continue
			}
			sum += of[c]
			walk(c)
		}
	}
	walk(pid)
	return sum
}

// idleSessions starts n sessions whose first turn (the stub child) ends
// and which then wait for a `send`, as sticky sessions do for an hour by
// default, on a `subagents worker` process of their own whose workflow cache
// holds fewer than n. It reports that worker's memory per idle session, the
// database bytes per session, and how long a `send` to a long-idle session
// takes.
func (b *bench) idleSessions(n int) (string, error) {
	const queue, cacheSize = "bench-idle", 1000
	w := exec.Command(b.bin, "worker", "--address", b.address, "--task-queue", queue, "--data-dir", filepath.Join(b.dataDir, "idle"),
		"--pi", b.stubPath, "--workflow-cache", strconv.Itoa(cacheSize), "--log-level", "error")
	if err := w.Start(); err != nil {
		return "", err
	}
	defer func() { _ = w.Process.Signal(os.Interrupt); _ = w.Wait() }()
	c := &client.Client{Temporal: b.tc, TaskQueue: queue, Address: b.address}
	dbBytes := func() int64 {
		var sum int64
		for _, suffix := range []string{"", "-wal"} {
			if info, err := os.Stat(b.dbFile + suffix); err == nil {
				sum += info.Size()
			}
		}
		return sum
	}
	startMany := func(k int) ([]string, time.Duration, error) {
		ids := make([]string, k)
		for i := range ids {
			ids[i] = uuid.NewString()
		}
		wall, err := inFlight(k, 64, func(i int) error {
			in := api.SessionInput{SessionID: ids[i], Prompt: "stub", Cwd: b.workDir, Version: api.CurrentVersion}
			if _, err := b.tc.ExecuteWorkflow(b.ctx, sdkclient.StartWorkflowOptions{ID: in.SessionID, TaskQueue: queue}, api.SessionWorkflowName, in); err != nil {
				return err
			}
			env, err := c.Wait(b.ctx, in.SessionID, time.Minute)
			if err == nil && (len(env.Items) != 1 || env.Items[0].Status != string(api.StateCompleted)) {
				err = fmt.Errorf("session %s: %+v after its first turn", in.SessionID, env.Items)
			}
			return err
		})
		if err != nil {
			return nil, 0, err
		}
		return ids, wall, nil
	}
	// Warm up the worker (its caches, pools and code) before the baseline.
	if _, _, err := startMany(200); err != nil {
		return "", err
	}
	rss0, db0 := activities.ResidentBytes(w.Process.Pid), dbBytes()
	began := time.Now()
	ids, wall, err := startMany(n)
	if err != nil {
		return "", err
	}
	rss1, db1 := activities.ResidentBytes(w.Process.Pid), dbBytes()
	// Sends to the sessions that have waited the longest.
	idle := time.Since(began)
	var accepted, turn []time.Duration
	for i := range 10 {
		t0 := time.Now()
		h, err := b.tc.UpdateWorkflow(b.ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID: ids[i], UpdateName: api.SendUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
			Args: []any{api.SendRequest{Prompt: "stub again"}},
		})
		if err != nil {
			return "", err
		}
		var acc api.SendAccepted
		if err := h.Get(b.ctx, &acc); err != nil {
			return "", err
		}
		accepted = append(accepted, time.Since(t0))
		turnNo := acc.Turn
		wh, err := b.tc.UpdateWorkflow(b.ctx, sdkclient.UpdateWorkflowOptions{
			WorkflowID: ids[i], UpdateName: api.WaitUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
			Args: []any{api.WaitRequest{Turn: turnNo}},
		})
		if err != nil {
			return "", err
		}
		var st api.SessionStatus
		if err := wh.Get(b.ctx, &st); err != nil {
			return "", err
		}
		if st.LastTurn == nil || st.LastTurn.Turn != 2 || st.LastTurn.State != api.StateCompleted {
			return "", fmt.Errorf("send to an idle session: %+v", st.LastTurn)
		}
		turn = append(turn, time.Since(t0))
	}
	var r strings.Builder
	r.WriteString("\n## Idle sticky sessions\n\n")
	fmt.Fprintf(&r, "%d sessions (stub child, started 64 at a time: %s in all, %.0f sessions/s) each ran its first turn and now waits for a `send`, as a sticky session does for an hour by default. ",
		n, ms(wall), float64(n)/wall.Seconds())
	fmt.Fprintf(&r, "They run on a `subagents worker` process of their own (`--workflow-cache %d`: the sessions beyond it are evicted and cost the worker nothing until a `send`), measured by its resident memory after a warm-up of 200 sessions.\n\n", cacheSize)
	r.WriteString("| figure | value | target |\n| --- | --- | --- |\n")
	fmt.Fprintf(&r, "| worker resident memory: before, after | %d MiB, %d MiB | |\n", rss0>>20, rss1>>20)
	fmt.Fprintf(&r, "| worker memory per idle session | %.1f KB | ≤ 20 KB |\n", float64(rss1-rss0)/float64(n)/1024)
	fmt.Fprintf(&r, "| database bytes per session (SQLite file and WAL) | %.1f KB | |\n", float64(db1-db0)/float64(n)/1024)
	fmt.Fprintf(&r, "| `send` to a session idle for %s, until accepted (p50 / max of 10) | %s / %s | |\n", idle.Round(time.Second), ms(pct(accepted, 0.5)), ms(pct(accepted, 1)))
	fmt.Fprintf(&r, "| the same, until its turn ended (p50 / max) | %s / %s | |\n", ms(pct(turn, 0.5)), ms(pct(turn, 1)))
	return r.String(), nil
}

// devRestart kills a whole `subagents dev` (server, UI and worker in one
// process) with SIGKILL while a child runs, starts it again on the same
// database, and times how long until the task is done.
func (b *bench) devRestart(reps int) (string, error) {
	dir := filepath.Join(b.dataDir, "dev-restart")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	port := freePort()
	address := fmt.Sprintf("127.0.0.1:%d", port)
	start := func() (*exec.Cmd, *syncbuf.Buffer, error) {
		cmd := exec.Command(b.bin, "dev", "--port", strconv.Itoa(port), "--headless", "--db-filename", filepath.Join(dir, "temporal.db"),
			"--data-dir", filepath.Join(dir, "data"), "--pi", b.pi.Path, "--log-level", "error")
		cmd.Env = append(os.Environ(), scriptedmodel.PiEnv(b.agentDir)...)
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(out.String(), "worker polling task queue") {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				return nil, nil, fmt.Errorf("subagents dev did not start:\n%s", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return cmd, out, nil
	}
	dial := func() (sdkclient.Client, error) {
		return sdkclient.Dial(sdkclient.Options{HostPort: address, Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	}
	var ready, resumed, done []time.Duration
	for range reps {
		dev, _, err := start()
		if err != nil {
			return "", err
		}
		tc, err := dial()
		if err != nil {
			return "", err
		}
		c := &client.Client{Temporal: tc, TaskQueue: api.DefaultTaskQueue, Address: address}
		up, res, fin, err := b.crashRun(c,
			func() { tc.Close(); _ = dev.Process.Kill(); _ = dev.Wait() },
			func() error {
				if dev, _, err = start(); err != nil {
					return err
				}
				tc, err = dial()
				c.Temporal = tc
				return err
			})
		if err != nil {
			return "", err
		}
		ready, resumed, done = append(ready, up), append(resumed, res), append(done, fin)
		tc.Close()
		_ = dev.Process.Signal(syscall.SIGTERM)
		_ = dev.Wait()
	}
	var r strings.Builder
	r.WriteString("\n## Recovery from a killed `subagents dev`\n\n")
	fmt.Fprintf(&r, "The whole `subagents dev` (server, worker) SIGKILLed 1.5 s into a child run and started again at once on the same database file, %d times: ", reps)
	fmt.Fprintf(&r, "it serves again after p50 %s (max %s); the new attempt reaches the model after p50 %s (max %s), target ≤ 5 s; the task is done after p50 %s (max %s) from the kill (the scripted model takes 3 s over this answer).\n",
		ms(pct(ready, 0.5)), ms(pct(ready, 1)), ms(pct(resumed, 0.5)), ms(pct(resumed, 1)), ms(pct(done, 0.5)), ms(pct(done, 1)))
	return r.String(), nil
}

// keptChaosSections returns the reliability figures that `make chaos`
// wrote into the report (between <!-- chaos:NAME --> markers), so that a
// new bench run keeps them.
func keptChaosSections(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	var out []string
	for {
		i := strings.Index(s, "<!-- chaos:")
		if i < 0 {
			break
		}
		name := s[i+len("<!-- chaos:"):]
		name = name[:max(strings.Index(name, " -->"), 0)]
		end := "<!-- /chaos:" + name + " -->"
		j := strings.Index(s, end)
		if j < i {
			break
		}
		out = append(out, s[i:j+len(end)])
		s = s[j+len(end):]
	}
	if len(out) == 0 {
		return ""
	}
	return "\n## Reliability suite (`make chaos`)\n\n" + strings.Join(out, "\n\n") + "\n"
}

// inFlight runs job(0..total-1) with at most limit at a time and returns
// the wall time of all of them and the first error.
func inFlight(total, limit int, job func(i int) error) (time.Duration, error) {
	start := time.Now()
	sem := make(chan struct{}, limit)
	errs := make(chan error, total)
	for i := range total {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- job(i)
		}()
	}
	for range limit {
		sem <- struct{}{}
	}
	wall := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return wall, err
		}
	}
	return wall, nil
}
