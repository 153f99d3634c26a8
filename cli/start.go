package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// startOptions are `run` and `start`: the tasks come from --input (JSON, a
// StartRequest) or from the flags and the prompt words; `run` then follows
// the delegation until it ends.
type startOptions struct {
	input, agent, name, description, cwd, model, resume, parentSession string
	maxConcurrency                                                     int
	deliver                                                            bool
	files                                                              fileFlags
	timeout, waitTimeout, questionTimeout                              time.Duration
	plans                                                              planOptions
}

func (o *startOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.input, "input", "", "read the request as JSON from this file, or - for stdin")
	fs.StringVar(&o.agent, "agent", "", "profile to run the task with (default: pi's own defaults)")
	fs.StringVar(&o.name, "name", "", "task name (default: the description or the profile)")
	fs.StringVar(&o.description, "description", "", "short label of the task")
	fs.StringVar(&o.cwd, "cwd", "", "absolute folder the task runs in (default: the current folder)")
	fs.StringVar(&o.model, "model", "", "provider/model for the child (default: the profile's)")
	fs.StringVar(&o.resume, "resume", "", "continue this session ID instead of starting a new one")
	fs.StringVar(&o.parentSession, "parent-session", "", "pi session ID that delegates (for list --parent-session and delivery)")
	fs.BoolVar(&o.deliver, "deliver", false, "keep the delegation open until the parent acknowledges its results (ack)")
	fs.Var(seconds{&o.timeout}, "timeout", "how long a turn may run: seconds or a duration like 10m (default 600 s)")
	fs.Var(seconds{&o.questionTimeout}, "question-timeout", "how long a question of the child waits for its answer: seconds or a duration like 30m (default: the profile's, else 1h)")
	fs.IntVar(&o.maxConcurrency, "max-concurrency", 0, "tasks run at once (default 4, at most 16)")
	fs.Var(&o.files, "file", "file to put before the prompt, relative to --cwd (repeatable)")
	fs.Var(seconds{&o.waitTimeout}, "wait-timeout", "run: stop waiting after this long (the tasks go on): seconds or a duration like 10m")
	o.plans.register(fs)
}

func (o *startOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	if o.timeout%time.Second != 0 {
		return errcode.Errorf(errcode.InvalidInput, "--timeout %s: a turn's timeout is whole seconds", o.timeout)
	}
	if o.questionTimeout%time.Second != 0 {
		return errcode.Errorf(errcode.InvalidInput, "--question-timeout %s: a question's timeout is whole seconds", o.questionTimeout)
	}
	if o.plans.plan != "" {
		req, err := o.plans.planRequest(cmd, o)
		if err != nil {
			return err
		}
		return runPlan(ctx, cmd, c, req, o)
	}
	var req client.StartRequest
	if o.input != "" {
		var raw json.RawMessage
		if err := cmd.readJSON(o.input, &raw); err != nil {
			return err
		}
		plan, err := planInput(raw)
		if err != nil {
			return err
		}
		if plan != nil {
			return runPlan(ctx, cmd, c, *plan, o)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, "request: "+err.Error())
		}
	} else {
		prompt := strings.TrimSpace(strings.Join(cmd.args, " "))
		if prompt == "" {
			return errcode.New(errcode.InvalidInput, "a prompt is required: subagents "+cmd.verb+" [flags] PROMPT, or --input FILE")
		}
		req = client.StartRequest{Tasks: []api.TaskSpec{{
			Name: o.name, Description: o.description, Prompt: prompt, Profile: o.agent, Cwd: absPath(o.cwd),
			TimeoutSeconds: int(o.timeout / time.Second), Model: o.model, Resume: o.resume, Files: o.files,
			QuestionTimeoutSeconds: int(o.questionTimeout / time.Second),
		}}, ParentSessionID: o.parentSession, Deliver: o.deliver, MaxConcurrency: o.maxConcurrency}
	}
	if err := cmd.fillDefaults(&req); err != nil {
		return err
	}
	depth, err := cmd.depth(ctx, c, req.Depth)
	if err != nil {
		return err
	}
	req.Depth = depth
	env, err := c.Start(ctx, req)
	if err != nil {
		return err
	}
	cmd.started(env.DelegationID)
	if cmd.verb == "start" {
		return cmd.finish(env, cmd.printStarted)
	}
	return cmd.follow(ctx, c, env.DelegationID, o.waitTimeout)
}

func (o *startOptions) readsStdin() bool { return o.input == "-" }
