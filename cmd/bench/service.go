package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// services are the pids of the local services the bench runs: memory
// figures of a run leave them out (they are reported apart).
var services = &pidSet{m: map[int]bool{}}

type pidSet struct {
	mu sync.Mutex
	m  map[int]bool
}

func (s *pidSet) add(pid int) { s.mu.Lock(); s.m[pid] = true; s.mu.Unlock() }
func (s *pidSet) has(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[pid]
}

// service is a `subagents dev` process, as the extension starts one.
type service struct {
	cmd              *exec.Cmd
	address, dataDir string
	out              *syncbuf.Buffer
	stopOnce         sync.Once
	finished         chan struct{}
}

// serviceEnv is what a user's shell gives the service and the parents: the
// scripted model as pi's provider, pi and Node 22 first on PATH.
func (b *bench) serviceEnv() []string {
	return append(os.Environ(), append(scriptedmodel.PiEnv(b.agentDir), "PATH="+b.pi.PathPrefix+":"+os.Getenv("PATH"))...)
}

// startService starts `subagents dev` on a data dir of its own, with the
// flags the extension's auto-start uses, and waits for its socket.
func (b *bench) startService(name string, extra ...string) (*service, error) {
	dir := filepath.Join(b.root, "svc-"+name)
	s := &service{address: fmt.Sprintf("127.0.0.1:%d", freePort()), dataDir: dir, out: &syncbuf.Buffer{}, finished: make(chan struct{})}
	host, port, _ := net.SplitHostPort(s.address)
	s.cmd = exec.Command(b.bin, append([]string{"dev", "--data-dir", dir, "--ip", host, "--port", port, "--log-level", "error"}, extra...)...)
	s.cmd.Env = b.serviceEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	services.add(s.cmd.Process.Pid)
	go func() { _ = s.cmd.Wait(); close(s.finished) }()
	if err := waitSocket(filepath.Join(dir, "subagents.sock"), time.Minute, s.finished); err != nil {
		s.stop()
		return nil, fmt.Errorf("subagents dev: %w\n%s", err, s.out)
	}
	return s, nil
}

// quiet waits until the service's processes (its children, warm or
// running) used no CPU for 200 ms: the warm pool's refill after a run is
// over, and does not compete with the next run measured.
func (s *service) quiet() {
	last, still := int64(-1), 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ticks := readProcs().cpuBelow(s.cmd.Process.Pid)
		if ticks == last {
			// 300 ms: longer than the pool waits before a refill.
			if still++; still >= 6 {
				return
			}
		} else {
			still = 0
		}
		last = ticks
	}
}

// stop ends the service with SIGTERM, as a user's kill does.
func (s *service) stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.finished:
		case <-time.After(time.Minute):
			_ = s.cmd.Process.Kill()
			<-s.finished
		}
	})
}

func waitSocket(path string, limit time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", path); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before its socket answered")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("no answer on %s within %s", path, limit)
}

// parentPi runs a parent pi with the extension ext (none: "") against the
// local service of svc and returns its wall time, the peak memory of the
// run's processes (the service left out) and the peak of what the parent
// started itself.
func (b *bench) parentPi(svc *service, ext, prompt string) (time.Duration, int64, int64, error) {
	return b.parentPiAt(svc.address, svc.dataDir, ext, prompt, nil)
}

func (b *bench) parentPiAt(address, dataDir, ext, prompt string, started func()) (time.Duration, int64, int64, error) {
	return b.parentPiChecked(address, dataDir, ext, prompt, started, nil)
}

// parentPiChecked is parentPiAt whose run also fails when check, given the
// parent's stdout (pi's JSON events), says what went wrong.
func (b *bench) parentPiChecked(address, dataDir, ext, prompt string, started func(), check func(stdout string) error) (time.Duration, int64, int64, error) {
	session := filepath.Join(b.dataDir, "parents", uuid.NewString()+".jsonl")
	args := []string{"--mode", "json", "--session", session, "--model", scriptedmodel.ModelRef}
	if ext != "" {
		args = append(args, "-e", ext)
	}
	cmd := exec.Command(b.pi.Path, append(args, prompt)...)
	cmd.Dir = b.workDir
	cmd.Env = append(b.serviceEnv(), "SUBAGENTS_BIN="+b.bin, "TEMPORAL_ADDRESS="+address, "SUBAGENTS_DATA_DIR="+dataDir)
	out, errOut := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	var pid atomic.Int64
	d, peak, own, err := sampledTree(func() int { return int(pid.Load()) }, func() error {
		if err := cmd.Start(); err != nil {
			return err
		}
		pid.Store(int64(cmd.Process.Pid))
		if started != nil {
			started()
		}
		err := cmd.Wait()
		if err != nil || !strings.Contains(out.String(), `"agent_settled"`) || !strings.Contains(out.String(), `"done"`) {
			// The end of each says what went wrong: pi's last events, its
			// stderr.
			return fmt.Errorf("parent pi (%s): %v\nstdout (end): %s\nstderr (end): %s", strings.Join(args, " "), err, tail(out.String(), 3000), tail(errOut.String(), 3000))
		}
		if check != nil {
			if err := check(out.String()); err != nil {
				return fmt.Errorf("parent pi (%s): %w\nstderr (end): %s", strings.Join(args, " "), err, tail(errOut.String(), 3000))
			}
		}
		return nil
	})
	return d, peak, own, err
}

