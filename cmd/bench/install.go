package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/durable-pi/subagents/internal/benchpage"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// The install section (issue [install], "measure"): how a pi user installs
// this project against the npm peer, side by side in one run. Both come
// from the same registry server on loopback (verdaccio, `make registry`),
// so the network is the same for both: this project's packages are built
// from this tree (cmd/dist, this machine's platform only) and published to
// it; the peer's whole tree is fetched from the npm registry once, through
// the server's uplink, before anything is timed, and the server then runs
// with no uplink at all. Every round is a new user: a new HOME and pi config
// dir, an empty npm cache, nothing running.

// platformBudget is the most a platform package may weigh packed (issue
// [install]): npm downloads one of them on every install.
const platformBudget = 60_000_000

// firstResultTarget is the goal for install to first result on this
// machine, the model excluded (issue [install]).
const firstResultTarget = 60 * time.Second

// Why each wait below is as long as it is.
const (
	// The first build of a release compiles everything anew (no cgo,
	// trimmed paths): about 7 minutes on two cores, 15 s with a warm Go
	// build cache; 20 minutes still ends a build that hangs.
	distTimeout = 20 * time.Minute
	// Fetching the peer's tree (about 130 packages) from the npm registry
	// through the server's uplink took 41 s here; the registry's network
	// is the one thing outside this machine.
	warmTimeout = 10 * time.Minute
	// A pi install from loopback takes seconds (the peer's tree about 12
	// s, this project's 56 MB platform package about 3 s); five minutes is
	// far beyond that and still ends one that hangs.
	npmTimeout = 5 * time.Minute
	// The parent's run holds the service's first start (about 2 s here;
	// the extension gives it a minute) and two scripted model answers.
	parentTimeout = 3 * time.Minute
	// `subagents stop` waits up to 30 s for its service (a child's kill
	// grace and the server's stop); a minute leaves it room.
	stopTimeout = time.Minute
	// verdaccio answers its ping about 3 s after its start here.
	registryStartTimeout = time.Minute
	// A pipe a process's descendant still holds must not hold Wait: pi's
	// output is read to its end within this delay after pi exited.
	waitDelay = 10 * time.Second
)

// installSide is one of the two packages, its figures over the rounds.
type installSide struct {
	key    string // its files' and scripts' prefix
	name   string // as the report names it
	source string // what `pi install` is given
	ours   bool
	// agent is the agent its parent's `subagent` call names.
	agent string
	// Per measured round: pi install, the parent's run after it, both;
	// then the same user's next parent run.
	install, parent, total, second []time.Duration
	// Ours: the parent's tool call to the child's model call (the
	// service's first start, the child's start).
	toChild []time.Duration
	// What the install left in the pi config dir's npm folder (the last
	// round's): its packages and the bytes of their files.
	packages  int
	diskBytes int64
	// The files jiti's transpile cache held after the first delegation
	// (the last round's): the modules pi transpiled to load the extension.
	jitiFiles int
}

// packed is what `npm pack --json` says of one package's tarball.
type packed struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Filename     string `json:"filename"`
	Size         int64  `json:"size"`
	UnpackedSize int64  `json:"unpackedSize"`
	EntryCount   int    `json:"entryCount"`
	path         string
}

// registry is verdaccio on a loopback port of its own, run by this bench.
type registry struct {
	dir, url, npmrc string
	port            int
	node, bin       string
	cmd             *exec.Cmd
	out             *syncbuf.Buffer
	finished        chan struct{}
}

// install measures both sides and returns the section, between its
// markers.
func (b *bench) install(rounds int) (string, error) {
	ib := &installBench{b: b, root: filepath.Join(b.root, "install")}
	if err := os.MkdirAll(ib.root, 0o755); err != nil {
		return "", err
	}
	return ib.run(rounds)
}

type installBench struct {
	b    *bench
	root string
	reg  *registry
	// path is a pi user's PATH: pi and the Node 22 beside it first, no Go
	// toolchain, no subagents command.
	path string
}

