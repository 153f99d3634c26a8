package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Verbs lists the client verbs of the subagents command.
var Verbs = []string{"run", "start", "status", "wait", "send", "cancel", "resume", "apply", "reply", "questions", "list", "output", "transcript", "ack", "profiles", "serve", "schedule"}

// IO is what a verb reads and writes, and the environment it sees.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	// Getenv reads the environment (PI_SUBAGENT_DEPTH, SUBAGENTS_UI_URL,
	// TEMPORAL_*); nil means os.Getenv.
	Getenv func(string) string
	// Terminal says whether Out is a terminal, for live progress; nil
	// means: look at Out.
	Terminal func() bool
	// Compact prints each envelope on one line (serve's replies).
	Compact bool
	// Dir is the caller's folder; empty: this process's.
	Dir string
	// DataDir is the service's data dir, whose nesting key checks a
	// caller's session (caller.go); empty: connection.DefaultDataDir.
	DataDir string
	// Started, when set, learns the delegation or plan a call started, as
	// soon as it has (the service tells a command that handed it the call).
	Started func(id string)
}

// dir is the caller's folder.
func (o IO) dir() (string, error) {
	if o.Dir != "" {
		return o.Dir, nil
	}
	return os.Getwd()
}

func (o IO) getenv(k string) string {
	if o.Getenv != nil {
		return o.Getenv(k)
	}
	return os.Getenv(k)
}

func (o IO) terminal() bool {
	if o.Terminal != nil {
		return o.Terminal()
	}
	f, ok := o.Out.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// clientMain runs one client verb of the subagents command. With --json it
// prints one Envelope, also when the call fails, so a program reading
// stdout always gets an answer; the exit code tells the outcome apart.
func clientMain(ctx context.Context, args []string, stdio IO) error {
	if len(args) > 0 && args[0] == "serve" {
		return serveMain(ctx, args[1:], stdio)
	}
	return runVerb(ctx, args, stdio, nil)
}

// WantsJSON reports whether a verb's arguments ask for JSON envelopes.
func WantsJSON(args []string) bool {
	return slices.Contains(args, "--json") || slices.Contains(args, "-json")
}

// runVerb runs one verb; a non-nil dial gives it its Temporal client
// (serve's shared connection) instead of one of its own.
func runVerb(ctx context.Context, args []string, stdio IO, dial func(*command, context.Context) (*client.Client, func(), error)) error {
	if len(args) == 0 {
		return errcode.New(errcode.InvalidInput, "no command given")
	}
	verb, rest := args[0], args[1:]
	if verb == "profiles" {
		return profilesMain(rest, stdio.Out, stdio.Err)
	}
	cmd, v, err := parse(verb, rest, stdio)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cmd.fail(err)
	}
	// A verb that reads its whole request itself (schedule) checks it
	// before any connection: a mistake is INVALID_INPUT whether or not a
	// service runs, and a service that does not answer says what it needs.
	p, prepares := v.(preparer)
	if prepares {
		if err := p.prepare(cmd); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return cmd.fail(err)
		}
	}
	if dial == nil {
		// A process of its own: the local service runs the call if it
		// serves what this process would dial (local.go); it prints what
		// this process would, the envelope of a failure too.
		if lc := cmd.localService(); lc != nil {
			return lc.forward(ctx, cmd, v, cmd.argv)
		}
		dial = (*command).dialOwn
	}
	c, closeFn, err := dial(cmd, ctx)
	if err != nil {
		if prepares {
			err = p.unavailable(err)
		}
		return cmd.fail(limited(ctx, err))
	}
	defer closeFn()
	return cmd.fail(limited(ctx, v.run(ctx, cmd, c)))
}

// verb is one client verb in the style of cli/cli's commands: options that
// its flags fill (parse, tested on its own), and a run that uses them with
// a connected client.
type verb interface {
	// register declares the verb's own flags into its options.
	register(fs *flag.FlagSet)
	// run does the verb; cmd holds the common flags and the arguments.
	run(ctx context.Context, cmd *command, c *client.Client) error
}

// preparer is a verb that reads and checks its request before the
// connection is made (prepare), and says more when the connection fails
// (unavailable).
type preparer interface {
	prepare(cmd *command) error
	unavailable(err error) error
}

// helper is a verb whose -h says more than its flags: helpText follows them.
type helper interface{ helpText() string }

