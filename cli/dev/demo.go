// Package demo is `subagents demo`: for a newcomer without a model API key,
// the whole stack on one machine with the project's scripted model, a
// three-task delegation, and a worker killed and restarted while it runs.
package dev

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/cli"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/devserver"
)

// taskQueue is the demo's own, so it never mixes with a real worker's.
const taskQueue = "subagents-demo"

// childDelay is how long each scripted child takes to answer its last step:
// long enough that the worker is killed while all three run.
const childDelay = 3 * time.Second

// demoTask is one task of the demo delegation: name, prompt, and the
// scripted answer.
type demoTask struct {
	name, prompt, result string
}

// demoTasks are the demo delegation's tasks. The scripted answers are
// taken from the code they speak of (the heartbeat constant, the built-in
// profiles), so they stay true when it changes; demo_test.go checks the
// rest against the source tree.
func demoTasks() ([]demoTask, error) {
	// No project and no pi config dir of the user: the built-in profiles.
	empty, err := os.MkdirTemp("", "subagents-demo-profiles-")
	if err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	defer func() { _ = os.RemoveAll(empty) }()
	builtin, err := profiles.Load(profiles.Options{Cwd: empty, AgentDir: empty})
	if err != nil {
		return nil, err
	}
	return []demoTask{
		{"map-layout", "Map the layout of this repository.", "workflows/, activities/, worker/, client/ and extension/ hold the service; e2e/ tests it end to end."},
		{"find-heartbeat", "Find where the child run's heartbeat interval is set.",
			fmt.Sprintf("activities/activities.go: DefaultHeartbeatInterval = %s.", activities.DefaultHeartbeatInterval)},
		{"list-profiles", "Name the built-in agent profiles.", strings.Join(builtin.Names(false), ", ") + "."},
	}, nil
}

// DemoMain runs the demo until ctx ends (Ctrl-C) or, with --stay=false, until it
// has printed the results.
func DemoMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o demoOptions
	fs, err := cli.ParseFlags("demo", args, stderr, o.register)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errcode.Errorf(errcode.InvalidInput, "subagents demo takes no arguments, got %q", fs.Args())
	}
	if o.tour {
		// The tour picks free ports unless told: a service of the user's
		// on 7233 must not stop it.
		fs.Visit(func(f *flag.Flag) { o.portSet = o.portSet || f.Name == "port" })
		return o.runTour(ctx, stdout, stderr)
	}
	if o.dir != "" {
		return errcode.New(errcode.InvalidInput, "--dir is the tour's folder: give it with --tour")
	}
	return o.run(ctx, stdout, stderr)
}

// demoOptions are `subagents demo`'s flags.
type demoOptions struct {
	port, uiPort int
	stay         bool
	pi           string
	// tour runs every capability once instead (tour.go), in dir.
	tour    bool
	dir     string
	portSet bool
}

func (o *demoOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&o.port, "port", 7233, "port of the Temporal frontend")
	fs.IntVar(&o.uiPort, "ui-port", 0, "port of the Temporal UI (default --port + 1000)")
	fs.BoolVar(&o.stay, "stay", true, "keep the server and its UI up after the run, until Ctrl-C")
	fs.StringVar(&o.pi, "pi", "", "pi executable (default: as `subagents dev` finds it)")
	fs.BoolVar(&o.tour, "tour", false,
		"every capability once instead: a delegation, a batch, a plan, a worktree, a question, a nested delegation, a schedule, a crash; each with the command to try it by hand (docs/walkthrough.md)")
	fs.StringVar(&o.dir, "dir", "",
		"--tour: the folder for its scripts, project and data, kept afterwards (default: a new folder in the temporary dir, removed when the tour ends)")
}

