package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/durable-pi/subagents/internal/errcode"
)

// A plan is a declarative document of steps (docs/plans.md): task steps,
// composed in sequence (`steps`), side by side (`parallel`) and in bounded
// loops (`loop`). The Plan workflow interprets it deterministically, one
// session per task step, so a crash re-runs no finished step. It is data,
// not a script, so that it can be checked whole before any child starts and
// written by a model in one tool call.
//
// This file is one piece past 600 lines because the document's types, its
// checks, its reference syntax (refRule) and the filling in of references
// and arguments all read the same syntax: split, a change to one would have
// to be found again in the others.

// PlanIDPrefix starts every plan's workflow ID.
const PlanIDPrefix = "plan-"

// Limits of a plan. Each is far above what a plan a person or a model
// writes needs, and low enough that a whole plan's history stays small.
const (
	// MaxPlanSteps bounds the task steps a plan declares: the peer's
	// lanes helper allows 64 stages in all.
	MaxPlanSteps = 64
	// MaxPlanNesting bounds how deep groups nest (a loop in a lane in a
	// parallel is 3): deeper plans are hard to read and to render.
	MaxPlanNesting = 4
	// MaxLoopRounds bounds a loop's max: each round is a child run of
	// every step in it.
	MaxLoopRounds = 10
	// DefaultLoopRounds is a loop's max when it names none ("at most 3
	// rounds" is the common review loop).
	DefaultLoopRounds = 3
	// MaxPlanRuns bounds the child sessions one plan run may start (loop
	// rounds included): 64 steps of which some loop.
	MaxPlanRuns = 256
	// MaxPlanBytes bounds a plan document: the peer's 64 KiB of lanes.
	MaxPlanBytes = 64 << 10
	// MaxStepKey bounds a key: it is part of the step's session ID.
	MaxStepKey = 32
	// DefaultGateTimeoutSeconds: a test suite's run; MaxGateTimeoutSeconds
	// an hour, as long as a long build.
	DefaultGateTimeoutSeconds = 300
	MaxGateTimeoutSeconds     = 3600
	// DefaultGateAttempts is how many times a failed gate's output goes
	// back to the child, as the finalize retries (DefaultMaxFinalizeRetries).
	DefaultGateAttempts = 2
	MaxGateAttempts     = 5
	// GateOutputChars caps the gate output sent back to the child and kept
	// in history: the end of a test run's output is what says why.
	GateOutputChars = 4000
	// MaxPlanArgs bounds a plan's arguments; MaxPlanArgChars each value.
	MaxPlanArgs     = 32
	MaxPlanArgChars = 32 << 10
)

// Plan is a plan document (JSON from a tool call, YAML in a plan file).
type Plan struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// Args are the arguments a saved plan takes ({args.NAME} in a task).
	Args map[string]PlanArg `json:"args,omitempty"`
	// Concurrency bounds the steps that run at once (default: the
	// delegation's, 4).
	Concurrency int `json:"concurrency,omitempty"`
	// Budget caps the whole plan: past it no further step starts.
	Budget *Budget `json:"budget,omitempty"`
	Steps  []Step  `json:"steps"`
}

