package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
)

// overhead runs one task three ways in turn, n times each, after two
// warm-up runs: pi alone, through the client library, and `subagents run`.
func (b *bench) overhead(n int) (string, error) {
	// `subagents run` as a user runs it: against the local service, which
	// takes the call on its socket. Headless: the runs' envelopes then name
	// no UI link, which tells that the call went through the socket.
	cold, err := b.startService("run-cold", "--headless", "--warm-pool", "0")
	if err != nil {
		return "", err
	}
	defer cold.stop()
	warm, err := b.startService("run-warm", "--headless")
	if err != nil {
		return "", err
	}
	defer warm.stop()
	// Warm up: the first pi start fills the OS page cache, the first
	// workflow the worker's caches.
	for range 2 {
		for _, svc := range []*service{cold, warm} {
			svc.quiet()
			if _, err := b.commandOn(svc); err != nil {
				return "", err
			}
		}
		if _, err := b.direct(); err != nil {
			return "", err
		}
		if _, _, err := b.library(); err != nil {
			return "", err
		}
		if _, _, err := b.libraryOn(b.early); err != nil {
			return "", err
		}
	}
	var direct, lib, cli, earlyLib, earlyCLI, warmLib, warmCLI, svcDial, svcCold, svcWarm []time.Duration
	var sessionEvents []int
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
		c, err := b.command("bench")
		if err != nil {
			return "", err
		}
		cli = append(cli, c)
		el, _, err := b.libraryOn(b.early)
		if err != nil {
			return "", err
		}
		earlyLib = append(earlyLib, el)
		ec, err := b.command("bench-early")
		if err != nil {
			return "", err
		}
		earlyCLI = append(earlyCLI, ec)
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
		cold.quiet()
		sd, err := b.commandOn(cold, "SUBAGENTS_SOCKET=0")
		if err != nil {
			return "", err
		}
		svcDial = append(svcDial, sd)
		cold.quiet()
		sc, err := b.commandOn(cold)
		if err != nil {
			return "", err
		}
		svcCold = append(svcCold, sc)
		warm.quiet()
		sw, err := b.commandOn(warm)
		if err != nil {
			return "", err
		}
		svcWarm = append(svcWarm, sw)
	}
	report := b.report(n, [][]time.Duration{direct, lib, cli, earlyLib, earlyCLI, warmLib, warmCLI, svcDial, svcCold, svcWarm}, sessionEvents)
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
// the bench's one key (keyUse.keep for a peak of one), and a moment more
// for their start to be over.
func (b *bench) settle() {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b.warmPool().Warm >= 2 {
			break
		}
	}
}

// direct is the floor: the same pi invocation, without Temporal.
func (b *bench) direct() (time.Duration, error) { return b.directRun(false) }

// directRun is direct, or with final the floor's child of the finalize
// workload: the finalize extension loaded and its tool allowed, as the
// worker starts a child, answering with a subagent_finalize call.
func (b *bench) directRun(final bool) (time.Duration, error) {
	session := filepath.Join(b.dataDir, "direct", uuid.NewString()+".jsonl")
	if err := os.MkdirAll(filepath.Dir(session), 0o755); err != nil {
		return 0, err
	}
	args := []string{"--mode", "json", "--session", session, "--model", scriptedmodel.ModelRef, "--no-extensions",
		"--tools", strings.Join(profiles.ReadOnlyTools, ","), "[[script:bench]] Say done."}
	if final {
		args = []string{"--mode", "json", "--session", session, "--model", scriptedmodel.ModelRef, "--no-extensions",
			"--extension", b.finalizeExt, "--tools", strings.Join(profiles.ReadOnlyTools, ",") + "," + api.FinalizeToolName, "[[script:bench-final]] Say done."}
	}
	// A run that does not end (a model that is never told it is done)
	// fails the bench instead of holding it: none takes a second here.
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.pi.Path, args...)
	cmd.Dir = b.workDir
	cmd.Env = append(os.Environ(), append(scriptedmodel.PiEnv(b.agentDir), "PATH="+b.pi.PathPrefix+":"+os.Getenv("PATH"))...)
	if final {
		// The finalize extension serves a child run only, as the worker
		// marks one (activities' childEnv).
		cmd.Env = append(cmd.Env, "PI_SUBAGENT_CHILD=1", "PI_SUBAGENT_DEPTH=1")
	}
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
	d, _, err := b.runCommand(nil, "--address", b.address, "--task-queue", queue)
	return d, err
}