func (ib *installBench) run(rounds int) (string, error) {
	b := ib.b
	var err error
	if ib.path, err = userPath(b.pi.PathPrefix); err != nil {
		return "", err
	}

	// This project's release for this machine, as `make dist` builds it.
	platform := runtime.GOOS + "-" + runtime.GOARCH
	dist := filepath.Join(ib.root, "dist")
	began := time.Now()
	if out, err := runFor(distTimeout, nil, "", "go", "run", "./cmd/dist", "-platforms", platform, "-out", dist); err != nil {
		return "", fmt.Errorf("go run ./cmd/dist: %v\n%s", err, out)
	}
	distTook := time.Since(began)

	if ib.reg, err = ib.startRegistry(); err != nil {
		return "", err
	}
	defer ib.reg.stop()
	// The tarballs npm pack writes are what the registry serves: published
	// as they are, the figures below are those of what every install
	// downloads.
	packs := filepath.Join(ib.root, "packs")
	var ours []packed
	for _, dir := range []string{filepath.Join(dist, "npm", "subagents-"+platform), filepath.Join(dist, "npm", "subagents")} {
		p, err := ib.pack(packs, dir)
		if err != nil {
			return "", err
		}
		if out, err := runFor(npmTimeout, ib.npmCall(filepath.Join(ib.root, "publish-cache")), "", "npm", "publish", p.path); err != nil {
			return "", fmt.Errorf("npm publish %s: %v\n%s", p.path, err, out)
		}
		ours = append(ours, p)
	}
	// The peer's tree through the uplink, once: the arguments pi install
	// gives npm (package-manager.js, getNpmInstallArgs), so that the
	// server holds every package and tarball a round asks for.
	warmDir := filepath.Join(ib.root, "peer-warm")
	if err := os.MkdirAll(warmDir, 0o755); err != nil {
		return "", err
	}
	began = time.Now()
	if out, err := runFor(warmTimeout, ib.npmCall(filepath.Join(ib.root, "warm-cache")), warmDir, "npm", "install", peerVersion, "--prefix", warmDir, "--legacy-peer-deps"); err != nil {
		return "", fmt.Errorf("npm install %s through the registry's uplink: %v\n%s", peerVersion, err, out)
	}
	warmTook := time.Since(began)
	peerPack, err := ib.pack(packs, peerVersion)
	if err != nil {
		return "", err
	}
	// Every tarball the server holds: what an install of each side
	// downloads, its dependencies' included.
	peerTree, peerTarballs, err := tarballBytes(filepath.Join(ib.reg.dir, "storage"), func(rel string) bool { return !strings.HasPrefix(rel, "@durable-pi") })
	if err != nil {
		return "", err
	}
	// From here on nothing leaves this machine: the same server, the same
	// storage, no uplink.
	if err := ib.reg.restart(false); err != nil {
		return "", err
	}

	loadBefore := loadAverage()
	sides := []*installSide{
		{key: "ours", name: "this project", source: "npm:@durable-pi/subagents", ours: true, agent: "bench"},
		{key: "peer", name: "npm peer " + peerVersion, source: "npm:" + peerVersion, agent: "peer"},
	}
	// Round 0 warms up (the server's and npm's first start, the page
	// cache) and is not counted; then each side once a round, the one that
	// goes first alternating, so that drift meets both alike.
	for i := range rounds + 1 {
		order := sides
		if i%2 == 1 {
			order = []*installSide{sides[1], sides[0]}
		}
		for _, s := range order {
			if err := ib.round(s, i, i > 0); err != nil {
				return "", fmt.Errorf("%s, round %d: %w", s.name, i, err)
			}
		}
	}

	var r strings.Builder
	r.WriteString("\n" + benchpage.InstallBegin + "\n## Install\n\n")
	fmt.Fprintf(&r, "Measured apart from the rest of this page: `go run ./cmd/bench %s` (%s, same machine; its load average over a minute %s as the rounds began and %s as they ended: others' work shared it).\n\n",
		benchArgs(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadBefore, loadAverage())
	fmt.Fprintf(&r, "How a pi user installs this project (`pi install npm:@durable-pi/subagents`) against the npm peer (`pi install npm:%s`), side by side: %d rounds after a warm-up round, each side once a round, the one that goes first alternating. ", peerVersion, rounds)
	r.WriteString("Every round is a new user: a new `HOME` (pi's config dir `~/.pi/agent` in it, holding only the scripted model's provider, and for the peer its agent file), an empty npm cache, nothing running; ")
	r.WriteString("`PATH` has pi and the Node 22 beside it first and no Go toolchain and no `subagents` command, `SUBAGENTS_BIN` is empty, and the service's address is a free loopback port. ")
	r.WriteString("pi's own network at start is off (`PI_OFFLINE=1`, as everywhere on this page); npm's audit and funding calls are off (`audit=false`, `fund=false` in its user config) for both. ")
	r.WriteString("`TMPDIR` is a folder of the round's: pi loads an extension's TypeScript through jiti, which caches what it transpiled in `TMPDIR/jiti`, keyed by each file's path, so a new install's first start transpiles it all (this project's package loads one small TypeScript entry and its compiled JavaScript; the peer's, its TypeScript sources) and every later start reads the cache.\n\n")
	fmt.Fprintf(&r, "Both are served by one registry server on loopback (verdaccio from `make registry`). This project's two packages are built from this tree for this machine only (`go run ./cmd/dist -platforms %s`, %s with the Go build cache as it was), packed with `npm pack` and published to it: its extension package lists only this platform's binaries package (a release lists all four, whose metadata npm then reads, installing none of the other three). ", platform, secs(distTook))
	fmt.Fprintf(&r, "The peer's tree (%d tarballs) was fetched once from the npm registry through the server's uplink (%s, before anything was timed); the server then restarted with no uplink on the same storage, so every timed install of either side reads only from this machine.\n\n", peerTarballs, secs(warmTook))
	r.WriteString("After its install, a parent pi (`--mode json`, scripted model answering at once, no `-e`: pi loads what it installed) delegates one task through the installed extension, and its run ends with the child's answer in the `subagent` tool's result (checked). ")
	r.WriteString("Ours: the `subagent` tool with the bench profile (read-only tools, `finalize: false`); the extension starts the service itself from the installed platform package's binary (checked: the process that holds the data dir's lock runs it), a first start each round (`subagents stop` with that binary after each). ")
	r.WriteString("The peer: its `subagent` tool with one agent of its own in the user agents folder (the scripted model, `acceptance: none`, as in \"From inside pi\"), `async: false`; its child runs inside the parent's process, with no service.\n\n")

	ourSide, peerSide := sides[0], sides[1]
	cell := func(d []time.Duration) string {
		return fmt.Sprintf("%s (%s–%s)", secs(pct(d, 0.5)), secs(pct(d, 0)), secs(pct(d, 1)))
	}
	ratio := func(a, b []time.Duration) string {
		return fmt.Sprintf("%.2f×", float64(pct(a, 0.5))/float64(pct(b, 0.5)))
	}
	verdict := "within it"
	if pct(ourSide.total, 0.5) > firstResultTarget {
		verdict = "over it"
	}
	fmt.Fprintf(&r, "| p50 (min–max) | %s | %s | ratio ours / peer | target |\n| --- | --- | --- | --- | --- |\n", ourSide.name, peerSide.name)
	fmt.Fprintf(&r, "| `pi install` | %s | %s | %s |  |\n", cell(ourSide.install), cell(peerSide.install), ratio(ourSide.install, peerSide.install))
	fmt.Fprintf(&r, "| then the first delegation: the parent pi's run to its end, the child's answer in it | %s | %s | %s |  |\n", cell(ourSide.parent), cell(peerSide.parent), ratio(ourSide.parent, peerSide.parent))
	fmt.Fprintf(&r, "| of which the parent's tool call to the child's model call (ours: the service's first start) | %s | – |  |  |\n", cell(ourSide.toChild))
	fmt.Fprintf(&r, "| **install to first result** | **%s** | %s | %s | ≤ %s (%s) |\n", cell(ourSide.total), cell(peerSide.total), ratio(ourSide.total, peerSide.total), secs(firstResultTarget), verdict)
	fmt.Fprintf(&r, "| the same user's next delegation: a second parent pi's run (jiti's cache filled; ours: the service running) | %s | %s | %s |  |\n", cell(ourSide.second), cell(peerSide.second), ratio(ourSide.second, peerSide.second))
	fmt.Fprintf(&r, "| modules pi transpiled at its first start (files in jiti's cache after it) | %d | %d |  |  |\n", ourSide.jitiFiles, peerSide.jitiFiles)
	fmt.Fprintf(&r, "| packages npm installed | %d | %d |  |  |\n", ourSide.packages, peerSide.packages)
	fmt.Fprintf(&r, "| what they hold on disk (the files' bytes under the pi config dir's `npm/node_modules`) | %s | %s |  |  |\n\n", mb(ourSide.diskBytes), mb(peerSide.diskBytes))

	r.WriteString("What npm downloads (the tarballs `npm pack` writes; MB = 10⁶ bytes, as npm counts):\n\n")
	r.WriteString("| package | packed (.tgz) | unpacked | files | budget |\n| --- | --- | --- | --- | --- |\n")
	var ourTotal int64
	for _, p := range ours {
		budget := ""
		if strings.Contains(p.Name, "subagents-") {
			budget = fmt.Sprintf("≤ %s packed per platform package: ", mb(platformBudget))
			if p.Size <= platformBudget {
				budget += "within it"
			} else {
				budget += "over it"
			}
		}
		ourTotal += p.Size
		fmt.Fprintf(&r, "| `%s@%s` | %s | %s | %d | %s |\n", p.Name, p.Version, mb(p.Size), mb(p.UnpackedSize), p.EntryCount, budget)
	}
	fmt.Fprintf(&r, "| this project, both | %s |  |  |  |\n", mb(ourTotal))
	fmt.Fprintf(&r, "| `%s@%s` (the peer's own package) | %s | %s | %d |  |\n", peerPack.Name, peerPack.Version, mb(peerPack.Size), mb(peerPack.UnpackedSize), peerPack.EntryCount)
	fmt.Fprintf(&r, "| the peer with its dependencies (the %d tarballs of its tree) | %s |  |  |  |\n", peerTarballs, mb(peerTree))

	fmt.Fprintf(&r, "\nEach round, install to first result in seconds: ours %s; the peer %s.\n", roundList(ourSide.total), roundList(peerSide.total))
	r.WriteString(benchpage.InstallEnd + "\n")
	return r.String(), nil
}

// round is one new user installing side s and delegating twice: the first
// result, then the same user's next pi; its figures count when measured.
func (ib *installBench) round(s *installSide, i int, measured bool) error {
	b := ib.b
	dir := filepath.Join(ib.root, fmt.Sprintf("%s-%d", s.key, i))
	home := filepath.Join(dir, "home")
	agentDir := filepath.Join(home, ".pi", "agent")
	dataDir := filepath.Join(home, ".pi", "subagents")
	// What the round installed goes with it: a few hundred MB each.
	defer func() { _ = os.RemoveAll(dir) }()
	if err := b.model.WritePiAgentDir(agentDir); err != nil {
		return err
	}
	if !s.ours {
		if err := writePeerAgent(agentDir); err != nil {
			return err
		}
	}
	// The round's own temporary folder: pi loads a TypeScript extension
	// through jiti, whose transpile cache is TMPDIR/jiti, keyed by each
	// file's path; in the round's folder it starts empty, as on a new
	// machine, and goes with the round instead of piling up in /tmp.
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	env := append(ib.userEnv(home, filepath.Join(dir, "npm-cache"), freePort()), "TMPDIR="+tmp)

	began := time.Now()
	if out, err := runFor(npmTimeout, env, b.workDir, b.pi.Path, "install", s.source); err != nil {
		return fmt.Errorf("pi install %s: %v\n%s", s.source, err, out)
	}
	installed := time.Since(began)
	bin := filepath.Join(agentDir, "npm", "node_modules", "@durable-pi", "subagents-"+npmOS()+"-"+npmCPU(), "bin", "subagents")
	if s.ours {
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("pi install put no platform binary where the extension looks: %w", err)
		}
		// A new user: no service ran in this data dir, so the delegation
		// starts it.
		if _, err := os.Stat(filepath.Join(dataDir, "dev.lock")); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("a service ran in %s before the first delegation (%v)", dataDir, err)
		}
		// The service the parent starts outlives it: stopped here however
		// the round ends, so that the next round's is a first start too
		// and none runs on after the bench.
		defer func() { _, _ = runFor(stopTimeout, env, "", bin, "stop", "--data-dir", dataDir) }()
	}
	first, toChild, err := ib.delegate(s, env, dir, fmt.Sprintf("%d-first", i))
	if err != nil {
		return fmt.Errorf("the first delegation: %w", err)
	}
	total := time.Since(began)
	_, jitiFiles, _ := treeBytes(filepath.Join(tmp, "jiti"), nil)
	if s.ours {
		// The service runs the installed platform package's binary, not
		// one of this tree's.
		lock, _ := os.ReadFile(filepath.Join(dataDir, "dev.lock"))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(lock)))
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if pid <= 0 || err != nil || !strings.HasPrefix(exe, filepath.Dir(bin)) {
			return fmt.Errorf("the service (lock %q) runs %q (%v), want the installed %s", lock, exe, err, bin)
		}
	}
	second, _, err := ib.delegate(s, env, dir, fmt.Sprintf("%d-second", i))
	if err != nil {
		return fmt.Errorf("the second delegation: %w", err)
	}
	if !measured {
		return nil
	}
	s.install = append(s.install, installed)
	s.parent = append(s.parent, first)
	s.total = append(s.total, total)
	s.second = append(s.second, second)
	if s.ours {
		s.toChild = append(s.toChild, toChild)
	}
	npmDir := filepath.Join(agentDir, "npm")
	if s.packages, err = installedPackages(npmDir); err != nil {
		return err
	}
	if s.diskBytes, _, err = treeBytes(filepath.Join(npmDir, "node_modules"), nil); err != nil {
		return err
	}
	s.jitiFiles = jitiFiles
	return nil
}