// verbs makes each client verb's options, by name.
var verbs = map[string]func() verb{
	"run":        func() verb { return &startOptions{} },
	"start":      func() verb { return &startOptions{} },
	"status":     func() verb { return &idsOptions{} },
	"cancel":     func() verb { return &idsOptions{} },
	"transcript": func() verb { return &idsOptions{} },
	"wait":       func() verb { return &waitOptions{} },
	"send":       func() verb { return &sendOptions{} },
	"list":       func() verb { return &listOptions{} },
	"output":     func() verb { return &outputOptions{} },
	"ack":        func() verb { return &ackOptions{} },
	"resume":     func() verb { return &resumeOptions{} },
	"apply":      func() verb { return &applyOptions{} },
	// A child's questions to its parent (docs/questions.md): reply answers
	// one, questions lists those that wait.
	"reply":     func() verb { return &replyOptions{} },
	"questions": func() verb { return &questionsOptions{} },
	// Delegations and plans on a timer: Temporal schedules (docs/schedules.md).
	"schedule": func() verb { return &scheduleOptions{} },
}

// parse reads a client verb's arguments: the common flags into the
// command, the verb's own into its options, the rest into cmd.args. A bad
// flag or an unknown verb is INVALID_INPUT (cmd is never nil, so the caller
// can answer with an envelope).
func parse(name string, args []string, stdio IO) (*command, verb, error) {
	cmd := &command{verb: name, io: stdio, compact: stdio.Compact}
	mk, ok := verbs[name]
	if !ok {
		// A program that asked for an envelope gets one, with the code.
		cmd.asJSON = WantsJSON(args)
		return cmd, nil, unknownCommand(name)
	}
	v := mk()
	fs, err := ParseFlags(name, args, stdio.Err, cmd.common, v.register)
	if err != nil {
		if h, ok := v.(helper); ok && errors.Is(err, flag.ErrHelp) && stdio.Err != nil {
			_, _ = fmt.Fprint(stdio.Err, h.helpText())
		}
		return cmd, v, err
	}
	cmd.args = fs.Args()
	// A call handed to the local service goes with its flags first: a
	// service of an earlier release reads flags only before the arguments.
	cmd.argv = append([]string{name}, flagsFirst(fs, args)...)
	return cmd, v, nil
}

// ParseFlags parses a verb's flags, declared by register (the client verbs'
// parse, and serve, profiles, worker, setup, dev, demo); a bad flag is
// INVALID_INPUT, -h is flag.ErrHelp. Flags may come before or after the
// positional arguments (`status ID --json`), as a person types them; `--`
// ends the flags, and what follows it is positional however it looks.
func ParseFlags(verb string, args []string, stderr io.Writer, register ...func(*flag.FlagSet)) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("subagents "+verb, flag.ContinueOnError)
	for _, r := range register {
		r(fs)
	}
	plainUsages(fs)
	// The flag package prints its error and the verb's whole usage on a
	// bad flag: the error comes back as one line instead (flagError), and
	// the usage is printed for -h only.
	fs.SetOutput(io.Discard)
	err := fs.Parse(flagsFirst(fs, args))
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = fmt.Fprintf(stderr, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		return fs, err
	case err != nil:
		return fs, errcode.Wrap(errcode.InvalidInput, err, flagError(verb, fs, err))
	}
	return fs, nil
}

// flagsFirst is args with its flags (and their values) moved before its
// positional arguments, which follow a "--": the flag package stops at the
// first positional argument, so `status ID --json` would read "--json" as
// an ID. A flag that takes a value takes the next argument, whatever it
// looks like (`--name --`), as the flag package does; "--" ends the flags
// and a lone "-" is positional. An unknown flag stays among the flags, for
// Parse to report.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") || i+1 == len(args) {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		i++
		flags = append(flags, args[i])
	}
	return append(append(flags, "--"), pos...)
}

// limited is err, or the coded cause of ctx's end when ctx ended it (the
// service's per-call limit, see Server), so that the caller learns which
// limit it hit instead of a bare "context deadline exceeded".
func limited(ctx context.Context, err error) error {
	var coded *errcode.Error
	if err == nil || ctx.Err() == nil || errors.As(err, &coded) || errors.Is(err, errcode.ErrPending) {
		return err
	}
	if errors.As(context.Cause(ctx), &coded) {
		return coded
	}
	return err
}