// commandOn is `subagents run` as a user runs it beside the local service
// svc: the command hands its call to the service's socket, or with
// SUBAGENTS_SOCKET=0 in env dials the service's frontend itself.
func (b *bench) commandOn(svc *service, env ...string) (time.Duration, error) {
	d, out, err := b.runCommand(append([]string{"SUBAGENTS_DATA_DIR=" + svc.dataDir}, env...), "--address", svc.address)
	if err != nil {
		return 0, err
	}
	dials := slices.Contains(env, "SUBAGENTS_SOCKET=0")
	if dialed := strings.Contains(out, `"ui_url"`); dialed != dials {
		// The headless service names no UI: a call that names one dialed
		// Temporal itself.
		return 0, fmt.Errorf("subagents run dialed Temporal: %v, want %v:\n%.2000s", dialed, dials, out)
	}
	return d, nil
}

// runCommand times the bench task through `subagents run --json` with
// connection flags, in this process's environment plus env; the output
// must be the task's answer.
func (b *bench) runCommand(env []string, connection ...string) (time.Duration, string, error) {
	args := append(append([]string{"run", "--json"}, connection...), "--agent", "bench", "[[script:bench]] Say done.")
	cmd := exec.Command(b.bin, args...)
	cmd.Dir = b.workDir
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil || !strings.Contains(string(out), `"output": "done"`) {
		return 0, string(out), fmt.Errorf("subagents %s: %v\n%.2000s", strings.Join(args, " "), err, out)
	}
	return d, string(out), nil
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

// report writes the overhead table; runs are in the order of its rows.
func (b *bench) report(n int, runs [][]time.Duration, sessionEvents []int) string {
	var r strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&r, "# Benchmarks\n\nMachine: %s, %d cores, %s/%s, %s; pi %s with Node from the lockfile.\n",
		host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), b.pi.Version)
	fmt.Fprintf(&r, "Date: %s. Command: `make bench` (`go run ./cmd/bench -n %d`).\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), n)
	r.WriteString("## Overhead per task\n\n")
	r.WriteString("One task whose child answers at once (scripted model, `finalize: false`), run three ways in turn, ")
	fmt.Fprintf(&r, "%d times each, after two warm-up runs: pi alone (`pi --mode json --session ...`), ", n)
	r.WriteString("the same task through the client library against the embedded server (start + wait), and `subagents run --json` as a process.\n\n")
	r.WriteString("The pool off, each cold child starts once the task's run reaches the worker (no early start, as `subagents worker` runs by default), " +
		"or as the worker resolves the task's delegation, beside the start of its session (early start, as `subagents dev --warm-pool 0` runs): " +
		"it then starts in RPC mode and the run takes it when it comes.\n\n")
	r.WriteString("Then the same two through a worker with a warm pool (`--warm-pool 4`, as `subagents dev` runs): its child was started in RPC mode before the task came, and is pointed at the task's session file.\n\n")
	r.WriteString("Those workers run in the bench's process, beside the embedded server, and `subagents run` dials it. The last three rows are `subagents run` as a user runs it: " +
		"beside a `subagents dev` service (`--warm-pool 0`, which starts children early, and the default pool of 4), whose socket takes the command's call " +
		"(docs/command.md): the service's client starts the workflow eagerly on its own worker; the first of them dials the same service's frontend instead " +
		"(`SUBAGENTS_SOCKET=0`), as the command did before. The targets are theirs.\n\n")
	r.WriteString("| run | p50 | p99 | added p50 | ratio p50 | target |\n| --- | --- | --- | --- | --- | --- |\n")
	rows := []struct{ name, target string }{{"pi alone", ""},
		{"client library, pool off, no early start", ""}, {"`subagents run`, pool off, no early start", ""},
		{"client library, pool off, early start", ""}, {"`subagents run`, pool off, early start", ""},
		{"client library, warm pool", ""}, {"`subagents run`, warm pool", ""},
		{"`subagents run` beside `subagents dev --warm-pool 0`, `SUBAGENTS_SOCKET=0` (dials its frontend; early start)", ""},
		{"`subagents run` beside `subagents dev --warm-pool 0` (its socket; early start)", "≤ 1.05×"},
		{"`subagents run` beside `subagents dev` (its socket; warm pool)", "≤ 0.5×"}}
	d50 := pct(runs[0], 0.5)
	for i, row := range rows {
		d := runs[i]
		p50 := pct(d, 0.5)
		fmt.Fprintf(&r, "| %s | %s | %s | %s | %.2f× | %s |\n", row.name, ms(p50), ms(pct(d, 0.99)), ms(p50-d50), float64(p50)/float64(d50), row.target)
	}
	r.WriteString("\n## History\n\n")
	fmt.Fprintf(&r, "Events per one-turn task (median, workflow code version %d, a session that completes after its turn): %d, in one workflow, "+
		"the session that is its one-task delegation (version 2 took 12 in the session and 21 in the delegation). ",
		api.CurrentVersion, medianInt(sessionEvents))
	return r.String()
}