// delegate runs a parent pi in the user's environment env whose model
// calls side s's `subagent` tool once, and checks that the child's answer
// came back in the tool's result. It returns the parent's wall time and,
// from the model calls, its tool call's to the child's first model call.
func (ib *installBench) delegate(s *installSide, env []string, dir, name string) (time.Duration, time.Duration, error) {
	b := ib.b
	child := "install-" + s.key + "-child-" + name
	parent := "install-" + s.key + "-parent-" + name
	answer := "answered through the installed " + s.key + ", " + name
	b.model.Script(child, textStep(answer))
	call := map[string]any{"agent": s.agent, "task": "[[script:" + child + "]] Say it."}
	if !s.ours {
		// The parent waits for its child, as ours does.
		call["async"] = false
	}
	b.model.Script(parent, toolStep("subagent", call), textStep("done"))
	started := time.Now()
	out, err := runFor(parentTimeout, env, b.workDir, b.pi.Path, "--mode", "json", "--session", filepath.Join(dir, "parent-"+uuid.NewString()+".jsonl"),
		"--model", scriptedmodel.ModelRef, "[[script:"+parent+"]] Delegate.")
	took := time.Since(started)
	if err != nil || !strings.Contains(out, `"agent_settled"`) {
		return 0, 0, fmt.Errorf("the parent pi: %v\n%s", err, tail(out, 3000))
	}
	result, err := toolResult(out, "subagent")
	if err != nil {
		return 0, 0, fmt.Errorf("the parent pi: %w\n%s", err, tail(out, 3000))
	}
	if !strings.Contains(result, answer) {
		return 0, 0, fmt.Errorf("the subagent tool's result holds no child answer: %.1500s", result)
	}
	pr, cr := b.model.RequestsFor(parent), b.model.RequestsFor(child)
	if len(pr) != 2 || len(cr) != 1 {
		return 0, 0, fmt.Errorf("the parent made %d model calls, its child %d; want 2 and 1", len(pr), len(cr))
	}
	return took, cr[0].Time.Sub(pr[0].Time), nil
}