func (o *demoOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	// Errors only: the SDK warns about slow calls while the demo's worker is
	// dead on purpose.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	pi, err := worker.FindPi(ctx, worker.DefaultPiLookup(o.pi))
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "cannot find the subagents executable: "+err.Error())
	}
	dir, err := os.MkdirTemp("", "subagents-demo-")
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	defer func() { _ = os.RemoveAll(dir) }()

	say := func(format string, a ...any) { _, _ = fmt.Fprintf(stdout, format+"\n", a...) }
	say("subagents demo: the model is SCRIPTED. Every answer below comes from this project's")
	say("scripted model server, not from a real LLM: no API key is used and nothing leaves this machine.")
	say("")

	tasks, err := demoTasks()
	if err != nil {
		return err
	}
	model, err := scriptedmodel.Start()
	if err != nil {
		return err
	}
	defer func() { _ = model.Close() }()
	for i, t := range tasks {
		last := finalize(t.result)
		last.DelayMS = int(childDelay / time.Millisecond)
		model.Script(fmt.Sprintf("demo-%d", i), scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "ls", Arguments: `{"path":"."}`}}}, last)
	}
	agentDir := filepath.Join(dir, "pi-agent")
	if err := model.WritePiAgentDir(agentDir); err != nil {
		return err
	}

	// The demo's worker process finds the key in its data dir.
	key, err := connection.EnsureKey(filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	srv, err := devserver.Start(ctx, devserver.Options{
		Port: o.port, UIPort: o.uiPort, DBFile: filepath.Join(dir, "temporal.db"),
		SearchAttributes: api.SearchAttributes(), Logger: logger, APIKey: key,
	})
	if err != nil {
		return err
	}
	defer srv.Stop()
	tc, err := sdkclient.DialContext(ctx, srv.ClientOptions(sdkclient.Options{Logger: connection.NewSDKLogger(logger)}))
	if err != nil {
		return connection.Unavailable(srv.FrontendAddress(), err)
	}
	defer tc.Close()
	say("Temporal:  %s   UI: %s", srv.FrontendAddress(), srv.UILoginURL("/namespaces/"+srv.Namespace()+"/workflows"))

	w := &workerProcess{self: self, pi: pi.Path, address: srv.FrontendAddress(), dataDir: filepath.Join(dir, "data"), agentDir: agentDir, stderr: stderr}
	if err := w.start(); err != nil {
		return err
	}
	defer w.stop()
	say("worker 1:  pid %d, polling %q", w.pid(), taskQueue)

	c := &client.Client{Temporal: tc, TaskQueue: taskQueue, Address: srv.FrontendAddress(), Namespace: srv.Namespace(), UIURL: srv.UIURL()}
	req := client.StartRequest{MaxConcurrency: len(tasks)}
	for i, t := range tasks {
		req.Tasks = append(req.Tasks, api.TaskSpec{
			Name: t.name, Prompt: fmt.Sprintf("[[script:demo-%d]] %s", i, t.prompt), Profile: "scout",
			Cwd: mustWd(), Model: scriptedmodel.ModelRef,
		})
	}
	started, err := c.Start(ctx, req)
	if err != nil {
		return err
	}
	say("started:   %s (3 tasks, each a session workflow)", started.DelegationID)

	// Kill the worker once all three children are at work.
	if err := waitForChildren(ctx, model, len(tasks)); err != nil {
		return err
	}
	killed := w.pid()
	w.kill()
	say("")
	say("worker 1 KILLED (SIGKILL, pid %d) while all three children ran.", killed)
	say("Nothing is lost: Temporal notices the missing heartbeats and retries each turn on the next worker,")
	say("which continues the children's pi session files.")
	if err := w.start(); err != nil {
		return err
	}
	say("worker 2:  pid %d, polling %q", w.pid(), taskQueue)
	say("")

	begin := time.Now()
	env, err := c.Follow(ctx, started.DelegationID, 0, nil)
	if err != nil {
		return err
	}
	say("done %.1fs after the kill:", time.Since(begin).Seconds())
	say("")
	for _, it := range env.Items {
		mark := "✓"
		if it.Status != string(api.StateCompleted) {
			mark = "✕"
		}
		say("%s %s: %s (%s)", mark, it.Name, it.Status, howItRan(it))
		if it.Error != nil {
			say("  %s: %s", it.Error.Code, it.Error.Message)
		}
		say("  %s", it.Output)
		say("  %s", it.UIURL)
	}
	if u := env.Usage; u != nil {
		say("")
		say("usage: %d input + %d output tokens, $%.5f (scripted prices)", u.Input, u.Output, u.Cost)
	}
	say("delegation: %s", env.UIURL)
	if err := warmDemo(ctx, c, model, say); err != nil {
		return err
	}
	if !o.stay {
		return nil
	}
	say("")
	say("The UI stays up at %s until Ctrl-C.", srv.UIURL())
	<-ctx.Done()
	return nil
}

// howItRan says how a task of the demo got through the kill: each was
// running when the worker died, so a first attempt that completed means
// the kill missed it, and a retry that did not continue the session file
// either found the run ended in it or started the task over.
func howItRan(it client.Item) string {
	switch {
	case it.RunAttempt < 2:
		return "ran once, on its first attempt"
	case it.Continued:
		return fmt.Sprintf("continued its pi session on attempt %d after the kill", it.RunAttempt)
	default:
		return fmt.Sprintf("attempt %d after the kill, its pi session not continued", it.RunAttempt)
	}
}

