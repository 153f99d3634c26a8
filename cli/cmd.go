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
)

// Verbs lists the client verbs of the subagents command.
var Verbs = []string{"run", "start", "status", "wait", "send", "cancel", "list", "output", "transcript", "ack", "profiles", "serve"}

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
	cmd := &command{verb: verb, io: stdio, compact: stdio.Compact}
	if dial == nil {
		dial = (*command).dialOwn
	}
	fs := flag.NewFlagSet("subagents "+verb, flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	cmd.common(fs)
	run, ok := map[string]func(*flag.FlagSet) func(context.Context, *client.Client) error{
		"run": cmd.startFlags, "start": cmd.startFlags, "status": cmd.idsFlags, "wait": cmd.waitFlags,
		"send": cmd.sendFlags, "cancel": cmd.idsFlags, "list": cmd.listFlags, "output": cmd.outputFlags,
		"transcript": cmd.idsFlags, "ack": cmd.ackFlags,
	}[verb]
	if !ok {
		// A program that asked for an envelope gets one, with the code.
		cmd.asJSON = WantsJSON(rest)
		return cmd.fail(errcode.Errorf(errcode.InvalidInput, "unknown command %q", verb))
	}
	do := run(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cmd.fail(errcode.Wrap(errcode.InvalidInput, err, err.Error()))
	}
	cmd.args = fs.Args()
	c, closeFn, err := dial(cmd, ctx)
	if err != nil {
		return cmd.fail(limited(ctx, err))
	}
	defer closeFn()
	return cmd.fail(limited(ctx, do(ctx, c)))
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
	verb      string
	io        IO
	args      []string
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
	case env.WaitStatus == "timeout" || env.WaitStatus == "aborted":
		return fmt.Errorf("%s %s: %w", cmd.verb, env.WaitStatus, errcode.ErrPending)
	case env.Done && failedItems(env) > 0:
		return errcode.Wrap(errcode.Failed, errTaskFailed, fmt.Sprintf("%d of %d tasks did not complete", failedItems(env), len(env.Items)))
	}
	return nil
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

// startFlags: `run` and `start`. Tasks come from --input (JSON, a
// StartRequest) or from flags and the prompt words.
func (cmd *command) startFlags(fs *flag.FlagSet) func(context.Context, *client.Client) error {
	var (
		input, agent, name, desc, cwd, model, resume, parent string
		concurrency                                          int
		deliver                                              bool
		files                                                fileFlags
		timeout, waitFor                                     time.Duration
	)
	fs.StringVar(&input, "input", "", "read the request as JSON from this file, or - for stdin")
	fs.StringVar(&agent, "agent", "", "profile to run the task with (default: pi's own defaults)")
	fs.StringVar(&name, "name", "", "task name (default: the description or the profile)")
	fs.StringVar(&desc, "description", "", "short label of the task")
	fs.StringVar(&cwd, "cwd", "", "absolute folder the task runs in (default: the current folder)")
	fs.StringVar(&model, "model", "", "provider/model for the child (default: the profile's)")
	fs.StringVar(&resume, "resume", "", "continue this session ID instead of starting a new one")
	fs.StringVar(&parent, "parent-session", "", "pi session ID that delegates (for list --parent-session and delivery)")
	fs.BoolVar(&deliver, "deliver", false, "keep the delegation open until the parent acknowledges its results (ack)")
	fs.Var(seconds{&timeout}, "timeout", "how long a turn may run: seconds or a duration like 10m (default 600 s)")
	fs.IntVar(&concurrency, "max-concurrency", 0, "tasks run at once (default 4, at most 16)")
	fs.Var(&files, "file", "file to put before the prompt, relative to --cwd (repeatable)")
	fs.Var(seconds{&waitFor}, "wait-timeout", "run: stop waiting after this long (the tasks go on): seconds or a duration like 10m")
	return func(ctx context.Context, c *client.Client) error {
		if timeout%time.Second != 0 {
			return errcode.Errorf(errcode.InvalidInput, "--timeout %s: a turn's timeout is whole seconds", timeout)
		}
		var req client.StartRequest
		if input != "" {
			if err := cmd.readJSON(input, &req); err != nil {
				return err
			}
		} else {
			prompt := strings.TrimSpace(strings.Join(cmd.args, " "))
			if prompt == "" {
				return errcode.New(errcode.InvalidInput, "a prompt is required: subagents "+cmd.verb+" [flags] PROMPT, or --input FILE")
			}
			req = client.StartRequest{Tasks: []api.TaskSpec{{
				Name: name, Description: desc, Prompt: prompt, Profile: agent, Cwd: absPath(cwd), TimeoutSeconds: int(timeout / time.Second),
				Model: model, Resume: resume, Files: files,
			}}, ParentSessionID: parent, Deliver: deliver, MaxConcurrency: concurrency}
		}
		if err := cmd.fillDefaults(&req); err != nil {
			return err
		}
		env, err := c.Start(ctx, req)
		if err != nil {
			return err
		}
		if cmd.verb == "start" {
			return cmd.finish(env, cmd.printStarted)
		}
		return cmd.follow(ctx, c, env.DelegationID, waitFor)
	}
}