// command holds one verb's flags.
type command struct {
	verb string
	io   IO
	args []string
	// argv is the verb and its arguments as parsed: the flags, "--", the
	// positional arguments.
	argv      []string
	conn      connection.Settings
	asJSON    bool
	taskQueue string
	uiURL     string
	// compact prints envelopes on one line each (JSON lines).
	compact bool
	host    string
}

func (cmd *command) common(fs *flag.FlagSet) {
	cmd.conn.RegisterFlags(fs)
	fs.BoolVar(&cmd.asJSON, "json", false, "print one JSON envelope (contract_version "+client.ContractVersion+") instead of text")
	fs.StringVar(&cmd.taskQueue, "task-queue", cmp.Or(cmd.io.getenv("SUBAGENTS_TASK_QUEUE"), api.DefaultTaskQueue), "task queue the workers poll (env SUBAGENTS_TASK_QUEUE)")
	fs.StringVar(&cmd.host, "host", cmd.io.getenv("SUBAGENTS_HOST"),
		"run new tasks on the workers of this host (\"auto\": this machine), where their cwds exist (env SUBAGENTS_HOST; default: any worker)")
	fs.StringVar(&cmd.uiURL, "ui-url", "", "Temporal UI base URL for links (env SUBAGENTS_UI_URL; default: the frontend's port + 1000, as `subagents dev` serves it)")
}

// fail prints err as an envelope under --json and passes it on for the
// exit code.
func (cmd *command) fail(err error) error {
	if err == nil || !cmd.asJSON || errors.Is(err, errcode.ErrPending) || errors.Is(err, errTaskFailed) {
		return err
	}
	_ = cmd.printJSON(client.ErrorEnvelope(cmd.verb, err))
	return err
}