// localService measures what [local service] promised a pi user: the
// first delegation with nothing running starts the service (how long until
// the child's first model call), and the command's client verbs start
// light (a `status` as a process of its own, against the full build).
func (b *bench) localService(n int) (string, error) {
	ext := mustAbs("extension")
	var r strings.Builder
	r.WriteString("\n## The local service\n\n")

	// Cold auto-start: a new data dir and address each time, nothing runs.
	var sinceCall, sinceStart []time.Duration
	for i := range max(n/2, 3) {
		child, parent := fmt.Sprintf("cold-child-%d", i), fmt.Sprintf("cold-parent-%d", i)
		b.model.Script(child, scriptedmodel.Step{Text: "done"})
		b.model.Script(parent,
			toolStep("subagent", map[string]any{"agent": "bench", "task": "[[script:" + child + "]] Say done."}),
			textStep("done"))
		dir := filepath.Join(b.root, fmt.Sprintf("cold-%d", i))
		address := fmt.Sprintf("127.0.0.1:%d", freePort())
		var t0 time.Time
		_, _, _, err := b.parentPiAt(address, dir, ext, "[["+"script:"+parent+"]] Delegate.", func() { t0 = time.Now() })
		if err != nil {
			// The service the parent started outlives it: stop it here, or
			// it runs on after the bench.
			_ = b.stopByLock(dir)
			return "", err
		}
		pr, cr := b.model.RequestsFor(parent), b.model.RequestsFor(child)
		if len(pr) == 0 || len(cr) == 0 {
			return "", fmt.Errorf("cold start %d: parent %d requests, child %d", i, len(pr), len(cr))
		}
		sinceCall = append(sinceCall, cr[0].Time.Sub(pr[0].Time))
		sinceStart = append(sinceStart, cr[0].Time.Sub(t0))
		if err := b.stopByLock(dir); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(&r, "**Cold auto-start**, %d times, each with a new data dir and address and nothing running: a parent pi's first `subagent` call starts `subagents dev` itself. ", len(sinceCall))
	fmt.Fprintf(&r, "From the parent's model call that asked for the tool to the child's first model call: p50 %s, max %s (target ≤ 2 s); from the parent's start: p50 %s.\n\n",
		ms(pct(sinceCall, 0.5)), ms(pct(sinceCall, 1)), ms(pct(sinceStart, 0.5)))

	// A client verb as a process: the light build against the full one.
	svc, err := b.startService("verbs")
	if err != nil {
		return "", err
	}
	defer svc.stop()
	full := filepath.Join(filepath.Dir(b.bin), "subagents-dev")
	var light, heavy []time.Duration
	var lightRSS, heavyRSS int64
	for range n {
		for _, k := range []struct {
			bin string
			d   *[]time.Duration
			rss *int64
		}{{b.bin, &light, &lightRSS}, {full, &heavy, &heavyRSS}} {
			// GNU time reports the command's own peak: the kernel's
			// ru_maxrss of a process this bench forked would start from
			// the bench's own resident set, which exec keeps.
			cmd := exec.Command("/usr/bin/time", "-f", "maxrss=%M", k.bin, "status", "--json", "--address", svc.address, "--", "no-such-task")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			_ = cmd.Run()
			*k.d = append(*k.d, time.Since(start))
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				return "", fmt.Errorf("%s status: exit %d, want 2 (not found)\n%s", k.bin, code, stderr.String())
			}
			_, kb, _ := strings.Cut(stderr.String(), "maxrss=")
			n, err := strconv.ParseInt(strings.TrimSpace(kb), 10, 64)
			if err != nil {
				return "", fmt.Errorf("/usr/bin/time said %q", stderr.String())
			}
			*k.rss = max(*k.rss, n<<10)
		}
	}
	fmt.Fprintf(&r, "**`subagents status` as a process** (a task that does not exist, against the running service), %d times each, in turn; peak memory by GNU time:\n\n", n)
	r.WriteString("| build | p50 start to exit | peak RSS |\n| --- | --- | --- |\n")
	fmt.Fprintf(&r, "| `bin/subagents` (client verbs, serve, worker) | %s | %d MiB |\n", ms(pct(light, 0.5)), lightRSS>>20)
	fmt.Fprintf(&r, "| `bin/subagents-dev` (with the embedded server and UI; every verb ran so before) | %s | %d MiB |\n", ms(pct(heavy, 0.5)), heavyRSS>>20)
	return r.String(), nil
}

