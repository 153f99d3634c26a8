package dev

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	tourfiles "github.com/durable-pi/subagents/examples/tour"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/ports"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/devserver"
)

// `subagents demo --tour`: every capability once, with the scripted model
// and nothing else (no model key, no network), in order, each saying what it
// did and the command that tries it by hand against the service the tour
// leaves up. The tour runs its steps with those very commands (the
// `subagents` binary, --json added), so what it prints is what it ran.
// Its scripts, profiles, requests and plan are the files of examples/tour,
// embedded, and written out to the tour's folder for a user to change.

// tourQueue is the tour's task queue. Its Temporal is its own; the name
// keeps its runs apart from the demo's.
const tourQueue = "subagents-tour"

// tourStepTimeout bounds one step: each takes seconds, the crash about 20 s
// (the heartbeat timeout), all of them several times that on a loaded
// two-core machine; a step past it is reported and the tour goes on.
const tourStepTimeout = 3 * time.Minute

// tour is one run of the tour.
type tour struct {
	stdout io.Writer
	// dir is the tour's folder: its files, project/, data/ and pi-agent/.
	dir, project, dataDir, agentDir string
	// bin is the subagents command the tour runs, env its environment
	// (and the worker's base): the tour's service, not the user's.
	bin      string
	base     []string
	env      []string
	address  string
	uiURL    string
	model    *scriptedmodel.Server
	worker   *workerProcess
	ext      string
	extDirs  []string
	gitError error
}

// tourStep is one capability.
type tourStep struct {
	title string
	run   func(t *tour, ctx context.Context) tourResult
}

// tourResult is what a step did: lines for the user, the commands that
// try it by hand, and its failure or why it was skipped.
type tourResult struct {
	lines   []string
	try     []string
	err     error
	skipped string
}

// tourSteps are the capabilities, in the order the tour shows them.
var tourSteps = []tourStep{
	{"a delegation", (*tour).delegation},
	{"a batch", (*tour).batch},
	{"a plan", (*tour).plan},
	{"a worktree", (*tour).worktree},
	{"a question", (*tour).question},
	{"a nested delegation", (*tour).nested},
	{"a schedule", (*tour).schedule},
	{"a crash", (*tour).crash},
}