// dialOwn connects the verb to Temporal for this one call.
func (cmd *command) dialOwn(ctx context.Context) (*client.Client, func(), error) {
	opts, err := cmd.conn.ClientOptions()
	if err != nil {
		return nil, nil, err
	}
	// The command's own output is the envelope; the SDK's logs would only
	// get in the way of a program reading it.
	tc, err := cmd.conn.Dial(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	ui := cmp.Or(cmd.uiURL, cmd.io.getenv("SUBAGENTS_UI_URL"), defaultUIURL(opts.HostPort))
	c := &client.Client{Temporal: tc, TaskQueue: cmd.taskQueue, Address: opts.HostPort, Namespace: opts.Namespace, UIURL: ui}
	return c, tc.Close, nil
}

// defaultUIURL is where `subagents dev` serves the UI for a frontend at
// hostPort: the same host, port + 1000.
func defaultUIURL(hostPort string) string {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil || p+1000 > 65535 {
		return ""
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(p+1000))
}

// started says that the call started id (IO.Started).
func (cmd *command) started(id string) {
	if cmd.io.Started != nil && id != "" {
		cmd.io.Started(id)
	}
}

func (cmd *command) printJSON(env client.Envelope) error {
	enc := json.NewEncoder(cmd.io.Out)
	if !cmd.compact {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(env)
}

// errTaskFailed marks a call whose work ended in failure: exit code 1, the
// envelope already printed.
var errTaskFailed = errors.New("task failed")

// finish prints env and turns its outcome into the exit code.
func (cmd *command) finish(env client.Envelope, print func(client.Envelope)) error {
	if cmd.asJSON {
		if err := cmd.printJSON(env); err != nil {
			return err
		}
	} else {
		print(env)
	}
	switch {
	case env.WaitStatus == "timeout" || env.WaitStatus == "aborted" || env.WaitStatus == "question":
		return fmt.Errorf("%s %s: %w", cmd.verb, env.WaitStatus, errcode.ErrPending)
	case env.Done && failedItems(env) > 0:
		return errcode.Wrap(errcode.Failed, errTaskFailed, notCompleted(env))
	}
	return nil
}

// notCompleted is the one line that ends a call whose work did not all
// complete: how many tasks (a plan's steps) did not, which one failed and
// why (its code and message: the line stands alone on stderr, after the
// tree or the envelope), and for a plan the command that runs it again.
func notCompleted(env client.Envelope) string {
	what := "task"
	if env.Plan != nil {
		what = "step"
	}
	n := failedItems(env)
	msg := fmt.Sprintf("%d of %s did not complete", n, plural(len(env.Items), what))
	// The first that ended on its own account: a skipped step only
	// followed one that did not complete.
	first := -1
	for i, it := range env.Items {
		if it.Done && it.Status != string(api.StateCompleted) && it.Status != string(api.StateSkipped) {
			first = i
			break
		}
	}
	switch {
	case first >= 0:
		msg += ": " + itemEnd(env, first)
		if n > 1 {
			msg += fmt.Sprintf(", and %d more", n-1)
		}
	case env.Plan != nil && env.Plan.Stopped != nil:
		msg += fmt.Sprintf(": the plan stopped: %s: %s", env.Plan.Stopped.Code, oneLine(env.Plan.Stopped.Message, 300))
	}
	if env.Plan != nil && env.DelegationID != "" && (env.Status == string(api.StateFailed) || env.Status == string(api.StateCancelled)) {
		msg += fmt.Sprintf("; subagents resume %s runs what did not complete again", env.DelegationID)
	}
	return msg
}

// itemEnd says how env's item i ended: the task or step, its state, and
// why (its error's code and message, or what its child said).
func itemEnd(env client.Envelope, i int) string {
	it := env.Items[i]
	who := fmt.Sprintf("task %q (%s)", cmp.Or(it.Name, it.Agent), it.TaskID)
	if env.Plan != nil && i < len(env.Plan.Steps) {
		st := env.Plan.Steps[i]
		who = fmt.Sprintf("step %q (%s)", strings.Join(append(append([]string(nil), st.Path...), st.Key), "/"), it.TaskID)
	}
	if it.TaskID == "" {
		who = who[:strings.LastIndex(who, " (")]
	}
	how := "ended " + it.Status
	switch api.State(it.Status) {
	case api.StateFailed:
		how = "failed"
	case api.StateTimedOut:
		how = "timed out"
	case api.StateCancelled, api.StateTerminated:
		how = "was " + it.Status
	}
	switch {
	case it.Error != nil && it.Error.Code != "":
		how += fmt.Sprintf(" with %s: %s", it.Error.Code, oneLine(it.Error.Message, 300))
	case it.Error != nil:
		how += ": " + oneLine(it.Error.Message, 300)
	case it.Output != "":
		how += ": " + oneLine(it.Output, 300)
	}
	return who + " " + how
}

func failedItems(env client.Envelope) int {
	n := 0
	for _, it := range env.Items {
		if it.Done && it.Status != string(api.StateCompleted) {
			n++
		}
	}
	return n
}

// fillDefaults gives tasks the caller's folder, and the request the depth
// the caller claims (caller.go: a call that starts work then proves it
// with cmd.depth) and its knobs.
func (cmd *command) fillDefaults(req *client.StartRequest) error {
	wd, err := cmd.io.dir()
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	for i := range req.Tasks {
		if req.Tasks[i].Cwd == "" {
			req.Tasks[i].Cwd = wd
		}
	}
	if req.Host == "" {
		req.Host = cmd.host
	}
	if req.Host == "auto" {
		h, err := os.Hostname()
		if err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, "--host auto: "+err.Error())
		}
		req.Host = h
	}
	if req.Depth, err = claimedDepth(cmd.io.getenv); err != nil {
		return err
	}
	req.Knobs, err = profiles.CallerKnobs(cmd.io.getenv)
	return err
}