// PlanArg is one argument of a saved plan.
type PlanArg struct {
	Description string `json:"description,omitempty"`
	Default     string `json:"default,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// Budget caps tool calls, tokens and cost (USD, as pi reports it); zero is
// no cap.
type Budget struct {
	ToolCalls int     `json:"toolCalls,omitempty"`
	Tokens    int     `json:"tokens,omitempty"`
	Cost      float64 `json:"cost,omitempty"`
}

// Exceeded says what of b spent is past, or "" when nothing is.
func (b *Budget) Exceeded(toolCalls int, u Usage) string {
	switch {
	case b == nil:
		return ""
	case b.ToolCalls > 0 && toolCalls >= b.ToolCalls:
		return fmt.Sprintf("%d tool calls of a budget of %d", toolCalls, b.ToolCalls)
	case b.Tokens > 0 && u.Tokens() >= int64(b.Tokens):
		return fmt.Sprintf("%d tokens of a budget of %d", u.Tokens(), b.Tokens)
	case b.Cost > 0 && u.Cost >= b.Cost:
		return fmt.Sprintf("$%.4f of a budget of $%.4f", u.Cost, b.Cost)
	}
	return ""
}

// Step is one node of a plan: a task step (Task set), or a group of steps
// (Steps in sequence, or Parallel side by side); a group with Loop repeats.
type Step struct {
	// Key names the step: in references ({steps.KEY.output}), in status
	// and in its session ID. Optional: a task step without one is
	// step1, step2… by its place in the document.
	Key string `json:"key,omitempty"`

	// A task step: today's task fields.
	Agent   string     `json:"agent,omitempty"`
	Task    string     `json:"task,omitempty"`
	Cwd     string     `json:"cwd,omitempty"`
	Model   string     `json:"model,omitempty"`
	Timeout int        `json:"timeout,omitempty"`
	Files   []FileSpec `json:"files,omitempty"`
	// Continue is an earlier task step's key: this task is that step's
	// session's next turn (same child, same pi session file).
	Continue string `json:"continue,omitempty"`
	// Context "fork" starts the child from a copy of the parent's
	// conversation; "fresh" (the default) from nothing.
	Context string `json:"context,omitempty"`
	// Gate is a command the worker runs in the step's folder after the
	// child finalizes; its failure goes back to the child.
	Gate *Gate `json:"gate,omitempty"`
	// Budget caps the step's child: past it the child is stopped.
	Budget *Budget `json:"budget,omitempty"`
	// Verdicts are the words the child must finalize with as its
	// verdict (a loop's until reads it): e.g. clean, changes.
	Verdicts []string `json:"verdicts,omitempty"`
	// Worktree and BaseRef isolate the step's child in a git worktree, as
	// a task's (TaskSpec.Worktree).
	Worktree bool   `json:"worktree,omitempty"`
	BaseRef  string `json:"baseRef,omitempty"`

	// A group.
	Steps    []Step `json:"steps,omitempty"`
	Parallel []Step `json:"parallel,omitempty"`
	// Loop repeats Steps, at most Max rounds, until Until holds.
	Loop *Loop `json:"loop,omitempty"`
}

// IsTask reports a task step.
func (s Step) IsTask() bool { return s.Task != "" || s.Agent != "" || s.Continue != "" }

// Gate is a plan step's verification command.
type Gate struct {
	Command string `json:"command"`
	// Timeout in seconds (default DefaultGateTimeoutSeconds).
	Timeout int `json:"timeout,omitempty"`
	// Attempts is how many failed runs go back to the child as corrective
	// feedback (default DefaultGateAttempts; 0 uses the default, -1 none).
	Attempts int `json:"attempts,omitempty"`
}

// GateAttempts is g's corrective rounds.
func (g Gate) GateAttempts() int {
	switch {
	case g.Attempts < 0:
		return 0
	case g.Attempts == 0:
		return DefaultGateAttempts
	}
	return g.Attempts
}

// GateTimeout is g's timeout in seconds.
func (g Gate) GateTimeout() int {
	if g.Timeout <= 0 {
		return DefaultGateTimeoutSeconds
	}
	return g.Timeout
}

// Loop repeats its group's steps.
type Loop struct {
	// Max rounds (default DefaultLoopRounds).
	Max   int   `json:"max,omitempty"`
	Until Until `json:"until"`
}

// Rounds is l's most rounds.
func (l Loop) Rounds() int {
	if l.Max <= 0 {
		return DefaultLoopRounds
	}
	return l.Max
}

// Until ends a loop as soon as the named step of its body has ended with
// that verdict, or that finalize status (SUCCESS, ERROR).
type Until struct {
	Step    string `json:"step"`
	Verdict string `json:"verdict,omitempty"`
	Status  string `json:"status,omitempty"`
}

// Holds reports whether a step's turn meets u.
func (u Until) Holds(t *TurnResult) bool {
	if t == nil || t.Result.Finalize == nil {
		return false
	}
	f := t.Result.Finalize
	if u.Verdict != "" && !strings.EqualFold(f.Verdict, u.Verdict) {
		return false
	}
	if u.Status != "" && !strings.EqualFold(f.Status, u.Status) {
		return false
	}
	return true
}

// stepKeyRule: lowercase, so that a session ID's upper-case suffixes
// (round R2, attempt A2) never collide with a key.
var stepKeyRule = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// refRule finds the references a task may hold.
var refRule = regexp.MustCompile(`\{(steps\.([a-z0-9][a-z0-9_-]*)\.(output|status|verdict|session)|args\.([A-Za-z0-9_-]+)|round)\}`)

// likeRefRule finds what a writer meant as a reference: a misspelt one
// ({steps.scout.ouput}, {args.}, {Steps.scout.output}, { steps.scout.output},
// {round }) would otherwise reach the child as text, silently, instead of
// the value the task needed.
var likeRefRule = regexp.MustCompile(`(?i)\{\s*(?:(?:steps|args)\s*\.[^{}\s]*|round)\s*\}`)

// likeRefRuleV3 is likeRefRule as PlanVersion 3 had it (lower case, no
// spaces): a plan it accepted must replay as accepted.
var likeRefRuleV3 = regexp.MustCompile(`\{(steps|args)\.[^{}\s]*\}`)

// ParsePlan reads a plan document in JSON, refusing fields it does not
// know (a misspelt `paralel` must not silently run steps in sequence).
func ParsePlan(doc []byte) (Plan, error) {
	var p Plan
	if len(doc) > MaxPlanBytes {
		return p, errcode.Errorf(errcode.InvalidInput, "the plan is %d KiB; a plan is at most %d KiB", len(doc)>>10, MaxPlanBytes>>10)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, errcode.Errorf(errcode.InvalidInput, "plan: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return p, nil
}

// PlanStep is a task step with where it sits: Path is its groups' keys
// (a lane's, a loop's), Index its place among the plan's task steps.
type PlanStep struct {
	Step
	Index int
	Path  []string
	// Loop is the key of the innermost loop the step is in, "" if none.
	Loop string
}

// TaskSteps lists p's task steps in document order, keys filled in.
func TaskSteps(p Plan) []PlanStep {
	var out []PlanStep
	var walk func(steps []Step, path []string, loop string)
	walk = func(steps []Step, path []string, loop string) {
		for _, s := range steps {
			if s.IsTask() {
				ps := PlanStep{Step: s, Index: len(out), Path: slices.Clone(path), Loop: loop}
				if ps.Key == "" {
					ps.Key = fmt.Sprintf("step%d", len(out)+1)
				}
				out = append(out, ps)
				continue
			}
			inner, innerLoop := path, loop
			if s.Key != "" {
				inner = append(slices.Clone(path), s.Key)
			}
			if s.Loop != nil {
				innerLoop = groupKey(s, path)
			}
			walk(s.Steps, inner, innerLoop)
			walk(s.Parallel, inner, innerLoop)
		}
	}
	walk(p.Steps, nil, "")
	return out
}

// groupKey is a group's key, or where it sits when it has none.
func groupKey(s Step, path []string) string {
	if s.Key != "" {
		return s.Key
	}
	return strings.Join(append(slices.Clone(path), "loop"), "/")
}

// ValidatePlan checks a plan whole, before any child starts: its shape,
// keys, limits, references and loops' verdicts, as the current PlanVersion
// does. The error is INVALID_INPUT naming the step. Agents are resolved
// where profiles are read (the client's CheckPlan, and the workflow).
func ValidatePlan(p Plan) error { return ValidatePlanAsOf(p, PlanVersion) }

// ValidatePlanAsOf checks p as the plan workflow of version checked it: a
// plan that started before a check was added still replays, and runs, as
// it was accepted.
func ValidatePlanAsOf(p Plan, version int) error {
	if len(p.Steps) == 0 {
		return errcode.New(errcode.InvalidInput, "plan: steps must hold at least one step")
	}
	if p.Concurrency < 0 || p.Concurrency > MaxConcurrency {
		return errcode.Errorf(errcode.InvalidInput, "plan: concurrency must be 1 to %d", MaxConcurrency)
	}
	if err := validateBudget("plan", p.Budget); err != nil {
		return err
	}
	if len(p.Args) > MaxPlanArgs {
		return errcode.Errorf(errcode.InvalidInput, "plan: %d args; a plan takes at most %d", len(p.Args), MaxPlanArgs)
	}
	v := &planCheck{keys: map[string]string{}}
	if err := v.group(p.Steps, nil, 1, false); err != nil {
		return err
	}
	if v.tasks > MaxPlanSteps {
		return errcode.Errorf(errcode.InvalidInput, "plan: %d task steps; a plan holds at most %d (split it, or loop over fewer steps)", v.tasks, MaxPlanSteps)
	}
	if v.runs > MaxPlanRuns {
		return errcode.Errorf(errcode.InvalidInput, "plan: its loops could start %d child sessions; a plan starts at most %d (lower a loop's max)", v.runs, MaxPlanRuns)
	}
	return checkReferences(p, version)
}

type planCheck struct {
	keys  map[string]string // key -> "task" or "group"
	tasks int
	runs  int
}

func (v *planCheck) key(s Step, kind string) error {
	if s.Key == "" {
		return nil
	}
	if len(s.Key) > MaxStepKey || !stepKeyRule.MatchString(s.Key) {
		return errcode.Errorf(errcode.InvalidInput, "step %q: a key is 1 to %d lower-case letters, digits, '-' or '_', starting with a letter or digit", s.Key, MaxStepKey)
	}
	if _, dup := v.keys[s.Key]; dup {
		return errcode.Errorf(errcode.InvalidInput, "step %q: two steps have this key; keys name steps in references and must be unique", s.Key)
	}
	v.keys[s.Key] = kind
	return nil
}

func (v *planCheck) group(steps []Step, path []string, depth int, inLoop bool) error {
	if depth > MaxPlanNesting {
		return errcode.Errorf(errcode.InvalidInput, "step %q: groups nest %d deep; a plan nests at most %d", strings.Join(path, "/"), depth, MaxPlanNesting)
	}
	for i, s := range steps {
		name := s.Key
		if name == "" {
			name = fmt.Sprintf("%s#%d", strings.Join(path, "/"), i+1)
		}
		if s.IsTask() {
			if err := v.task(s, name); err != nil {
				return err
			}
			continue
		}
		if err := v.key(s, "group"); err != nil {
			return err
		}
		switch {
		case len(s.Steps) > 0 && len(s.Parallel) > 0:
			return errcode.Errorf(errcode.InvalidInput, "step %q: a group has steps (in sequence) or parallel (side by side), not both", name)
		case len(s.Steps) == 0 && len(s.Parallel) == 0:
			return errcode.Errorf(errcode.InvalidInput, "step %q: a step needs a task (with an agent), steps or parallel", name)
		case s.Gate != nil || s.Budget != nil || len(s.Verdicts) > 0 || s.Cwd != "" || s.Model != "" || s.Context != "" || s.Timeout != 0 || len(s.Files) > 0:
			return errcode.Errorf(errcode.InvalidInput, "step %q: a group takes no task fields (gate, budget, verdicts, cwd, model, context, timeout, files): put them on its task steps", name)
		}
		if s.Loop != nil {
			if inLoop {
				// A loop's rounds number its steps' sessions (-R2): rounds of
				// rounds would need a numbering of their own.
				return errcode.Errorf(errcode.InvalidInput, "step %q: a loop inside a loop is not supported: make the inner steps part of the outer loop", name)
			}
			if len(s.Parallel) > 0 {
				return errcode.Errorf(errcode.InvalidInput, "step %q: a loop repeats steps in sequence: put a parallel group inside its steps", name)
			}
			if s.Loop.Max < 0 || s.Loop.Max > MaxLoopRounds {
				return errcode.Errorf(errcode.InvalidInput, "step %q: loop max must be 1 to %d", name, MaxLoopRounds)
			}
			if s.Loop.Until.Step == "" || s.Loop.Until.Verdict == "" && s.Loop.Until.Status == "" {
				return errcode.Errorf(errcode.InvalidInput, "step %q: a loop needs until: {step: KEY, verdict: WORD} (or status: SUCCESS|ERROR) saying when it is done", name)
			}
			if st := strings.ToUpper(s.Loop.Until.Status); st != "" && st != "SUCCESS" {
				// A child that finalizes with ERROR fails its step, which ends
				// the loop's lane: only SUCCESS can end a loop.
				return errcode.Errorf(errcode.InvalidInput, "step %q: until status can only be SUCCESS (a step whose child finalizes with ERROR fails, and so does its loop)", name)
			}
		}
		before := v.runs
		sub := append(slices.Clone(path), name)
		if err := v.group(append(s.Steps, s.Parallel...), sub, depth+1, inLoop || s.Loop != nil); err != nil {
			return err
		}
		if s.Loop != nil {
			v.runs = before + (v.runs-before)*s.Loop.Rounds()
		}
	}
	return nil
}

func (v *planCheck) task(s Step, name string) error {
	if err := v.key(s, "task"); err != nil {
		return err
	}
	v.tasks++
	v.runs++
	switch {
	case strings.TrimSpace(s.Task) == "":
		return errcode.Errorf(errcode.InvalidInput, "step %q: task must not be empty", name)
	case len(s.Steps) > 0 || len(s.Parallel) > 0 || s.Loop != nil:
		return errcode.Errorf(errcode.InvalidInput, "step %q: a task step holds no steps, parallel or loop: make a group of them", name)
	case s.Context != "" && s.Context != "fresh" && s.Context != "fork":
		return errcode.Errorf(errcode.InvalidInput, "step %q: context must be fresh or fork", name)
	case s.Continue != "" && s.Context == "fork":
		return errcode.Errorf(errcode.InvalidInput, "step %q: a step that continues a session already has its context: drop context: fork", name)
	case s.Continue != "" && (s.Cwd != "" || s.Model != "" || s.Timeout != 0 || s.Budget != nil || s.Worktree || s.BaseRef != ""):
		// The continued session runs as it was started: its folder, model,
		// timeout, budget and worktree are the first step's.
		return errcode.Errorf(errcode.InvalidInput, "step %q: a step that continues %q runs in that session as it was started: drop cwd, model, timeout, budget and worktree (set them on %q)", name, s.Continue, s.Continue)
	case s.Timeout < 0:
		return errcode.Errorf(errcode.InvalidInput, "step %q: timeout must be positive", name)
	}
	if s.Agent != "" {
		if err := ValidateName(fmt.Sprintf("step %q: agent", name), s.Agent); err != nil {
			return err
		}
	}
	for _, f := range s.Files {
		if err := f.Validate(); err != nil {
			return errcode.Errorf(errcode.InvalidInput, "step %q: files: %s", name, err.Error())
		}
	}
	for _, w := range s.Verdicts {
		if w == "" || strings.ContainsAny(w, " \t\n") || len(w) > 32 {
			return errcode.Errorf(errcode.InvalidInput, "step %q: a verdict is one word of at most 32 characters", name)
		}
	}
	if g := s.Gate; g != nil {
		switch {
		case strings.TrimSpace(g.Command) == "":
			return errcode.Errorf(errcode.InvalidInput, "step %q: gate command must not be empty", name)
		case g.Timeout < 0 || g.Timeout > MaxGateTimeoutSeconds:
			return errcode.Errorf(errcode.InvalidInput, "step %q: gate timeout must be 1 to %d seconds", name, MaxGateTimeoutSeconds)
		case g.Attempts < -1 || g.Attempts > MaxGateAttempts:
			return errcode.Errorf(errcode.InvalidInput, "step %q: gate attempts must be -1 (none) to %d", name, MaxGateAttempts)
		}
	}
	return validateBudget(fmt.Sprintf("step %q", name), s.Budget)
}

func validateBudget(what string, b *Budget) error {
	if b != nil && (b.ToolCalls < 0 || b.Tokens < 0 || b.Cost < 0) {
		return errcode.Errorf(errcode.InvalidInput, "%s: a budget's toolCalls, tokens and cost must not be negative", what)
	}
	return nil
}

// checkReferences checks that every step a task, a continue or a loop's
// until names exists and runs before the step that names it, and names
// the cycle when two steps wait for each other. From PlanVersion 3 it
// also refuses a misspelt reference, an argument the plan does not
// declare, and a loop waiting for a verdict its step may not give; from 4
// a reference in another case or with spaces is misspelt too.
func checkReferences(p Plan, version int) error {
	strict := version >= 3
	steps := TaskSteps(p)
	byKey := map[string]int{}
	for i, s := range steps {
		if _, dup := byKey[s.Key]; dup {
			return errcode.Errorf(errcode.InvalidInput, "step %q: two steps have this key (a step without a key is step1, step2… by its place); keys must be unique", s.Key)
		}
		byKey[s.Key] = i
	}
	before := RunsBefore(p)
	deps := make([][]string, len(steps))
	for i, s := range steps {
		if strict {
			if err := checkRefSpelling(p, s, version); err != nil {
				return err
			}
		}
		for _, m := range refRule.FindAllStringSubmatch(s.Task, -1) {
			if m[2] != "" {
				deps[i] = append(deps[i], m[2])
			}
			if m[1] == "round" && s.Loop == "" {
				return errcode.Errorf(errcode.InvalidInput, "step %q: {round} is a loop's round, and this step is in no loop", s.Key)
			}
		}
		if s.Continue != "" {
			deps[i] = append(deps[i], s.Continue)
		}
	}
	for i, s := range steps {
		for _, d := range deps[i] {
			j, ok := byKey[d]
			if !ok {
				return errcode.Errorf(errcode.InvalidInput, "step %q: refers to step %q, which the plan does not have", s.Key, d)
			}
			if before[i][j] {
				continue
			}
			if cycle := findCycle(steps, deps, byKey, j, i); cycle != nil {
				return errcode.Errorf(errcode.InvalidInput, "step %q: a cycle: %s; each step can use only steps that run before it", s.Key, strings.Join(cycle, " → "))
			}
			return errcode.Errorf(errcode.InvalidInput, "step %q: refers to step %q, which does not run before it (it runs later, or beside it in a parallel group)", s.Key, d)
		}
		if s.Continue != "" && steps[byKey[s.Continue]].Continue == "" && s.Agent != "" && steps[byKey[s.Continue]].Agent != "" && s.Agent != steps[byKey[s.Continue]].Agent {
			return errcode.Errorf(errcode.InvalidInput, "step %q: continues step %q, whose agent is %q: a continued session keeps its agent (drop agent)", s.Key, s.Continue, steps[byKey[s.Continue]].Agent)
		}
	}
	return checkLoops(p.Steps, nil, strict)
}

// checkRefSpelling refuses what looks like a reference in s's task but is
// none (refRule), and an {args.NAME} the plan does not declare: either
// would reach the child as its literal text.
func checkRefSpelling(p Plan, s PlanStep, version int) error {
	like := likeRefRule
	if version < 4 {
		like = likeRefRuleV3
	}
	for _, m := range like.FindAllString(s.Task, -1) {
		sub := refRule.FindStringSubmatch(m)
		switch {
		case sub == nil || sub[0] != m:
			return errcode.Errorf(errcode.InvalidInput, "step %q: %s is not a reference: a task uses {steps.KEY.output}, {steps.KEY.status}, {steps.KEY.verdict}, {steps.KEY.session}, {args.NAME} or {round}", s.Key, m)
		case sub[4] != "":
			if _, ok := p.Args[sub[4]]; !ok {
				return errcode.Errorf(errcode.InvalidInput, "step %q: uses {args.%s}, which the plan does not declare under args (it takes: %s)", s.Key, sub[4], argNames(p))
			}
		}
	}
	return nil
}

// checkLoops checks that each loop's until names a task step in its body
// and, strict, that a verdict it waits for is one its step may give: with
// verdicts declared the worker accepts no other word, so the loop could
// never end by it and would always fail LOOP_EXHAUSTED.
func checkLoops(steps []Step, path []string, strict bool) error {
	for _, s := range steps {
		if s.IsTask() {
			continue
		}
		if s.Loop != nil {
			var until *PlanStep
			for _, b := range TaskSteps(Plan{Steps: s.Steps}) {
				if b.Key == s.Loop.Until.Step {
					until = &b
				}
			}
			if until == nil {
				return errcode.Errorf(errcode.InvalidInput, "step %q: the loop's until names step %q, which is not among the loop's own steps", groupKey(s, path), s.Loop.Until.Step)
			}
			if v := s.Loop.Until.Verdict; strict && v != "" && len(until.Verdicts) > 0 && !slices.ContainsFunc(until.Verdicts, func(w string) bool { return strings.EqualFold(w, v) }) {
				return errcode.Errorf(errcode.InvalidInput, "step %q: the loop waits for verdict %q of step %q, whose verdicts are %s: add it there, or wait for one of them", groupKey(s, path), v, until.Key, strings.Join(until.Verdicts, ", "))
			}
		}
		if err := checkLoops(append(s.Steps, s.Parallel...), path, strict); err != nil {
			return err
		}
	}
	return nil
}

// findCycle is a path of references from step `from` back to step `to`,
// or nil.
func findCycle(steps []PlanStep, deps [][]string, byKey map[string]int, from, to int) []string {
	seen := map[int]bool{}
	var walk func(i int, path []string) []string
	walk = func(i int, path []string) []string {
		path = append(path, steps[i].Key)
		if i == to {
			return path
		}
		if seen[i] {
			return nil
		}
		seen[i] = true
		for _, d := range deps[i] {
			if j, ok := byKey[d]; ok {
				if c := walk(j, path); c != nil {
					return c
				}
			}
		}
		return nil
	}
	if c := walk(from, nil); c != nil {
		return append([]string{steps[to].Key}, c...)
	}
	return nil
}

// RunsBefore says, for each pair of task steps (i, j) by TaskSteps index,
// whether j has always ended before i starts: j is in an earlier member of
// a sequence that holds i (a parallel group orders nothing among its
// members).
func RunsBefore(p Plan) [][]bool {
	n := len(TaskSteps(p))
	out := make([][]bool, n)
	for i := range out {
		out[i] = make([]bool, n)
	}
	idx := 0
	// walk returns the task indexes of a list of steps; seq says whether
	// the list is a sequence.
	var walk func(list []Step, seq bool) []int
	walk = func(list []Step, seq bool) []int {
		var all []int
		var earlier []int
		for _, s := range list {
			var mine []int
			if s.IsTask() {
				mine = []int{idx}
				idx++
			} else {
				mine = append(walk(s.Steps, true), walk(s.Parallel, false)...)
			}
			if seq {
				for _, i := range mine {
					for _, j := range earlier {
						out[i][j] = true
					}
				}
				earlier = append(earlier, mine...)
			}
			all = append(all, mine...)
		}
		return all
	}
	walk(p.Steps, true)
	return out
}

// BindPlanArgs checks args against the plan's declared arguments and binds
// them: a required argument missing, one the plan does not declare, or a
// value over MaxPlanArgChars is INVALID_INPUT. A plan that declares no args
// takes none. It returns the plan with its folders (cwd) and gate commands
// bound; PlanArgValues are the values the run fills its tasks in with.
//
// A task's {args.NAME} stays in the plan: the run fills it in with the
// values, in the same single pass as the task's step references and
// {round} (ExpandTask), so that a value is the user's text, literally, and
// never a template of its own: `{steps.scout.output}` given as an argument
// reaches the child as those characters, not as the scout's output, and
// `{round}` is not refused for a step outside a loop. A folder holds no
// other references, so binding it here is that one pass; a value that
// would take it out of the plan's folder (absolute, `..`) is INVALID_INPUT.
// A gate command's {args.NAME} becomes "$SUBAGENTS_ARG_NAME" (GateArgEnv),
// which the gate's environment holds: the value is never shell text.
func BindPlanArgs(p Plan, args map[string]string) (Plan, error) {
	values, err := PlanArgValues(p, args)
	if err != nil {
		return p, err
	}
	var bind func(steps []Step) ([]Step, error)
	bind = func(steps []Step) ([]Step, error) {
		out := slices.Clone(steps)
		for i := range out {
			s := &out[i]
			var err error
			// replace fills in text's {args.NAME} with with(NAME, value).
			replace := func(text string, with func(name, v string) string) string {
				return refRule.ReplaceAllStringFunc(text, func(m string) string {
					sub := refRule.FindStringSubmatch(m)
					if sub[4] == "" {
						return m
					}
					v, ok := values[sub[4]]
					if !ok {
						if err == nil {
							err = errcode.Errorf(errcode.InvalidInput, "step %q: uses {args.%s}, which the plan does not declare under args", s.Key, sub[4])
						}
						return ""
					}
					return with(sub[4], v)
				})
			}
			literal := func(_, v string) string { return v }
			// Only checked: the run binds the task (ExpandTask).
			_ = replace(s.Task, literal)
			s.Cwd = replace(s.Cwd, func(name, v string) string {
				if bad := escapingPath(v); bad != "" && err == nil {
					err = errcode.Errorf(errcode.InvalidInput, "step %q: argument %q fills in its cwd with %q, which %s: an argument names a folder inside the plan's folder", s.Key, name, v, bad)
				}
				return v
			})
			if s.Gate != nil {
				g := *s.Gate
				// The command is shell text: a value spliced into it would be
				// read as shell (`1; curl …|sh` runs curl). The gate gets the
				// value in its environment instead, and the command a
				// double-quoted reference to it, which the shell expands once
				// into one word and never reads as code.
				g.Command = replace(g.Command, func(name, _ string) string {
					env := GateArgEnv(name)
					for other := range values {
						if other != name && GateArgEnv(other) == env && err == nil {
							err = errcode.Errorf(errcode.InvalidInput, "step %q: its gate uses {args.%s}, which reaches the command as $%s, as does argument %q: rename one", s.Key, name, env, other)
						}
					}
					return `"$` + env + `"`
				})
				s.Gate = &g
			}
			if err != nil {
				return nil, err
			}
			if s.Steps, err = bind(s.Steps); err != nil {
				return nil, err
			}
			if s.Parallel, err = bind(s.Parallel); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	steps, err := bind(p.Steps)
	if err != nil {
		return p, err
	}
	p.Steps = steps
	return p, nil
}

// GateArgEnv is the environment variable a gate command reads argument
// name from: {args.NAME} in a gate command becomes "$SUBAGENTS_ARG_NAME"
// (a `-` in the name becomes `_`, which a shell name allows).
func GateArgEnv(name string) string {
	return "SUBAGENTS_ARG_" + strings.ReplaceAll(name, "-", "_")
}

// GateCommandText is command as people and the child read it: each
// "$SUBAGENTS_ARG_NAME" BindPlanArgs made of an {args.NAME} shown as its
// value, so that a failed check names what ran (`./check.sh`, not the
// variable). For messages only: the command runs as bound.
func GateCommandText(command string, values map[string]string) string {
	if !strings.Contains(command, `"$SUBAGENTS_ARG_`) {
		return command
	}
	pairs := make([]string, 0, 2*len(values))
	for _, k := range sortedKeys(values) {
		pairs = append(pairs, `"$`+GateArgEnv(k)+`"`, values[k])
	}
	return strings.NewReplacer(pairs...).Replace(command)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	// Sorted below: the order a workflow sees never depends on the map's.
	//workflowcheck:ignore
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// GateArgsEnv is the environment a gate command runs with: each argument's
// value under its GateArgEnv name, sorted, so that the same arguments give
// the same environment.
func GateArgsEnv(values map[string]string) []string {
	out := make([]string, 0, len(values))
	//workflowcheck:ignore
	for k, v := range values {
		out = append(out, GateArgEnv(k)+"="+v)
	}
	sort.Strings(out)
	return out
}