func (o *demoOptions) runTour(ctx context.Context, stdout, stderr io.Writer) (err error) {
	began := time.Now()
	say := func(format string, a ...any) { _, _ = fmt.Fprintf(stdout, format+"\n", a...) }
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	pi, err := worker.FindPi(ctx, worker.DefaultPiLookup(o.pi))
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "cannot find the subagents executable: "+err.Error())
	}
	t := &tour{stdout: stdout, bin: subagentsBeside(self)}
	t.extDirs = extensionDirs(os.Getenv("SUBAGENTS_EXTENSION_DIR"), self)
	t.ext = findExtension(t.extDirs)
	if t.dir, err = tourDir(o.dir); err != nil {
		return err
	}
	if o.dir == "" {
		defer func() { _ = os.RemoveAll(t.dir) }()
	}
	t.project, t.dataDir, t.agentDir = filepath.Join(t.dir, "project"), filepath.Join(t.dir, "data"), filepath.Join(t.dir, "pi-agent")
	if err := t.writeFiles(); err != nil {
		return err
	}
	t.gitError = t.initProject(ctx)

	t.model, err = scriptedmodel.Start()
	if err != nil {
		return err
	}
	defer func() { _ = t.model.Close() }()
	scripts, err := readScripts(os.DirFS(t.dir), "scripts")
	if err != nil {
		return err
	}
	for name, steps := range scripts {
		t.model.Script(name, steps...)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go watchScripts(watchCtx, filepath.Join(t.dir, "scripts"), t.model, stdout)
	if err := t.model.WritePiAgentDir(t.agentDir); err != nil {
		return err
	}
	if err := copyDir(filepath.Join(t.dir, "agents"), filepath.Join(t.agentDir, "agents")); err != nil {
		return err
	}
	if t.ext != "" {
		// A pi started with the tour's variables loads the extension, as
		// `pi install` of it would: it finds the schedule's result.
		if err := addPackage(filepath.Join(t.agentDir, "settings.json"), t.ext); err != nil {
			return err
		}
	}

	port, uiPort := o.port, o.uiPort
	if !o.portSet {
		// Ports of its own: the user's service may hold 7233, another
		// tour or a test the next ones.
		if port, err = ports.Free("127.0.0.1", 1000); err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, "no free port for the tour's Temporal: "+err.Error()+"; give one with --port")
		}
	}
	key, err := connection.EnsureKey(t.dataDir)
	if err != nil {
		return err
	}
	srv, err := devserver.Start(ctx, devserver.Options{
		Port: port, UIPort: uiPort, DBFile: filepath.Join(t.dataDir, "temporal.db"),
		SearchAttributes: api.SearchAttributes(), Logger: logger, APIKey: key,
	})
	if err != nil {
		return err
	}
	defer srv.Stop()
	t.address = srv.FrontendAddress()
	t.setEnv(srv.UIURL())

	var workerEnv []string
	if t.ext != "" {
		workerEnv = append(workerEnv, "SUBAGENTS_EXTENSION_DIR="+t.ext)
	}
	// The worker answers the client protocol on the data dir's socket, as
	// `subagents dev` does: the tour's commands and a pi started with the
	// tour's variables reach it there. It starts children early, as dev's
	// single worker does.
	t.worker = &workerProcess{self: t.bin, pi: pi.Path, address: t.address, dataDir: t.dataDir, agentDir: t.agentDir, stderr: stderr,
		queue: tourQueue, base: t.base, args: []string{"--socket", "--early-start"}, env: workerEnv}
	if err := t.worker.start(); err != nil {
		return err
	}
	defer func() { t.worker.stop() }()

	say("subagents demo --tour: every capability once. The model is SCRIPTED: every answer below comes from")
	say("this project's scripted model server, not from a real LLM; no API key is used and nothing leaves this machine.")
	say("")
	say("The tour's folder: %s", t.dir)
	say("  scripts/  the scripted model's answers, one JSON file per script ([[script:NAME]] in a prompt picks one)")
	say("  agents/   the tour's agent profiles;  batch.json, plan.yaml, worktree.json: what it runs")
	say("  project/  the folder its tasks work in (a git repository);  data/, pi-agent/: its service and pi config")
	if o.dir == "" {
		say("  (removed when the tour ends: copy what you want to keep, or give --dir)")
	}
	say("Temporal:  %s   UI: %s", t.address, srv.UILoginURL("/namespaces/"+srv.Namespace()+"/workflows"))
	if err := t.waitForWorker(ctx); err != nil {
		return err
	}
	say("worker:    pid %d, polling %q", t.worker.pid(), tourQueue)
	say("")
	say("To try a step by hand, in another terminal while the tour is up:")
	say("  %s", t.exports())
	say("  cd %s", shellQuote(t.project))
	say("")

	failed := 0
	for i, s := range tourSteps {
		sctx, cancel := context.WithTimeout(ctx, tourStepTimeout)
		start := time.Now()
		r := s.run(t, sctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		took := time.Since(start).Seconds()
		switch {
		case r.skipped != "":
			say("%d/%d %s – skipped (%.1fs)", i+1, len(tourSteps), s.title, took)
			r.lines = append([]string{r.skipped}, r.lines...)
		case r.err != nil:
			failed++
			say("%d/%d %s ✕ (%.1fs)", i+1, len(tourSteps), s.title, took)
			r.lines = append(r.lines, "failed: "+r.err.Error())
		default:
			say("%d/%d %s ✓ (%.1fs)", i+1, len(tourSteps), s.title, took)
		}
		for _, l := range r.lines {
			say("    %s", l)
		}
		for _, c := range r.try {
			say("    try it: %s", c)
		}
	}
	say("")
	say("The tour took %s.", time.Since(began).Round(time.Second))
	if failed > 0 {
		return errcode.Errorf(errcode.Failed, "the tour: %d of %d steps failed, each with its reason above", failed, len(tourSteps))
	}
	if !o.stay {
		return nil
	}
	say("")
	say("The tour's service stays up until Ctrl-C: try the commands above in another terminal, after the")
	say("export and cd lines. A script you change or add in %s is read again at once.", filepath.Join(t.dir, "scripts"))
	say("UI: %s", srv.UILoginURL("/namespaces/"+srv.Namespace()+"/workflows"))
	<-ctx.Done()
	return nil
}

