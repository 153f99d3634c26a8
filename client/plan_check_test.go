package client

import (
	"os"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// TestCheckPlan: a plan request is checked whole with no service, agents
// included, as a start (or a schedule's create) needs before anything runs.
func TestCheckPlan(t *testing.T) {
	t.Setenv("PI_CODING_AGENT_DIR", t.TempDir())
	cwd := t.TempDir()
	here, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]api.PlanArg{"x": {Required: true}}
	for _, tc := range []struct {
		name string
		req  PlanRequest
		code errcode.Code // "" accepted
		text string
	}{
		{"built-in agents", PlanRequest{Plan: &api.Plan{Steps: []api.Step{{Key: "a", Agent: "scout", Task: "x"}, {Key: "b", Continue: "a", Task: "y"}}}}, "", ""},
		{"an unknown agent names its step", PlanRequest{Plan: &api.Plan{Steps: []api.Step{{Key: "a", Agent: "scout", Task: "x"}, {Key: "b", Agent: "nosuchagent", Task: "y"}}}},
			errcode.UnknownAgent, `step "b": Unknown profile: "nosuchagent"`},
		{"the plan's default agent", PlanRequest{Profile: "nosuchagent", Plan: &api.Plan{Steps: []api.Step{{Key: "a", Task: "x"}}}}, errcode.UnknownAgent, `step "a"`},
		{"this machine's host", PlanRequest{Host: here, Plan: &api.Plan{Steps: []api.Step{{Key: "a", Agent: "nosuchagent", Task: "x"}}}}, errcode.UnknownAgent, `step "a"`},
		{"another machine's worker resolves its own agents", PlanRequest{Host: here + "-elsewhere", Plan: &api.Plan{Steps: []api.Step{{Key: "a", Agent: "nosuchagent", Task: "x"}}}}, "", ""},
		{"an argument it does not take", PlanRequest{Args: map[string]string{"x": "1", "nosucharg": "1"}, Plan: &api.Plan{Args: args, Steps: []api.Step{{Key: "a", Agent: "scout", Task: "{args.x}"}}}},
			errcode.InvalidInput, `takes no argument "nosucharg"`},
		{"a required argument missing", PlanRequest{Plan: &api.Plan{Args: args, Steps: []api.Step{{Key: "a", Agent: "scout", Task: "{args.x}"}}}}, errcode.InvalidInput, `argument "x" is required`},
		{"a misspelt reference", PlanRequest{Plan: &api.Plan{Steps: []api.Step{{Key: "a", Agent: "scout", Task: "x"}, {Key: "b", Agent: "scout", Task: "{steps.a.bogus}"}}}}, errcode.InvalidInput, "is not a reference"},
		{"a saved plan that is not there", PlanRequest{Name: "nosuchplan"}, errcode.InvalidInput, `Unknown plan: "nosuchplan"`},
		{"a child below the limit", PlanRequest{Depth: api.DefaultMaxDepth - 1, Plan: &api.Plan{Steps: []api.Step{{Key: "a", Agent: "scout", Task: "x"}}}}, "", ""},
		{"a caller at the limit", PlanRequest{Depth: api.DefaultMaxDepth, Plan: &api.Plan{Steps: []api.Step{{Key: "a", Agent: "scout", Task: "x"}}}},
			errcode.DepthExceeded, "reached the limit of 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Cwd = cwd
			in, err := CheckPlan(tc.req)
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.code == "":
				if in.Version != api.PlanVersion {
					t.Fatalf("version %d", in.Version)
				}
			case err == nil:
				t.Fatalf("accepted, want %s", tc.code)
			case errcode.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.text):
				t.Fatalf("error %s %q, want %s with %q", errcode.CodeOf(err), err, tc.code, tc.text)
			}
		})
	}
}

// TestCheckPlanKeepsArgumentsForTheRun: the tasks keep {args.NAME}, and the
// input carries every argument's value, for the run's one pass (and the
// gate's environment: its command holds a reference to the value).
func TestCheckPlanKeepsArgumentsForTheRun(t *testing.T) {
	t.Setenv("PI_CODING_AGENT_DIR", t.TempDir())
	p := api.Plan{Args: map[string]api.PlanArg{"x": {}, "y": {Default: "why"}}, Steps: []api.Step{{Key: "a", Agent: "scout", Task: "do {args.x} {args.y}", Gate: &api.Gate{Command: "test {args.y}"}}}}
	in, err := CheckPlan(PlanRequest{Plan: &p, Args: map[string]string{"x": "{round}"}, Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Plan.Steps[0]; got.Task != "do {args.x} {args.y}" || got.Gate.Command != `test "$SUBAGENTS_ARG_y"` {
		t.Fatalf("task %q gate %q", got.Task, got.Gate.Command)
	}
	if in.Args["x"] != "{round}" || in.Args["y"] != "why" {
		t.Fatalf("args %v", in.Args)
	}
}