// warmDemo runs one quick task twice in a folder of its own: the first
// of its kind starts pi, the second takes a warm child the worker's pool
// (--warm-pool) started after the first.
func warmDemo(ctx context.Context, c *client.Client, model *scriptedmodel.Server, say func(string, ...any)) error {
	model.Script("demo-quick", finalize("The answer, at once."))
	dir, err := os.MkdirTemp("", "subagents-demo-quick-")
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	defer func() { _ = os.RemoveAll(dir) }()
	say("")
	say("Warm children: the worker keeps pi processes started ahead of tasks like recent ones (--warm-pool 2).")
	for i, label := range []string{"first task of its kind", "the same kind again  "} {
		if i > 0 {
			// The pool starts its children as the first task finds none
			// (a miss teaches it the kind); they are up a moment later.
			time.Sleep(warmRefill)
		}
		begin := time.Now()
		started, err := c.Start(ctx, client.StartRequest{Tasks: []api.TaskSpec{{
			Name: "quick", Prompt: "[[script:demo-quick]] Answer.", Profile: "scout", Cwd: dir, Model: scriptedmodel.ModelRef,
		}}, IdleTTLSeconds: -1})
		if err != nil {
			return err
		}
		env, err := c.Follow(ctx, started.DelegationID, 0, nil)
		if err != nil {
			return err
		}
		how := "started pi"
		if len(env.Items) > 0 && env.Items[0].Warm {
			how = "took a warm child"
		}
		say("  %s: %4d ms, %s", label, time.Since(begin).Milliseconds(), how)
	}
	return nil
}

// warmRefill is how long the demo gives the pool to start its child after
// a task: pi starts in about half a second.
const warmRefill = 2 * time.Second

func finalize(result string) scriptedmodel.Step {
	args := fmt.Sprintf(`{"status":"SUCCESS","result":%s}`, strconv.Quote(result))
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "subagent_finalize", Arguments: args}}}
}

func mustWd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return wd
}

// waitForChildren waits until n children asked for their last step (the
// one that takes childDelay).
func waitForChildren(ctx context.Context, model *scriptedmodel.Server, n int) error {
	// A cold start of three pi children takes a few seconds here; a minute
	// means something is wrong.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := model.WaitForRequests(wctx, n, func(r scriptedmodel.Request) bool { return r.StepIdx == 1 })
	if err != nil {
		return errcode.Errorf(errcode.Failed, "the demo's children did not start: %v", err)
	}
	return nil
}

// workerProcess is a `subagents worker` the demo starts, kills and starts
// again: a separate process, so the kill is a real one.
type workerProcess struct {
	self, pi, address, dataDir, agentDir string
	stderr                               io.Writer
	cmd                                  *exec.Cmd
	done                                 chan struct{}
	// queue is the task queue it polls (default the demo's); base, when
	// set, is its environment instead of this process's, and args and env
	// are added (the tour's, tour.go).
	queue string
	base  []string
	args  []string
	env   []string
}

func (w *workerProcess) start() error {
	args := []string{"worker", "--address", w.address, "--task-queue", cmp.Or(w.queue, taskQueue),
		"--data-dir", w.dataDir, "--pi", w.pi, "--log-level", "error"}
	if w.args == nil {
		args = append(args, "--warm-pool", "2")
	}
	w.cmd = exec.Command(w.self, append(args, w.args...)...)
	base := os.Environ()
	if w.base != nil {
		base = w.base
	}
	w.cmd.Env = append(append(base, scriptedmodel.PiEnv(w.agentDir)...), w.env...)
	w.cmd.Stdout, w.cmd.Stderr = io.Discard, w.stderr
	if err := w.cmd.Start(); err != nil {
		return errcode.Wrap(errcode.Failed, err, "start a worker: "+err.Error())
	}
	w.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(w.cmd, w.done)
	return nil
}

func (w *workerProcess) pid() int { return w.cmd.Process.Pid }

// kill ends the worker at once; its pi children get SIGTERM from the kernel
// (the worker sets Pdeathsig) and stop with it.
func (w *workerProcess) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
}

// stop ends the worker cleanly, then hard after a grace period.
func (w *workerProcess) stop() {
	if w.cmd == nil {
		return
	}
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		// The worker's own stop waits for activities; past this it is stuck.
		w.kill()
	}
}