// escapingPath says how an argument's value filled into a step's cwd
// would leave the plan's folder ("" if it would not): absolute, a home
// folder, or a `..` part.
func escapingPath(v string) string {
	switch {
	case strings.HasPrefix(v, "/"):
		return "is absolute"
	case strings.HasPrefix(v, "~"):
		return "names a home folder"
	}
	for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return "has a `..` part"
		}
	}
	return ""
}

// PlanArgValues checks args against p's declared arguments (as
// BindPlanArgs) and returns every declared argument's value: given, else
// its default; nil when p declares none.
func PlanArgValues(p Plan, args map[string]string) (map[string]string, error) {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := p.Args[k]; !ok {
			return nil, errcode.Errorf(errcode.InvalidInput, "plan %s: takes no argument %q (it takes: %s)", p.Name, k, argNames(p))
		}
		if len(args[k]) > MaxPlanArgChars {
			return nil, errcode.Errorf(errcode.InvalidInput, "plan %s: argument %q is over %d KiB", p.Name, k, MaxPlanArgChars>>10)
		}
	}
	if len(p.Args) == 0 {
		return nil, nil
	}
	values := map[string]string{}
	for _, k := range sortedArgNames(p) {
		a := p.Args[k]
		v, ok := args[k]
		if !ok {
			if a.Required {
				return nil, errcode.Errorf(errcode.InvalidInput, "plan %s: argument %q is required (%s)", p.Name, k, a.Description)
			}
			v = a.Default
		}
		values[k] = v
	}
	return values, nil
}

