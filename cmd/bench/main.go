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
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/extension"
	"github.com/durable-pi/subagents/internal/benchpage"
	"github.com/durable-pi/subagents/internal/ports"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/devserver"
)

func main() {
	n := flag.Int("n", 20, "runs of each kind")
	idle := flag.Int("idle", 10000, "idle sticky sessions to hold")
	out := flag.String("out", "BENCHMARKS.md", "file to write the figures to")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	only := flag.String("only", "", "comma-separated sections to run (overhead, pi, plans, start, hosts, service, load, solo, idle, recovery, timeline, install); default all but start (the pi section's start rows alone), solo (one-task delegations against version 2's delegation and session, side by side) and install (pi install of this release against the npm peer, from a loopback registry: needs `make registry`; -only install replaces only its own section of -out)")
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
	ctx  context.Context
	root string
	// finalizeExt is the child-side finalize extension, written where a
	// plain pi of the finalize floor loads it.
	finalizeExt string
	model       *scriptedmodel.Server
	pi          worker.Pi
	agentDir    string
	workDir     string
	dataDir     string
	bin         string
	dbFile      string
	stubPath    string
	address     string
	c           *client.Client
	warm        *client.Client // a worker with a warm pool of children
	early       *client.Client // a worker with no pool that starts children early
	warmPool    func() api.PoolStats
	stub        *client.Client
	tc          sdkclient.Client
	// The npm peer, installed once (installPeer).
	peerOnce sync.Once
	peer     *peer
	peerErr  error
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
	// The finalize workload: the profile's child calls subagent_finalize,
	// as every profile's child does by default; pi ends its run with the
	// call (one model call). Its floor is a plain pi with the same
	// extension and tools.
	final := "---\nname: bench-final\nmodel: " + scriptedmodel.ModelRef + "\ntools: " + strings.Join(profiles.ReadOnlyTools, ", ") + "\n---\nAnswer briefly.\n"
	if err := os.WriteFile(filepath.Join(b.workDir, ".pi", "agents", "bench-final.md"), []byte(final), 0o644); err != nil {
		return err
	}
	b.finalizeExt = filepath.Join(root, "subagent-finalize.ts")
	if err := os.WriteFile(b.finalizeExt, extension.FinalizeSource, 0o644); err != nil {
		return err
	}
	if b.model, err = scriptedmodel.Start(); err != nil {
		return err
	}
	defer func() { _ = b.model.Close() }()
	b.model.Script("bench", scriptedmodel.Step{Text: "done", Repeat: true})
	b.model.Script("bench-final", scriptedmodel.Step{Repeat: true, ToolCalls: []scriptedmodel.ToolCall{
		{Name: api.FinalizeToolName, Arguments: `{"status":"SUCCESS","result":"done"}`}}})
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
	// As `subagents dev` dials it (srv.ClientOptions).
	if b.tc, err = sdkclient.Dial(srv.ClientOptions(sdkclient.Options{Logger: sdklog.NewStructuredLogger(quiet)})); err != nil {
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
	if b.early, err = startWorker(worker.Config{TaskQueue: "bench-early", DataDir: b.dataDir, Pi: b.pi, ChildEnv: scriptedmodel.PiEnv(b.agentDir),
		EarlyStart: true, Logger: quiet}); err != nil {
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
	// The install section, measured or kept from the page.
	var installed string
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
		{"pi", func() (string, error) { return b.fromPi(max(n/2, 3), false) }},
		{"plans", func() (string, error) { return b.plans(max(n/2, 3)) }},
		// The start rows alone, for a closer look at them; not part of a
		// whole run, whose pi section has them.
		{"start", func() (string, error) {
			if !sections["start"] {
				return "", nil
			}
			return b.fromPi(n, true)
		}},
		{"hosts", func() (string, error) { return b.hosts(n) }},
		{"service", func() (string, error) { return b.localService(n) }},
		{"load", b.load},
		// Version 3 against version 2, for the levers table; not part of a
		// whole run.
		{"solo", func() (string, error) {
			if !sections["solo"] {
				return "", nil
			}
			return b.oneWorkflow(3)
		}},
		{"idle", func() (string, error) { return b.idleSessions(idleCount) }},
		{"recovery", func() (string, error) { return b.recovery(3) }},
		{"recovery", func() (string, error) { return b.devRestart(3) }},
		// A pi user's install against the npm peer's; not part of a whole
		// run: it needs verdaccio (`make registry`) and the npm registry
		// (the peer's tree, fetched once), and takes minutes. Its section
		// stays in the page between its markers.
		{"install", func() (string, error) {
			if !sections["install"] {
				return "", nil
			}
			// The warm pool's children are this process's: they do not
			// share the machine with the installs measured.
			stopWarm()
			return b.install(max(n/4, 3))
		}},
	} {
		if !want(sec.name) {
			continue
		}
		r, err := sec.run()
		if err != nil {
			return err
		}
		if sec.name == "install" {
			installed = r
			continue
		}
		report.WriteString(r)
	}
	if len(sections) == 1 && sections["install"] {
		// -only install: the rest of the page stays as it is.
		fmt.Print(installed)
		return benchpage.SpliceInstall(outPath, installed)
	}
	if installed == "" {
		installed = benchpage.KeptInstall(outPath)
	}
	report.WriteString(installed)
	if want("recovery") {
		report.WriteString(levers)
	}
	report.WriteString(keptChaosSections(outPath))
	fmt.Print(report.String())
	return os.WriteFile(outPath, []byte(report.String()), 0o644)
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
