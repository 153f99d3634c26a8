package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

func task(key, agent, text string) Step { return Step{Key: key, Agent: agent, Task: text} }

func TestValidatePlan(t *testing.T) {
	many := make([]Step, MaxPlanSteps+1)
	for i := range many {
		many[i] = task(fmt.Sprintf("s%d", i), "scout", "x")
	}
	loop := func(max int, until Until, steps ...Step) Step {
		return Step{Key: "fixes", Loop: &Loop{Max: max, Until: until}, Steps: steps}
	}
	for _, tc := range []struct {
		name string
		plan Plan
		want string // "" valid, else a fragment of the error
	}{
		{"a sequence using an earlier step", Plan{Steps: []Step{task("scout", "scout", "map"), task("impl", "implementer", "do {steps.scout.output}")}}, ""},
		{"keys may be left out", Plan{Steps: []Step{{Agent: "scout", Task: "a"}, {Agent: "scout", Task: "b {steps.step1.output}"}}}, ""},
		{"parallel then a merge", Plan{Steps: []Step{{Parallel: []Step{task("a", "reviewer", "x"), task("b", "reviewer", "y")}}, task("merge", "reviewer", "{steps.a.output} {steps.b.output}")}}, ""},
		{"lanes", Plan{Steps: []Step{{Parallel: []Step{
			{Key: "api", Steps: []Step{task("api-writer", "implementer", "w"), task("api-review", "reviewer", "{steps.api-writer.output}")}},
			{Key: "ui", Steps: []Step{task("ui-writer", "implementer", "w"), task("ui-review", "reviewer", "{steps.ui-writer.output}")}},
		}}}}, ""},
		{"a review loop", Plan{Steps: []Step{task("impl", "implementer", "x"), loop(3, Until{Step: "review", Verdict: "clean"},
			Step{Key: "review", Agent: "reviewer", Task: "round {round}: {steps.impl.output}", Verdicts: []string{"clean", "changes"}},
			Step{Key: "fix", Continue: "impl", Task: "fix {steps.review.output}"})}}, ""},
		{"no steps", Plan{}, "at least one step"},
		{"a reference to a missing step", Plan{Steps: []Step{task("a", "scout", "{steps.nope.output}")}}, `refers to step "nope", which the plan does not have`},
		{"a cycle", Plan{Steps: []Step{{Parallel: []Step{task("a", "scout", "{steps.b.output}"), task("b", "scout", "{steps.a.output}")}}}}, "a cycle: a → b → a"},
		{"a forward reference", Plan{Steps: []Step{task("a", "scout", "{steps.b.output}"), task("b", "scout", "x")}}, "does not run before it"},
		{"a sibling in parallel", Plan{Steps: []Step{{Parallel: []Step{task("a", "scout", "x"), task("b", "scout", "{steps.a.output}")}}}}, "does not run before it"},
		{"too many steps", Plan{Steps: many}, "a plan holds at most 64"},
		{"duplicate keys", Plan{Steps: []Step{task("a", "scout", "x"), task("a", "scout", "y")}}, "two steps have this key"},
		{"a bad key", Plan{Steps: []Step{task("Scout", "scout", "x")}}, "lower-case"},
		{"an empty task", Plan{Steps: []Step{{Key: "a", Agent: "scout"}}}, "task must not be empty"},
		{"a group with task fields", Plan{Steps: []Step{{Key: "g", Model: "x/y", Steps: []Step{task("a", "scout", "x")}}}}, "a group takes no task fields"},
		{"both steps and parallel", Plan{Steps: []Step{{Key: "g", Steps: []Step{task("a", "scout", "x")}, Parallel: []Step{task("b", "scout", "x")}}}}, "not both"},
		{"a loop without until", Plan{Steps: []Step{loop(3, Until{}, task("a", "scout", "x"))}}, "a loop needs until"},
		{"a loop whose until is outside", Plan{Steps: []Step{task("b", "scout", "x"), loop(3, Until{Step: "b", Verdict: "ok"}, task("a", "scout", "x"))}}, "not among the loop's own steps"},
		{"a loop too long", Plan{Steps: []Step{loop(MaxLoopRounds+1, Until{Step: "a", Verdict: "ok"}, task("a", "scout", "x"))}}, "loop max must be"},
		{"round outside a loop", Plan{Steps: []Step{task("a", "scout", "round {round}")}}, "in no loop"},
		{"a bad context", Plan{Steps: []Step{{Key: "a", Agent: "scout", Task: "x", Context: "parent"}}}, "context must be fresh or fork"},
		{"an empty gate", Plan{Steps: []Step{{Key: "a", Agent: "scout", Task: "x", Gate: &Gate{}}}}, "gate command must not be empty"},
		{"a negative budget", Plan{Budget: &Budget{Tokens: -1}, Steps: []Step{task("a", "scout", "x")}}, "must not be negative"},
		{"a continue of another agent", Plan{Steps: []Step{task("a", "scout", "x"), {Key: "b", Agent: "reviewer", Continue: "a", Task: "y"}}}, "keeps its agent"},
		{"a loop in a loop", Plan{Steps: []Step{loop(2, Until{Step: "b", Verdict: "ok"}, task("b", "scout", "x"), Step{Key: "inner", Loop: &Loop{Until: Until{Step: "c", Verdict: "ok"}}, Steps: []Step{task("c", "scout", "y")}})}}, "a loop inside a loop"},
		{"until status ERROR", Plan{Steps: []Step{loop(2, Until{Step: "a", Status: "ERROR"}, task("a", "scout", "x"))}}, "can only be SUCCESS"},
		{"a key that collides with a step's own", Plan{Steps: []Step{{Agent: "scout", Task: "x"}, task("step1", "scout", "y")}}, "two steps have this key"},
		{"a continue with a model", Plan{Steps: []Step{task("a", "scout", "x"), {Key: "b", Continue: "a", Task: "y", Model: "p/m"}}}, "runs in that session as it was started"},
		{"a verdict of two words", Plan{Steps: []Step{{Key: "a", Agent: "scout", Task: "x", Verdicts: []string{"all good"}}}}, "one word"},
		{"a misspelt step field", Plan{Steps: []Step{task("s1", "scout", "x"), task("s2", "scout", "use {steps.s1.bogus}")}}, "{steps.s1.bogus} is not a reference"},
		{"a step reference without a field", Plan{Steps: []Step{task("s1", "scout", "x"), task("s2", "scout", "use {steps.s1}")}}, "{steps.s1} is not a reference"},
		{"an argument not declared", Plan{Steps: []Step{task("s1", "scout", "for {args.who}")}}, "does not declare under args"},
		{"a reference in another case", Plan{Steps: []Step{task("s1", "scout", "x"), task("s2", "scout", "use {Steps.s1.output}")}}, "{Steps.s1.output} is not a reference"},
		{"a reference with a space", Plan{Steps: []Step{task("s1", "scout", "x"), task("s2", "scout", "use { steps.s1.output}")}}, "{ steps.s1.output} is not a reference"},
		{"round with a space", Plan{Steps: []Step{loop(2, Until{Step: "a", Verdict: "ok"}, task("a", "scout", "round {round }"))}}, "{round } is not a reference"},
		{"an argument in another case", Plan{Args: map[string]PlanArg{"who": {}}, Steps: []Step{task("s1", "scout", "for {ARGS.who}")}}, "{ARGS.who} is not a reference"},
		{"a declared argument", Plan{Args: map[string]PlanArg{"who": {}}, Steps: []Step{task("s1", "scout", "for {args.who}")}}, ""},
		{"text in braces is not a reference", Plan{Steps: []Step{task("s1", "scout", `print {"steps": 1} and {steps of it}`)}}, ""},
		{"an until verdict the step may not give", Plan{Steps: []Step{loop(2, Until{Step: "review", Verdict: "approved"},
			Step{Key: "review", Agent: "reviewer", Task: "x", Verdicts: []string{"clean", "changes"}})}}, `waits for verdict "approved" of step "review", whose verdicts are clean, changes`},
		{"an until verdict in another case", Plan{Steps: []Step{loop(2, Until{Step: "review", Verdict: "Clean"},
			Step{Key: "review", Agent: "reviewer", Task: "x", Verdicts: []string{"clean", "changes"}})}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePlan(tc.plan)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q lacks %q", err, tc.want)
			case tc.want != "" && errcode.CodeOf(err) != errcode.InvalidInput:
				t.Fatalf("code %s, want INVALID_INPUT", errcode.CodeOf(err))
			}
		})
	}
}