func sortedArgNames(p Plan) []string {
	names := make([]string, 0, len(p.Args))
	// Sorted below: the order a workflow sees never depends on the map's.
	//workflowcheck:ignore
	for k := range p.Args {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func argNames(p Plan) string {
	if len(p.Args) == 0 {
		return "none"
	}
	return strings.Join(sortedArgNames(p), ", ")
}

// StepView is what a task step's result gives the steps after it.
type StepView struct {
	Output  string
	Status  string
	Verdict string
	Session string
}

// ExpandTask fills a task's step references, {round} and {args.NAME} in,
// in one pass over the task as written: what it puts in is never read
// again, so an argument's value or a step's output that holds "{round}"
// stays that text. lookup gives an earlier step's view (ok false: it has
// not run, which validation rules out for a step that runs before). args
// nil leaves {args.NAME} as it is: a plan of PlanVersion 2 or before had
// its tasks bound when it started.
func ExpandTask(text string, round int, args map[string]string, lookup func(key string) (StepView, bool)) string {
	return refRule.ReplaceAllStringFunc(text, func(m string) string {
		sub := refRule.FindStringSubmatch(m)
		switch {
		case sub[1] == "round":
			return fmt.Sprint(round)
		case sub[4] != "":
			if v, ok := args[sub[4]]; ok {
				return v
			}
			return m
		case sub[2] != "":
			v, ok := lookup(sub[2])
			if !ok {
				return ""
			}
			switch sub[3] {
			case "output":
				return v.Output
			case "status":
				return v.Status
			case "verdict":
				return v.Verdict
			case "session":
				return v.Session
			}
		}
		return m
	})
}

// PlanStepSessionID is the session ID of a task step's run: the plan's ID
// and the step's key, with the loop round (R2…) and the plan's attempt
// (A2…, a resumed plan) when past the first. Upper-case suffixes never
// collide with a key, which is lower-case.
func PlanStepSessionID(planID, key string, round, attempt int) string {
	id := planID + "-" + key
	if round > 1 {
		id += fmt.Sprintf("-R%d", round)
	}
	if attempt > 1 {
		id += fmt.Sprintf("-A%d", attempt)
	}
	return id
}

// ReusableSteps are the steps of prior (an earlier attempt's) that a
// resumed plan keeps: completed, defined the same in the old and the new
// document, and run after no step whose definition changed (whose result
// they may have used). oldArgs and args are the argument values each
// document runs with (PlanInput.Args): a task is defined by them too.
func ReusableSteps(old Plan, oldArgs map[string]string, updated Plan, args map[string]string, prior []StepState) []StepState {
	defs := map[string]string{}
	for _, s := range TaskSteps(old) {
		defs[s.Key] = stepDef(s, oldArgs)
	}
	steps := TaskSteps(updated)
	changed := make([]bool, len(steps))
	for i, s := range steps {
		d, ok := defs[s.Key]
		changed[i] = !ok || d != stepDef(s, args)
	}
	done := map[string]StepState{}
	for _, s := range prior {
		if s.State == StateCompleted {
			done[s.Key] = s
		}
	}
	before := RunsBefore(updated)
	var out []StepState
	for i, s := range steps {
		st, ok := done[s.Key]
		if !ok || changed[i] {
			continue
		}
		keep := true
		for j := range steps {
			if before[i][j] && changed[j] {
				keep = false
			}
		}
		if keep {
			out = append(out, st)
		}
	}
	return out
}

// stepDef is a task step's definition, to compare two documents by: the
// step with its task as it runs (the arguments it uses filled in).
func stepDef(s PlanStep, args map[string]string) string {
	s.Task = refRule.ReplaceAllStringFunc(s.Task, func(m string) string {
		if sub := refRule.FindStringSubmatch(m); sub[4] != "" {
			if v, ok := args[sub[4]]; ok {
				return v
			}
		}
		return m
	})
	b, _ := json.Marshal(s.Step)
	return string(b) + "|" + strings.Join(s.Path, "/") + "|" + s.Loop
}