// stopByLock ends the service of data dir dir as a user does, with
// `subagents stop`: it signals the process that holds dir's lock and waits
// for it to exit.
func (b *bench) stopByLock(dir string) error {
	out, err := exec.Command(b.bin, "stop", "--data-dir", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("subagents stop --data-dir %s: %v\n%s", dir, err, out)
	}
	return nil
}

// peerVersion is the npm peer the bench runs beside this project: the best
// non-durable subagent extension for pi, whose children run inside the
// parent's process.
const peerVersion = "pi-subagents@0.67.0"

// peer is the npm peer installed in a scratch dir, with a pi config dir of
// its own holding its agent (an agent file of its format, which this
// project's profiles do not read).
type peer struct {
	ext, agentDir string
}

// installPeer installs the peer with npm into the bench's scratch dir,
// once a bench run: the pi and plans sections share it.
func (b *bench) installPeer() (*peer, error) {
	b.peerOnce.Do(func() { b.peer, b.peerErr = b.npmInstallPeer() })
	return b.peer, b.peerErr
}

func (b *bench) npmInstallPeer() (*peer, error) {
	dir := filepath.Join(b.root, "peer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", dir, peerVersion)
	cmd.Env = b.serviceEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm install %s: %v\n%s", peerVersion, err, out)
	}
	p := &peer{ext: filepath.Join(dir, "node_modules", "pi-subagents"), agentDir: filepath.Join(b.root, "peer-agent")}
	if err := b.model.WritePiAgentDir(p.agentDir); err != nil {
		return nil, err
	}
	return p, writePeerAgent(p.agentDir)
}

// writePeerAgent writes the peer's one agent, `peer`, into the pi config
// dir agentDir (its user agents folder), answering like the bench profile;
// acceptance "none" because the peer otherwise asks its child for evidence
// of the work.
func writePeerAgent(agentDir string) error {
	agent := "---\nname: peer\ndescription: The bench's agent\nmodel: " + scriptedmodel.ModelRef +
		"\nacceptance: {\"level\":\"none\",\"reason\":\"bench\"}\n---\nAnswer briefly.\n"
	if err := os.MkdirAll(filepath.Join(agentDir, "agents"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(agentDir, "agents", "peer.md"), []byte(agent), 0o644)
}

// run is a parent pi with the peer loaded, its model asking for prompt.
func (p *peer) run(b *bench, prompt string) (time.Duration, int64, error) {
	return p.runChecked(b, prompt, nil)
}

// runChecked is run whose run also fails when check, given the parent's
// output (pi's JSON events, then its stderr), says what went wrong.
func (p *peer) runChecked(b *bench, prompt string, check func(out string) error) (time.Duration, int64, error) {
	session := filepath.Join(b.dataDir, "peer-parents", uuid.NewString()+".jsonl")
	cmd := exec.Command(b.pi.Path, "--mode", "json", "--session", session, "--model", scriptedmodel.ModelRef, "-e", p.ext, prompt)
	cmd.Dir = b.workDir
	cmd.Env = append(b.serviceEnv(), "PI_CODING_AGENT_DIR="+p.agentDir)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	return sampled(func() error {
		err := cmd.Run()
		if err != nil || !strings.Contains(out.String(), `"agent_settled"`) || strings.Count(out.String(), `done`) < 2 {
			return fmt.Errorf("peer parent pi: %v\n%.3000s", err, out)
		}
		if check != nil {
			if err := check(out.String()); err != nil {
				return fmt.Errorf("peer parent pi: %w", err)
			}
		}
		return nil
	})
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