// userEnv is a new pi user's environment: this machine's, less whatever
// points pi, npm, the extension or the service elsewhere, with HOME, the
// pi config dir under it (the scripted model's provider), the user's PATH,
// npm pointed at the registry with the cache given, and the service's
// address on a free port.
func (ib *installBench) userEnv(home, cache string, port int) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "PATH" || k == "TMPDIR" || strings.HasPrefix(k, "SUBAGENTS_") || strings.HasPrefix(k, "TEMPORAL_") ||
			strings.HasPrefix(k, "PI_") || strings.HasPrefix(strings.ToLower(k), "npm_config_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, scriptedmodel.PiEnv(filepath.Join(home, ".pi", "agent"))...)
	return append(append(env, "HOME="+home, "PATH="+ib.path,
		// Empty: the extension finds the binary as a user's does.
		"SUBAGENTS_BIN=",
		fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", port)), ib.npmEnv(cache)...)
}

// npmEnv points npm at the registry, with the cache given.
func (ib *installBench) npmEnv(cache string) []string {
	return []string{"npm_config_userconfig=" + ib.reg.npmrc, "npm_config_registry=" + ib.reg.url, "npm_config_cache=" + cache}
}

// npmCall is this process's environment for the bench's own npm commands
// (pack, publish, the peer's fetch): npm pointed at the registry, run by
// the Node 22 beside pi.
func (ib *installBench) npmCall(cache string) []string {
	return append(append(os.Environ(), "PATH="+ib.path), ib.npmEnv(cache)...)
}

// pack runs `npm pack` of spec (a folder, or a package the registry
// serves) into dir and returns what it wrote.
func (ib *installBench) pack(dir, spec string) (packed, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return packed{}, err
	}
	cmd, cancel := command(npmTimeout, "npm", "pack", spec, "--json", "--pack-destination", dir)
	defer cancel()
	cmd.Env = ib.npmCall(filepath.Join(ib.root, "pack-cache"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return packed{}, fmt.Errorf("npm pack %s: %v\n%s", spec, err, stderr.String())
	}
	var ps []packed
	if err := json.Unmarshal(out, &ps); err != nil || len(ps) != 1 {
		return packed{}, fmt.Errorf("npm pack %s said %.500s (%v)", spec, out, err)
	}
	p := ps[0]
	p.path = filepath.Join(dir, p.Filename)
	// The tarball's own size, as it lies on disk.
	info, err := os.Stat(p.path)
	if err != nil {
		return packed{}, err
	}
	p.Size = info.Size()
	return p, nil
}

// startRegistry starts verdaccio on a free loopback port, with an uplink
// to the npm registry for every package but this project's.
func (ib *installBench) startRegistry() (*registry, error) {
	bin := mustAbs(filepath.Join("e2e", "registry", "node_modules", ".bin", "verdaccio"))
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no verdaccio (%v): `make registry` installs it", err)
	}
	r := &registry{dir: filepath.Join(ib.root, "registry"), port: freePort(), node: filepath.Join(ib.b.pi.PathPrefix, "node"), bin: bin}
	r.url = fmt.Sprintf("http://127.0.0.1:%d/", r.port)
	r.npmrc = filepath.Join(r.dir, "npmrc")
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	// A token to publish with; nothing else of a user's config.
	npmrc := fmt.Sprintf("registry=%s\n//127.0.0.1:%d/:_authToken=bench-publisher\naudit=false\nfund=false\nupdate-notifier=false\n", r.url, r.port)
	if err := os.WriteFile(r.npmrc, []byte(npmrc), 0o600); err != nil {
		return nil, err
	}
	return r, r.start(true)
}

// start runs verdaccio with uplink or without, and waits for its ping.
func (r *registry) start(uplink bool) error {
	uplinks, proxy := "uplinks: {}\n", ""
	if uplink {
		// Only while the peer's tree is fetched; its timeout is the
		// registry's answer to one request.
		uplinks = "uplinks:\n  npmjs:\n    url: https://registry.npmjs.org/\n    timeout: 60s\n"
		proxy = "    proxy: npmjs\n"
	}
	config := fmt.Sprintf(`storage: %s
auth:
  htpasswd:
    file: %s
    max_users: -1
%spackages:
  '@durable-pi/*':
    access: $all
    publish: $anonymous
  '**':
    access: $all
    publish: $anonymous
%slisten: 127.0.0.1:%d
# A platform package is about 56 MB packed (base64 in the publish request):
# past verdaccio's default of 10 MB.
max_body_size: 200mb
log: { type: stdout, format: pretty, level: warn }
`, filepath.Join(r.dir, "storage"), filepath.Join(r.dir, "htpasswd"), uplinks, proxy, r.port)
	path := filepath.Join(r.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return err
	}
	r.cmd = exec.Command(r.node, r.bin, "--config", path)
	r.out, r.finished = &syncbuf.Buffer{}, make(chan struct{})
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		return err
	}
	go func(cmd *exec.Cmd, finished chan struct{}) { _ = cmd.Wait(); close(finished) }(r.cmd, r.finished)
	for deadline := time.Now().Add(registryStartTimeout); ; {
		resp, err := http.Get(r.url + "-/ping")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.finished:
			return fmt.Errorf("verdaccio exited: %s", r.out)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.stop()
			return fmt.Errorf("verdaccio did not answer on %s within %s: %v\n%s", r.url, registryStartTimeout, err, r.out)
		}
	}
}