// TestValidatePlanAsOf: a plan that started under an earlier version is
// checked as it was then, so that its history replays.
func TestValidatePlanAsOf(t *testing.T) {
	p := Plan{Steps: []Step{task("s1", "scout", "x"), task("s2", "scout", "use {steps.s1.bogus}")}}
	if err := ValidatePlanAsOf(p, 2); err != nil {
		t.Fatalf("version 2 accepted this plan: %v", err)
	}
	if err := ValidatePlanAsOf(p, 3); err == nil {
		t.Fatal("version 3 accepts a misspelt reference")
	}
	spaced := Plan{Steps: []Step{task("s1", "scout", "x"), task("s2", "scout", "use {Steps.s1.output} { steps.s1.output}")}}
	if err := ValidatePlanAsOf(spaced, 3); err != nil {
		t.Fatalf("version 3 accepted this plan: %v", err)
	}
	if err := ValidatePlanAsOf(spaced, 4); err == nil {
		t.Fatal("version 4 accepts a reference in another case")
	}
}

func TestParsePlanRefusesUnknownFields(t *testing.T) {
	_, err := ParsePlan([]byte(`{"steps":[{"paralel":[{"agent":"a","task":"x"}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "paralel") {
		t.Fatalf("err = %v, want one naming the unknown field", err)
	}
}

func TestExpandTask(t *testing.T) {
	views := map[string]StepView{"scout": {Output: "found {round} and {args.who}", Status: "completed", Verdict: "", Session: "plan-1-scout"}}
	lookup := func(k string) (StepView, bool) { v, ok := views[k]; return v, ok }
	for _, tc := range []struct {
		name, text string
		args       map[string]string
		want       string
	}{
		{"step references and the round", "Use {steps.scout.output} ({steps.scout.status}, {steps.scout.session}) in round {round}; keep {other} and {steps.x.y}", nil,
			"Use found {round} and {args.who} (completed, plan-1-scout) in round 2; keep {other} and {steps.x.y}"},
		{"an argument's value is put in literally, once", "Change {args.change} (round {round})",
			map[string]string{"change": "{steps.scout.output} {steps.scout.status} {round} {args.who}", "who": "me"},
			"Change {steps.scout.output} {steps.scout.status} {round} {args.who} (round 2)"},
		{"a plan bound before version 3 keeps its text", "Change {args.change}", nil, "Change {args.change}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExpandTask(tc.text, 2, tc.args, lookup); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestBindPlanArgs(t *testing.T) {
	p := Plan{Name: "review", Args: map[string]PlanArg{"target": {Required: true, Description: "what to review"}, "depth": {Default: "quick"}},
		Steps: []Step{{Key: "a", Agent: "reviewer", Task: "Review {args.target} ({args.depth}) using {steps.x.output}", Gate: &Gate{Command: "test -e {args.target}"}}}}
	bound, err := BindPlanArgs(p, map[string]string{"target": "api/"})
	if err != nil {
		t.Fatal(err)
	}
	// The run fills the task in, in one pass with its step references.
	if got := bound.Steps[0].Task; got != p.Steps[0].Task {
		t.Fatalf("task %q", got)
	}
	if values, err := PlanArgValues(p, map[string]string{"target": "api/"}); err != nil || values["target"] != "api/" || values["depth"] != "quick" || len(values) != 2 {
		t.Fatalf("values %v, %v", values, err)
	}
	if got := bound.Steps[0].Gate.Command; got != `test -e "$SUBAGENTS_ARG_target"` {
		t.Fatalf("gate %q", got)
	}
	if p.Steps[0].Gate.Command != "test -e {args.target}" {
		t.Fatal("binding changed the original plan")
	}
	for _, tc := range []struct {
		args map[string]string
		want string
	}{
		{nil, `argument "target" is required`},
		{map[string]string{"target": "x", "nope": "y"}, `takes no argument "nope"`},
	} {
		if _, err := BindPlanArgs(p, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("args %v: err %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := BindPlanArgs(Plan{Steps: []Step{task("a", "s", "{args.x}")}}, nil); err == nil || !strings.Contains(err.Error(), "does not declare") {
		t.Fatalf("undeclared arg: %v", err)
	}
}

// TestBindPlanArgsGateAndCwd: a value never becomes shell text in a gate
// command, and never takes a step's folder out of the plan's.
func TestBindPlanArgsGateAndCwd(t *testing.T) {
	p := Plan{Name: "p", Args: map[string]PlanArg{"x": {}, "dir": {Default: "sub"}, "a-b": {}},
		Steps: []Step{{Key: "a", Agent: "s", Task: "t", Cwd: "{args.dir}", Gate: &Gate{Command: "echo {args.x} {args.a-b}"}}}}
	evil := `1; touch pwned; $(touch pwned2)`
	bound, err := BindPlanArgs(p, map[string]string{"x": evil, "a-b": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if got := bound.Steps[0].Gate.Command; got != `echo "$SUBAGENTS_ARG_x" "$SUBAGENTS_ARG_a_b"` {
		t.Fatalf("gate %q", got)
	}
	values, _ := PlanArgValues(p, map[string]string{"x": evil, "a-b": "v"})
	if env := GateArgsEnv(values); strings.Join(env, "|") != "SUBAGENTS_ARG_a_b=v|SUBAGENTS_ARG_dir=sub|SUBAGENTS_ARG_x="+evil {
		t.Fatalf("env %q", env)
	}
	if bound.Steps[0].Cwd != "sub" {
		t.Fatalf("cwd %q", bound.Steps[0].Cwd)
	}
	for _, tc := range []struct{ dir, want string }{
		{"..", "has a `..` part"},
		{"a/../../b", "has a `..` part"},
		{`a\..\b`, "has a `..` part"},
		{"/etc", "is absolute"},
		{"~/x", "names a home folder"},
		{"a/..b/c", ""},
		{"./a/b", ""},
	} {
		_, err := BindPlanArgs(p, map[string]string{"dir": tc.dir})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("dir %q refused: %v", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || errcode.CodeOf(err) != errcode.InvalidInput):
			t.Errorf("dir %q: err %v, want INVALID_INPUT with %q", tc.dir, err, tc.want)
		}
	}
	// Two names one variable: the gate could not tell them apart.
	clash := Plan{Args: map[string]PlanArg{"a-b": {}, "a_b": {}}, Steps: []Step{{Key: "a", Agent: "s", Task: "t", Gate: &Gate{Command: "echo {args.a-b}"}}}}
	if _, err := BindPlanArgs(clash, nil); err == nil || !strings.Contains(err.Error(), "rename one") {
		t.Fatalf("clash: %v", err)
	}
}

func TestReusableSteps(t *testing.T) {
	old := Plan{Steps: []Step{task("scout", "scout", "map"), task("impl", "implementer", "do {steps.scout.output}"), task("review", "reviewer", "check")}}
	done := func(keys ...string) []StepState {
		var out []StepState
		for _, k := range keys {
			out = append(out, StepState{Key: k, State: StateCompleted})
		}
		return out
	}
	prior := append(done("scout", "impl"), StepState{Key: "review", State: StateCancelled})
	changed := old
	changed.Steps = []Step{old.Steps[0], task("impl", "implementer", "do it better {steps.scout.output}"), old.Steps[2]}
	for _, tc := range []struct {
		name    string
		updated Plan
		want    []string
	}{
		{"the same plan keeps what completed", old, []string{"scout", "impl"}},
		{"a changed step and what follows run again", changed, []string{"scout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range ReusableSteps(old, nil, tc.updated, nil, prior) {
				got = append(got, s.Key)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReusableStepsWithArgs: a task is defined by the argument values it
// uses, which a resume may change.
func TestReusableStepsWithArgs(t *testing.T) {
	p := Plan{Args: map[string]PlanArg{"change": {}}, Steps: []Step{task("scout", "scout", "map"), task("impl", "implementer", "do {args.change}")}}
	prior := []StepState{{Key: "scout", State: StateCompleted}, {Key: "impl", State: StateCompleted}}
	for _, tc := range []struct {
		name string
		args map[string]string
		want string
	}{
		{"the same values keep both", map[string]string{"change": "a"}, "scout,impl"},
		{"a changed value runs the step that uses it", map[string]string{"change": "b"}, "scout"},
	} {
		var got []string
		for _, s := range ReusableSteps(p, map[string]string{"change": "a"}, p, tc.args, prior) {
			got = append(got, s.Key)
		}
		if strings.Join(got, ",") != tc.want {
			t.Fatalf("%s: kept %v, want %s", tc.name, got, tc.want)
		}
	}
}

func TestPlanStepSessionID(t *testing.T) {
	for _, tc := range []struct {
		round, attempt int
		want           string
	}{{1, 1, "plan-x-review"}, {2, 1, "plan-x-review-R2"}, {1, 3, "plan-x-review-A3"}, {3, 2, "plan-x-review-R3-A2"}} {
		if got := PlanStepSessionID("plan-x", "review", tc.round, tc.attempt); got != tc.want || !ValidName(got) {
			t.Fatalf("round %d attempt %d: %q, want %q (a valid session ID)", tc.round, tc.attempt, got, tc.want)
		}
	}
}

func TestBudgetExceeded(t *testing.T) {
	b := &Budget{ToolCalls: 3, Tokens: 1000, Cost: 0.5}
	for _, tc := range []struct {
		calls int
		u     Usage
		want  string
	}{
		{2, Usage{Input: 10}, ""},
		{3, Usage{}, "3 tool calls of a budget of 3"},
		{0, Usage{Input: 600, Output: 400}, "1000 tokens"},
		{0, Usage{Cost: 0.6}, "$0.6000"},
	} {
		if got := b.Exceeded(tc.calls, tc.u); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Fatalf("%d calls %+v: %q, want %q", tc.calls, tc.u, got, tc.want)
		}
	}
	var none *Budget
	if none.Exceeded(100, Usage{Cost: 9}) != "" {
		t.Fatal("no budget is never exceeded")
	}
}

// TestGateCommandText: a failed gate's message names the values that ran.
func TestGateCommandText(t *testing.T) {
	p := Plan{Args: map[string]PlanArg{"check": {}, "pkg": {}}, Steps: []Step{{Key: "a", Agent: "s", Task: "t", Gate: &Gate{Command: "{args.check} {args.pkg}"}}}}
	values := map[string]string{"check": "./check.sh", "pkg": "a b"}
	bound, err := BindPlanArgs(p, values)
	if err != nil {
		t.Fatal(err)
	}
	if got := GateCommandText(bound.Steps[0].Gate.Command, values); got != "./check.sh a b" {
		t.Fatalf("text %q", got)
	}
	if got := GateCommandText("go test ./...", values); got != "go test ./..." {
		t.Fatalf("text %q", got)
	}
}