// fillDefaults gives tasks the caller's folder and the request its depth.
func (cmd *command) fillDefaults(req *client.StartRequest) error {
	wd, err := os.Getwd()
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
	if d := cmd.io.getenv("PI_SUBAGENT_DEPTH"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return errcode.Errorf(errcode.InvalidInput, "PI_SUBAGENT_DEPTH must be a number, not %q", d)
		}
		req.Depth = n
	} else if cmd.io.getenv("PI_SUBAGENT_CHILD") == "1" {
		req.Depth = 1
	}
	return nil
}

func (cmd *command) readJSON(path string, v any) error {
	var r io.Reader = cmd.io.In
	if path != "-" {
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
	return cmd.finish(env, func(env client.Envelope) { printTree(cmd.io.Out, env, false) })
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

// idsFlags: `status`, `cancel`, `transcript`.
func (cmd *command) idsFlags(*flag.FlagSet) func(context.Context, *client.Client) error {
	return func(ctx context.Context, c *client.Client) error {
		ids, err := cmd.needIDs()
		if err != nil {
			return err
		}
		if cmd.verb == "transcript" {
			if len(ids) != 1 {
				return errcode.New(errcode.InvalidInput, "transcript takes one session ID")
			}
			env, err := c.Transcript(ctx, ids[0])
			if err != nil {
				return err
			}
			return cmd.finish(env, func(env client.Envelope) { _, _ = fmt.Fprintln(cmd.io.Out, env.Text) })
		}
		var envs []client.Envelope
		for _, id := range ids {
			var env client.Envelope
			if cmd.verb == "cancel" {
				env, err = c.Cancel(ctx, id)
			} else {
				env, err = c.Status(ctx, id)
			}
			if err != nil {
				return err
			}
			envs = append(envs, env)
		}
		env := combine(cmd.verb, envs)
		if cmd.verb == "cancel" {
			return cmd.finishQuiet(env, cmd.printCancel)
		}
		return cmd.finishQuiet(env, func(env client.Envelope) { printTree(cmd.io.Out, env, false) })
	}
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
	out.Status = string(api.StateCompleted)
	for _, it := range out.Items {
		switch {
		case !it.Done:
			out.Status = string(api.StateRunning)
		case it.Status != string(api.StateCompleted) && out.Status == string(api.StateCompleted):
			out.Status = string(api.StateFailed)
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

// waitFlags: `wait ID... [--timeout D | --timeout-ms N]`.
func (cmd *command) waitFlags(fs *flag.FlagSet) func(context.Context, *client.Client) error {
	var timeout time.Duration
	var timeoutMS int
	fs.Var(seconds{&timeout}, "timeout", "stop waiting after this long (the tasks go on; exit code 4): seconds or a duration like 30s")
	fs.IntVar(&timeoutMS, "timeout-ms", 0, "the same in milliseconds (the task contract's timeout_ms)")
	progress := fs.Bool("progress", false, "with --json: one line per status change (op \"progress\"), then the final envelope on one line")
	return func(ctx context.Context, c *client.Client) error {
		ids, err := cmd.needIDs()
		if err != nil {
			return err
		}
		if timeoutMS > 0 {
			timeout = time.Duration(timeoutMS) * time.Millisecond
		}
		if len(ids) == 1 && !cmd.asJSON {
			return cmd.follow(ctx, c, ids[0], timeout)
		}
		if *progress {
			if len(ids) != 1 || !cmd.asJSON {
				return errcode.New(errcode.InvalidInput, "--progress needs --json and one ID")
			}
			return cmd.followLines(ctx, c, ids[0], timeout)
		}
		var deadline time.Time
		if timeout > 0 {
			deadline = time.Now().Add(timeout)
		}
		var envs []client.Envelope
		for _, id := range ids {
			left := time.Duration(0)
			if !deadline.IsZero() {
				left = max(time.Until(deadline), time.Millisecond)
			}
			env, err := c.Wait(ctx, id, left)
			if err != nil {
				return err
			}
			envs = append(envs, env)
		}
		return cmd.finish(combine("wait", envs), func(env client.Envelope) { printTree(cmd.io.Out, env, false) })
	}
}

// sendFlags: `send ID PROMPT` or `send --input -` (a SendRequest).
func (cmd *command) sendFlags(fs *flag.FlagSet) func(context.Context, *client.Client) error {
	var input, parent, agent string
	var deliver, wait bool
	var files fileFlags
	fs.StringVar(&input, "input", "", "read the request as JSON from this file, or - for stdin")
	fs.StringVar(&parent, "parent-session", "", "pi session ID that sends (delivery of the result)")
	fs.StringVar(&agent, "agent", "", "the agent the session runs; another is refused (the sessions contract: a session is its agent's)")
	fs.BoolVar(&deliver, "deliver", false, "keep the resuming delegation open until the parent acknowledges")
	fs.BoolVar(&wait, "wait", false, "wait for the turn to end and print its result")
	fs.Var(&files, "file", "file to put before the prompt (repeatable)")
	return func(ctx context.Context, c *client.Client) error {
		var req client.SendRequest
		if input != "" {
			if err := cmd.readJSON(input, &req); err != nil {
				return err
			}
		} else {
			if len(cmd.args) < 2 {
				return errcode.New(errcode.InvalidInput, "usage: subagents send ID PROMPT, or --input FILE")
			}
			req = client.SendRequest{TaskID: cmd.args[0], Prompt: strings.Join(cmd.args[1:], " "), Files: files, ParentSessionID: parent, Deliver: deliver, Agent: agent}
		}
		env, err := c.Send(ctx, req)
		if err != nil {
			return err
		}
		if !wait {
			return cmd.finishQuiet(env, cmd.printStarted)
		}
		id := env.DelegationID
		if id == "" {
			id = req.TaskID
		}
		if cmd.asJSON {
			done, err := c.Wait(ctx, id, 0)
			if err != nil {
				return err
			}
			done.Op = "send"
			return cmd.finish(done, nil)
		}
		return cmd.follow(ctx, c, id, 0)
	}
}

// listFlags: `list [--status S] [--agent A] [--parent-session P] [--cwd D]`.
func (cmd *command) listFlags(fs *flag.FlagSet) func(context.Context, *client.Client) error {
	var f client.ListFilter
	fs.StringVar(&f.Status, "status", "", "only runs in this state (running, waiting_for_input, completed, failed, cancelled, timed_out)")
	fs.StringVar(&f.Agent, "agent", "", "only sessions of this profile")
	fs.StringVar(&f.ParentSessionID, "parent-session", "", "only what this pi session started")
	fs.StringVar(&f.Cwd, "cwd", "", "only tasks that ran in this folder")
	fs.StringVar(&f.Kind, "kind", "", "session or delegation (default: both)")
	fs.BoolVar(&f.Open, "open", false, "only workflows that are still open")
	fs.IntVar(&f.Limit, "limit", 0, "at most this many, newest first (default 100)")
	return func(ctx context.Context, c *client.Client) error {
		f.Cwd = absPath(f.Cwd)
		env, err := c.List(ctx, f)
		if err != nil {
			return err
		}
		return cmd.finishQuiet(env, cmd.printList)
	}
}

// outputFlags: `output ID [--full]`.
func (cmd *command) outputFlags(fs *flag.FlagSet) func(context.Context, *client.Client) error {
	var full bool
	var from int
	fs.BoolVar(&full, "full", false, "the whole output, not cut to the output cap (read on the worker)")
	fs.IntVar(&from, "from", -1, "with --full: one page from this character on (next_from says where the next begins)")
	return func(ctx context.Context, c *client.Client) error {
		ids, err := cmd.needIDs()
		if err != nil {
			return err
		}
		if len(ids) != 1 {
			return errcode.New(errcode.InvalidInput, "output takes one session ID")
		}
		if from >= 0 && !full {
			return errcode.New(errcode.InvalidInput, "--from pages the full output: give --full too")
		}
		env, err := c.OutputFrom(ctx, ids[0], full, from)
		if err != nil {
			return err
		}
		return cmd.finishQuiet(env, func(env client.Envelope) { _, _ = fmt.Fprintln(cmd.io.Out, env.Text) })
	}
}

// ackFlags: `ack DELEGATION_ID [--by WHO]`.
func (cmd *command) ackFlags(fs *flag.FlagSet) func(context.Context, *client.Client) error {
	var by string
	fs.StringVar(&by, "by", "", "who received the results (recorded in the history)")
	return func(ctx context.Context, c *client.Client) error {
		ids, err := cmd.needIDs()
		if err != nil {
			return err
		}
		var envs []client.Envelope
		for _, id := range ids {
			env, err := c.Ack(ctx, id, by)
			if err != nil {
				return err
			}
			envs = append(envs, env)
		}
		return cmd.finishQuiet(combine("ack", envs), func(env client.Envelope) {
			for _, e := range envs {
				_, _ = fmt.Fprintf(cmd.io.Out, "%s: delivered=%v\n", e.DelegationID, e.Delivered)
			}
		})
	}
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