// restart stops the server and starts it again on the same port and
// storage, with uplink or without.
func (r *registry) restart(uplink bool) error {
	r.stop()
	return r.start(uplink)
}

// stop ends the server this bench started.
func (r *registry) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.finished:
	// verdaccio stops at once on SIGTERM; one that does not within 10 s
	// is killed.
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.finished
	}
	r.cmd = nil
}

// command is a process in a process group of its own, killed with its
// whole group when timeout passes: npm and pi start processes of their
// own, which a hang leaves behind otherwise.
func command(timeout time.Duration, name string, args ...string) (*exec.Cmd, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	return cmd, cancel
}

// runFor runs name with args in dir (the bench's folder: "") with the
// environment env (nil: this process's), within timeout, and returns its
// combined output.
func runFor(timeout time.Duration, env []string, dir, name string, args ...string) (string, error) {
	cmd, cancel := command(timeout, name, args...)
	defer cancel()
	cmd.Env = env
	cmd.Dir = dir
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	return out.String(), err
}

// userPath is this machine's PATH as a pi user's: prefix (pi and its Node
// 22) first, then every folder that holds neither a Go toolchain nor a
// subagents command.
func userPath(prefix string) (string, error) {
	dirs := []string{prefix}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d == "" || d == prefix || executable(filepath.Join(d, "go")) || executable(filepath.Join(d, "subagents")) {
			continue
		}
		dirs = append(dirs, d)
	}
	for _, name := range []string{"go", "subagents"} {
		if executable(filepath.Join(prefix, name)) {
			return "", fmt.Errorf("%s is beside pi in %s: a pi user's PATH would have it", name, prefix)
		}
	}
	return strings.Join(dirs, string(os.PathListSeparator)), nil
}