// subagentsBeside is the subagents command beside this binary (make build
// and the npm package put both in one folder), else this binary, which
// answers every command too.
func subagentsBeside(self string) string {
	if p := filepath.Join(filepath.Dir(self), "subagents"); isFile(p) {
		return p
	}
	return self
}

// tourDir makes the tour's folder: dir, which must be empty or not exist
// (a service's database of an earlier tour would carry its schedules), or
// a new folder in the temporary dir.
func tourDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "subagents-tour-")
		if err != nil {
			return "", errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
		return d, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, "--dir: "+err.Error())
	}
	if entries, err := os.ReadDir(abs); err == nil && len(entries) > 0 {
		return "", errcode.Errorf(errcode.InvalidInput, "--dir %s is not empty: give a new folder (the tour writes its project and service there)", abs)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, "--dir: "+err.Error())
	}
	return abs, nil
}

// writeFiles writes the embedded files of examples/tour into the tour's
// folder.
func (t *tour) writeFiles() error {
	err := fs.WalkDir(tourfiles.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(t.dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := fs.ReadFile(tourfiles.Files, p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		return os.WriteFile(dst, b, mode)
	})
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "write the tour's files into "+t.dir+": "+err.Error())
	}
	// The plan's writers put their files in out/, which git ignores, so
	// the checkout stays clean for the worktree step (a worktree is made
	// from a commit).
	return os.WriteFile(filepath.Join(t.project, ".gitignore"), []byte("out/\n"), 0o644)
}

// initProject makes the project a git repository with one commit: a
// worktree is made from a commit. Without git the worktree step says so.
func (t *tour) initProject(ctx context.Context) error {
	if _, err := exec.LookPath("git"); err != nil {
		return errors.New("git is not on PATH: a worktree is made with git; install it and run the tour again")
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=subagents tour", "-c", "user.email=tour@localhost", "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "the tour's project"},
	} {
		if err := t.git(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func (t *tour) git(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = t.project
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s in %s: %v: %s", strings.Join(args, " "), t.project, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// addPackage adds dir to the packages pi loads in its settings file.
func addPackage(settings, dir string) error {
	m := map[string]any{}
	b, err := os.ReadFile(settings)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "the tour's pi settings "+settings+": "+err.Error())
	}
	pkgs, _ := m["packages"].([]any)
	if !slices.Contains(pkgs, any(dir)) {
		m["packages"] = append(pkgs, dir)
	}
	if b, err = json.MarshalIndent(m, "", "  "); err == nil {
		err = os.WriteFile(settings, b, 0o644)
	}
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "the tour's pi settings "+settings+": "+err.Error())
	}
	return nil
}

// copyDir copies the files of src into dst.
func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
	}
	return nil
}

// tourVars are what a command needs to reach the tour's service, in the
// order the export line names them.
func (t *tour) tourVars(uiURL string) [][2]string {
	vars := [][2]string{
		{"SUBAGENTS_DATA_DIR", t.dataDir},
		{"TEMPORAL_ADDRESS", t.address},
		{"SUBAGENTS_TASK_QUEUE", tourQueue},
		{"PI_CODING_AGENT_DIR", t.agentDir},
		{"PI_OFFLINE", "1"},
	}
	// Links name the UI's port; a command guesses the frontend's + 1000.
	if host, p, err := net.SplitHostPort(t.address); err == nil && uiURL != "" {
		if n, err := strconv.Atoi(p); err == nil && uiURL != "http://"+net.JoinHostPort(host, strconv.Itoa(n+1000)) {
			vars = append(vars, [2]string{"SUBAGENTS_UI_URL", uiURL})
		}
	}
	return vars
}

