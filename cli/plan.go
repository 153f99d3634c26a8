package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// planOptions are what `run` and `start` take to run a plan instead of
// tasks (docs/plans.md): --plan FILE or NAME, and --arg NAME=VALUE.
type planOptions struct {
	plan string
	args argFlags
}

func (o *planOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.plan, "plan", "", "run a plan: a plan file (.yaml, .yml, .json) or a saved plan's name (see subagents profiles)")
	fs.Var(&o.args, "arg", "a saved plan's argument, NAME=VALUE (repeatable)")
}

// argFlags collects --arg NAME=VALUE.
type argFlags map[string]string

func (a *argFlags) String() string { return "" }

func (a *argFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, not %q", v)
	}
	if *a == nil {
		*a = argFlags{}
	}
	(*a)[name] = value
	return nil
}

// isPlanFile says whether --plan names a file rather than a saved plan: a
// path (a separator in it) or a plan file's extension.
func isPlanFile(ref string) bool {
	switch filepath.Ext(ref) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return strings.ContainsRune(ref, os.PathSeparator)
}

// planRequest builds the request of `run --plan` from the flags.
func (o *planOptions) planRequest(cmd *command, s *startOptions) (client.PlanRequest, error) {
	req := client.PlanRequest{Args: o.args, Cwd: cmd.abs(s.cwd), Profile: s.agent, ParentSessionID: s.parentSession,
		Deliver: s.deliver, MaxConcurrency: s.maxConcurrency}
	if len(cmd.args) > 0 {
		return req, errcode.Errorf(errcode.InvalidInput, "a plan takes no prompt (%q): its steps hold the tasks; pass values with --arg NAME=VALUE", strings.Join(cmd.args, " "))
	}
	if isPlanFile(o.plan) {
		p, err := profiles.ReadPlanFile(cmd.abs(o.plan))
		if err != nil {
			return req, err
		}
		req.Plan = &p
	} else {
		req.Name = o.plan
	}
	return req, nil
}

// planInput reads a PlanRequest given as --input JSON: one whose top
// level has "plan" or "name" (a StartRequest has "tasks").
func planInput(raw json.RawMessage) (*client.PlanRequest, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, nil
	}
	_, hasPlan := probe["plan"]
	_, hasName := probe["name"]
	if !hasPlan && !hasName {
		return nil, nil
	}
	var req client.PlanRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, errcode.Errorf(errcode.InvalidInput, "input: %v", err)
	}
	if req.Plan != nil {
		// The strict reading: a misspelt field is an error, not ignored.
		p, err := api.ParsePlan(probe["plan"])
		if err != nil {
			return nil, err
		}
		req.Plan = &p
	}
	return &req, nil
}

// runPlan starts a plan, then, for `run`, follows it until it ends.
func runPlan(ctx context.Context, cmd *command, c *client.Client, req client.PlanRequest, s *startOptions) error {
	if req.Cwd == "" {
		dir, err := cmd.io.dir()
		if err != nil {
			return err
		}
		req.Cwd = dir
	}
	// The caller's host and depth, as a delegation's (fillDefaults).
	defaults := client.StartRequest{Host: req.Host}
	if err := cmd.fillDefaults(&defaults); err != nil {
		return err
	}
	req.Host, req.Knobs = defaults.Host, defaults.Knobs
	depth, err := cmd.depth(ctx, c, defaults.Depth)
	if err != nil {
		return err
	}
	req.Depth = depth
	env, err := c.StartPlan(ctx, req)
	if err != nil {
		return err
	}
	cmd.started(env.DelegationID)
	if cmd.verb == "start" || env.Done {
		return cmd.finish(env, cmd.printStarted)
	}
	return cmd.follow(ctx, c, env.DelegationID, s.waitTimeout)
}

// abs is path made absolute against the caller's folder (the service's
// socket runs verbs for callers elsewhere).
func (cmd *command) abs(path string) string {
	if path != "" && !filepath.IsAbs(path) && cmd.io.Dir != "" {
		return filepath.Join(cmd.io.Dir, path)
	}
	return absPath(path)
}

// resumeOptions are `resume PLAN_ID [--plan FILE | --input FILE] [--wait]`.
type resumeOptions struct {
	plan, input string
	wait        bool
	args        argFlags
}

func (o *resumeOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.plan, "plan", "", "a plan file whose steps replace the plan's (a changed step runs again, and so does every step after it)")
	fs.StringVar(&o.input, "input", "", `read {"plan": {...}} as JSON from this file, or - for stdin (what --plan gives)`)
	fs.BoolVar(&o.wait, "wait", false, "follow the plan until it ends, as run does")
	fs.Var(&o.args, "arg", "with --plan: an argument's new value, NAME=VALUE (repeatable; the others keep the values the plan ran with)")
}

func (o *resumeOptions) readsStdin() bool { return o.input == "-" }

func (o *resumeOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	if len(cmd.args) != 1 {
		return errcode.New(errcode.InvalidInput, "resume takes one plan ID: subagents resume [--plan FILE] [--wait] PLAN_ID")
	}
	var plan *api.Plan
	if o.input != "" {
		var req struct {
			Plan json.RawMessage   `json:"plan"`
			Args map[string]string `json:"args"`
		}
		if err := cmd.readJSON(o.input, &req); err != nil {
			return err
		}
		for k, v := range req.Args {
			if err := o.args.Set(k + "=" + v); err != nil {
				return err
			}
		}
		if len(req.Plan) > 0 && string(req.Plan) != "null" {
			p, err := api.ParsePlan(req.Plan)
			if err != nil {
				return err
			}
			plan = &p
		}
	}
	if o.plan != "" {
		p, err := profiles.ReadPlanFile(cmd.abs(o.plan))
		if err != nil {
			return err
		}
		plan = &p
	}
	// The new run is the caller's, as a start's: its proven depth, its knobs.
	var defaults client.StartRequest
	if err := cmd.fillDefaults(&defaults); err != nil {
		return err
	}
	depth, err := cmd.depth(ctx, c, defaults.Depth)
	if err != nil {
		return err
	}
	env, err := c.ResumePlan(ctx, cmd.args[0], plan, o.args, client.PlanCaller{Depth: depth, Knobs: defaults.Knobs})
	if err != nil {
		return err
	}
	cmd.started(env.DelegationID)
	if !o.wait || env.Done {
		return cmd.finish(env, cmd.printStarted)
	}
	return cmd.follow(ctx, c, env.DelegationID, 0)
}