func executable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// installedPackages counts the packages an npm install in prefix put
// into its node_modules: those its lockfile lists that are there (the
// lockfile also lists every optional package of other platforms, e.g.
// esbuild's, which npm does not install).
func installedPackages(prefix string) (int, error) {
	lockfile := filepath.Join(prefix, "package-lock.json")
	b, err := os.ReadFile(lockfile)
	if err != nil {
		return 0, err
	}
	var lock struct {
		Packages map[string]json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return 0, fmt.Errorf("%s: %w", lockfile, err)
	}
	n := 0
	for k := range lock.Packages {
		if _, err := os.Stat(filepath.Join(prefix, k, "package.json")); err == nil && strings.Contains(k, "node_modules/") {
			n++
		}
	}
	return n, nil
}

// treeBytes sums the sizes of the regular files under dir that keep (given
// the path relative to dir; nil: all) accepts, and counts them.
func treeBytes(dir string, keep func(rel string) bool) (int64, int, error) {
	var sum int64
	var n int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if rel, _ := filepath.Rel(dir, path); keep != nil && !keep(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum += info.Size()
		n++
		return nil
	})
	return sum, n, err
}

// tarballBytes sums the tarballs under a registry's storage that keep
// accepts, and counts them.
func tarballBytes(storage string, keep func(rel string) bool) (int64, int, error) {
	return treeBytes(storage, func(rel string) bool { return strings.HasSuffix(rel, ".tgz") && keep(rel) })
}

// npmOS and npmCPU are this machine as npm names it (process.platform,
// process.arch), as the platform packages are named.
func npmOS() string { return runtime.GOOS }

func npmCPU() string {
	if runtime.GOARCH == "amd64" {
		return "x64"
	}
	return runtime.GOARCH
}

// loadAverage is the machine's load average over the last minute, as
// /proc/loadavg gives it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(string(b), " ")
	return first
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// mb is n bytes in MB (10⁶ bytes, as npm reports sizes), kB below one.
func mb(n int64) string {
	if n < 1_000_000 {
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

func roundList(d []time.Duration) string {
	var s []string
	for _, x := range d {
		s = append(s, fmt.Sprintf("%.1f", x.Seconds()))
	}
	return strings.Join(s, ", ")
}