// setEnv sets the environment of the tour's commands and worker: this
// process's without what would point them elsewhere (the user's own
// service, a Temporal of theirs, a pi config, a subagent's identity), then
// the tour's variables, the folder of its subagents first on PATH.
func (t *tour) setEnv(uiURL string) {
	t.base = nil
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TEMPORAL_") || strings.HasPrefix(k, "SUBAGENTS_") || strings.HasPrefix(k, "PI_SUBAGENT_") ||
			strings.HasPrefix(k, "OHM_SUBAGENTS_") || k == "PI_CODING_AGENT_DIR" || k == "PATH" {
			continue
		}
		t.base = append(t.base, kv)
	}
	t.base = append(t.base, "PATH="+filepath.Dir(t.bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.env = slices.Clone(t.base)
	for _, v := range t.tourVars(uiURL) {
		t.env = append(t.env, v[0]+"="+v[1])
	}
	t.uiURL = uiURL
}

// exports is the line that gives a shell the tour's variables.
func (t *tour) exports() string {
	words := []string{"export", "PATH=" + shellQuote(filepath.Dir(t.bin)) + `:"$PATH"`}
	for _, v := range t.tourVars(t.uiURL) {
		words = append(words, v[0]+"="+shellQuote(v[1]))
	}
	return strings.Join(words, " ")
}

// waitForWorker waits until the worker answers on its socket: it polls
// then. A worker that exits first fails the tour with its stderr above.
func (t *tour) waitForWorker(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if c, err := net.Dial("unix", connection.SocketPath(t.dataDir)); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-t.worker.done:
			return errcode.New(errcode.Failed, "the tour's worker exited at its start (its error is above)")
		case <-wctx.Done():
			return errcode.Errorf(errcode.Failed, "the tour's worker did not answer on %s within 2 minutes", connection.SocketPath(t.dataDir))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cli runs `subagents ARGS` with --json after the verb, in the project,
// against the tour's service, and returns its envelope. An exit code
// other than 0 with an envelope (a task that failed, a question) is the
// caller's to read; no envelope, or one with an error, is an error.
func (t *tour) cli(ctx context.Context, args ...string) (client.Envelope, error) {
	full := append([]string{args[0], "--json"}, args[1:]...)
	cmd := exec.CommandContext(ctx, t.bin, full...)
	cmd.Dir, cmd.Env = t.project, t.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var env client.Envelope
	if err := json.Unmarshal(stdout.Bytes(), &env); err != nil {
		return env, errcode.Errorf(errcode.Failed, "subagents %s: %v: %s", args[0], cmp.Or(runErr, err), clip(strings.TrimSpace(stderr.String()+" "+stdout.String()), 400))
	}
	if env.Error != nil {
		return env, errcode.Errorf(errcode.Failed, "subagents %s: %s: %s", args[0], env.Error.Code, env.Error.Message)
	}
	return env, nil
}

// command is the line a user types for args.
func command(args ...string) string {
	words := []string{"subagents"}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell: as it is when it is plain, in
// double quotes when nothing in it is special there (a prompt reads best
// so), else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == "" {
		return s
	}
	if !strings.ContainsAny(s, "\"$`\\!") {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// clip shortens s to n characters, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// ran says how a finished item went: its status, and its error's code and
// message when it did not complete.
func ran(it client.Item) error {
	if it.Status == string(api.StateCompleted) {
		return nil
	}
	if it.Error != nil {
		return errcode.Errorf(errcode.Failed, "%s %s: %s: %s", it.Name, it.Status, it.Error.Code, it.Error.Message)
	}
	return errcode.Errorf(errcode.Failed, "%s ended %s", it.Name, it.Status)
}

// oneTask runs a command that starts one task and waits for it, and
// returns that task once it completed; else the error says how it ended.
func (t *tour) oneTask(ctx context.Context, args ...string) (client.Item, error) {
	env, err := t.cli(ctx, args...)
	if err != nil {
		return client.Item{}, err
	}
	it, err := oneItem(env)
	if err != nil {
		return it, err
	}
	return it, ran(it)
}

// oneItem is env's only item, or an error saying what came instead.
func oneItem(env client.Envelope) (client.Item, error) {
	if len(env.Items) != 1 {
		return client.Item{}, errcode.Errorf(errcode.Failed, "%d tasks in the answer, want 1", len(env.Items))
	}
	return env.Items[0], nil
}