func (cmd *command) readJSON(path string, v any) error {
	var r io.Reader = cmd.io.In
	if path != "-" {
		if !filepath.IsAbs(path) && cmd.io.Dir != "" {
			path = filepath.Join(cmd.io.Dir, path)
		}
		f, err := os.Open(path)
		if err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	dec := json.NewDecoder(io.LimitReader(r, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "request: "+err.Error())
	}
	return nil
}

// maxRequestBytes bounds a JSON request: 16 prompts with files named, not
// inlined, stay far below it; the bound keeps a runaway pipe out.
const maxRequestBytes = 16 << 20

// follow waits for id, drawing its progress, and prints the end.
func (cmd *command) follow(ctx context.Context, c *client.Client, id string, timeout time.Duration) error {
	var live *liveView
	if !cmd.asJSON {
		live = newLiveView(cmd.io.Out, cmd.io.terminal())
	}
	env, err := c.Follow(ctx, id, timeout, func(env client.Envelope) {
		if live != nil {
			live.update(env, c.CurrentTime())
		}
	})
	if err != nil {
		return err
	}
	if live != nil {
		live.clear()
	}
	return cmd.finish(env, func(env client.Envelope) { printTree(cmd.io.Out, env, false, c.CurrentTime()) })
}

// followLines is `wait --json --progress`: JSON lines a program reads as
// they come, the last one the final envelope.
func (cmd *command) followLines(ctx context.Context, c *client.Client, id string, timeout time.Duration) error {
	cmd.compact = true
	enc := json.NewEncoder(cmd.io.Out)
	var last string
	env, err := c.Follow(ctx, id, timeout, func(env client.Envelope) {
		env.Op = "progress"
		b, err := json.Marshal(env)
		if err != nil || string(b) == last {
			return
		}
		last = string(b)
		_ = enc.Encode(env)
	})
	if err != nil {
		return err
	}
	return cmd.finish(env, nil)
}

func (cmd *command) needIDs() ([]string, error) {
	if len(cmd.args) == 0 {
		return nil, errcode.Errorf(errcode.InvalidInput, "a task or session ID is required: subagents %s ID...", cmd.verb)
	}
	return cmd.args, nil
}

// finishQuiet prints env; a status or cancel answer is not itself a
// failure, whatever state the tasks are in.
func (cmd *command) finishQuiet(env client.Envelope, print func(client.Envelope)) error {
	if cmd.asJSON {
		return cmd.printJSON(env)
	}
	print(env)
	return nil
}

// combine merges the answers for several IDs (the task contract's `ids`) into one
// envelope: all items, done when every one is. A cancel's answer goes on
// each item of its ID; the envelope's says whether any was applied.
func combine(op string, envs []client.Envelope) client.Envelope {
	if len(envs) == 1 {
		return envs[0]
	}
	out := client.Envelope{ContractVersion: client.ContractVersion, Op: op, Backend: client.Backend, Done: true, Items: []client.Item{}}
	usage := api.Usage{}
	for _, e := range envs {
		out.Done = out.Done && e.Done
		if e.CancelApplied != nil {
			applied := *e.CancelApplied || (out.CancelApplied != nil && *out.CancelApplied)
			out.CancelApplied = &applied
			for i := range e.Items {
				e.Items[i].CancelApplied, e.Items[i].PriorStatus = e.CancelApplied, e.PriorStatus
			}
		}
		out.Items = append(out.Items, e.Items...)
		if e.Usage != nil {
			usage = usage.Add(*e.Usage)
		}
		if e.WaitStatus != "" && out.WaitStatus != "timeout" && out.WaitStatus != "aborted" {
			out.WaitStatus = e.WaitStatus
		}
	}
	out.Usage = &usage
	out.TotalCount = new(len(out.Items))
	states := make([]api.State, len(out.Items))
	for i, it := range out.Items {
		switch states[i] = api.State(it.Status); {
		case !it.Done:
			states[i] = api.StateRunning
		case !states[i].Terminal():
			// Done without an ending state of its own: not completed.
			states[i] = api.StateFailed
		}
	}
	out.Status = string(collectionState(states))
	return out
}

// collectionState is the state of several tasks together: running while
// any has not ended (or waits to start), completed when all completed,
// failed otherwise. An empty state (no answer of its own) does not count.
func collectionState(states []api.State) api.State {
	out := api.StateCompleted
	for _, st := range states {
		switch {
		case st == "":
		case !st.Terminal():
			return api.StateRunning
		case st != api.StateCompleted:
			out = api.StateFailed
		}
	}
	return out
}

// seconds is how every verb reads a time flag: a whole number of seconds
// ("600", as a task's timeout has always been given) or a Go duration
// ("10m", "90s", as wait's); a turn's timeout must come to whole seconds.
type seconds struct{ d *time.Duration }

func (s seconds) String() string {
	if s.d == nil || *s.d == 0 {
		return ""
	}
	return s.d.String()
}

func (s seconds) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil {
		*s.d = time.Duration(n) * time.Second
	} else if d, err := time.ParseDuration(v); err == nil {
		*s.d = d
	} else {
		return fmt.Errorf("%q is neither a number of seconds nor a duration like 10m", v)
	}
	if *s.d < 0 {
		return fmt.Errorf("%q is negative", v)
	}
	return nil
}

// fileFlags collects --file values.
type fileFlags []api.FileSpec

func (f *fileFlags) String() string { return fmt.Sprint(len(*f)) }

func (f *fileFlags) Set(v string) error {
	spec := api.FileSpec{Path: v}
	if err := spec.Validate(); err != nil {
		return err
	}
	*f = append(*f, spec)
	return nil
}

// absPath makes a --cwd style path absolute against the current folder.
func absPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return abs
}
