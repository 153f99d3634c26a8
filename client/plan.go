package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// PlanRequest starts a plan: a document given inline (Plan), or a saved
// plan by Name, with its Args.
type PlanRequest struct {
	Plan *api.Plan         `json:"plan,omitempty"`
	Name string            `json:"name,omitempty"`
	Args map[string]string `json:"args,omitempty"`
	// Cwd is the steps' folder unless a step names its own; Profile their
	// agent unless a step names one.
	Cwd     string `json:"cwd"`
	Profile string `json:"profile,omitempty"`
	// ParentSessionID and ParentSessionFile: the pi session that starts
	// the plan; its file is what steps with context fork start from.
	ParentSessionID   string `json:"parent_session_id,omitempty"`
	ParentSessionFile string `json:"parent_session_file,omitempty"`
	Deliver           bool   `json:"deliver,omitempty"`
	MaxConcurrency    int    `json:"max_concurrency,omitempty"`
	Tool              string `json:"tool,omitempty"`
	IdleTTLSeconds    int    `json:"idle_ttl_seconds,omitempty"`
	Host              string `json:"host,omitempty"`
	Depth             int    `json:"-"`
	// Knobs are the caller's (StartRequest.Knobs).
	Knobs *api.CallerKnobs `json:"-"`
}

// PlanCaller is who resumes a plan: its proven depth and its knobs
// (StartRequest.Knobs).
type PlanCaller struct {
	Depth int
	Knobs *api.CallerKnobs
}

// StartPlan checks a plan whole and starts it; the answer is the plan's
// status after its first workflow task, so a step whose agent does not
// resolve refuses the plan here, before any child starts.
func (c *Client) StartPlan(ctx context.Context, req PlanRequest) (Envelope, error) {
	in, err := CheckPlan(req)
	if err != nil {
		return Envelope{}, err
	}
	return c.startPlan(ctx, api.PlanIDPrefix+c.id(), in, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
}

// CheckPlan checks a plan request whole, as its start does, before
// anything starts: a saved plan found by name, its arguments (declared,
// required, their size), the document (shape, keys, limits, references,
// loops' verdicts: api.ValidatePlan), the caller's depth (api.CheckDepth:
// a caller at the limit starts nothing), a fork's parent file, and every
// step's agent, resolved from the profiles and settings this machine's
// worker reads (unknown: UNKNOWN_AGENT, not allowed: PERMISSION_DENIED,
// naming the step). It needs no connection: StartPlan calls it, and so
// can whatever keeps a plan to start later (a schedule's create), so that
// a plan that cannot run is refused then, not at each start. It returns
// the plan's input, its arguments bound.
func CheckPlan(req PlanRequest) (api.PlanInput, error) {
	in := api.PlanInput{
		Cwd: req.Cwd, Profile: req.Profile, ParentSessionID: req.ParentSessionID, ParentSessionFile: req.ParentSessionFile,
		Depth: req.Depth, Host: req.Host, Tool: req.Tool, Deliver: req.Deliver, IdleTTLSeconds: req.IdleTTLSeconds,
		MaxConcurrency: req.MaxConcurrency, Attempt: 1, Version: api.PlanVersion, Knobs: req.Knobs,
	}
	// First: a caller at the limit starts no plan, whatever it holds.
	if err := api.CheckDepth(in.Depth, 0); err != nil {
		return in, err
	}
	if !filepath.IsAbs(in.Cwd) {
		return in, errcode.Errorf(errcode.InvalidInput, "cwd must be an absolute path, not %q", in.Cwd)
	}
	switch {
	case req.Plan != nil && req.Name != "":
		return in, errcode.New(errcode.InvalidInput, "give a plan or the name of a saved plan, not both")
	case req.Plan != nil:
		in.Plan = *req.Plan
	case req.Name != "":
		p, src, err := findPlan(req.Cwd, req.Name)
		if err != nil {
			return in, err
		}
		in.Plan, in.Source = p, &src
	default:
		return in, errcode.New(errcode.InvalidInput, "a plan (steps) or the name of a saved plan is required")
	}
	if err := bindPlan(&in, in.Plan, req.Args); err != nil {
		return in, err
	}
	for _, s := range api.TaskSteps(in.Plan) {
		if s.Context == "fork" && in.ParentSessionFile == "" {
			return in, errcode.Errorf(errcode.InvalidInput, "step %q: context fork starts from the parent's conversation, and this call names no parent session file", s.Key)
		}
	}
	if b, err := json.Marshal(in); err == nil && len(b) > MaxStartBytes {
		return in, errcode.Errorf(errcode.InvalidInput, "the plan's input is %d KiB; Temporal takes at most %d KiB", len(b)>>10, MaxStartBytes>>10)
	}
	if err := resolvePlanAgents(in); err != nil {
		return in, err
	}
	return in, nil
}

// bindPlan binds p's arguments with args into in (its plan, its
// arguments' values, the current PlanVersion) and checks the result.
func bindPlan(in *api.PlanInput, p api.Plan, args map[string]string) error {
	values, err := api.PlanArgValues(p, args)
	if err != nil {
		return err
	}
	bound, err := api.BindPlanArgs(p, args)
	if err != nil {
		return err
	}
	in.Plan, in.Args, in.Version = bound, values, api.PlanVersion
	return api.ValidatePlan(in.Plan)
}

// resolvePlanAgents resolves every step's agent as the plan's workflow
// will (its resolve): a step that continues another runs as that one. A
// plan for another machine's worker (Host) is left to it: its profiles are
// not this machine's.
func resolvePlanAgents(in api.PlanInput) error {
	if here, _ := os.Hostname(); in.Host != "" && in.Host != here {
		return nil
	}
	steps := api.TaskSteps(in.Plan)
	byKey := map[string]int{}
	for i, s := range steps {
		byKey[s.Key] = i
	}
	// first is the step whose session step i runs in.
	var first func(i int) int
	first = func(i int) int {
		if c := steps[i].Continue; c != "" {
			return first(byKey[c])
		}
		return i
	}
	req := profiles.ResolveRequest{Depth: in.Depth + 1}
	var which []int
	for i := range steps {
		if steps[i].Continue != "" {
			continue
		}
		s := steps[first(i)]
		cwd := s.Cwd
		if cwd == "" {
			cwd = in.Cwd
		} else if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(in.Cwd, cwd)
		}
		agent := s.Agent
		if agent == "" {
			agent = in.Profile
		}
		req.Tasks = append(req.Tasks, profiles.ResolveTask{Profile: agent, Cwd: cwd, Model: s.Model, TimeoutSeconds: s.Timeout, Tool: in.Tool})
		which = append(which, i)
	}
	acts := profiles.Activities{AgentDir: profiles.DefaultAgentDir(), PromptDirs: profiles.DefaultPromptDirs(), Getenv: os.Getenv}
	out, err := acts.ResolveTasks(context.Background(), req)
	if err != nil {
		return err
	}
	for k, r := range out {
		if r.Error != nil {
			return errcode.Errorf(r.Error.Code, "step %q: %s", steps[which[k]].Key, r.Error.Message)
		}
	}
	return nil
}

// startPlan starts plan in under id and waits (briefly) for its first
// workflow task: the plan as it stands after its agents resolved.
func (c *Client) startPlan(ctx context.Context, id string, in api.PlanInput, reuse enumspb.WorkflowIdReusePolicy) (Envelope, error) {
	steps := api.TaskSteps(in.Plan)
	keys := make([]string, len(steps))
	for i, s := range steps {
		keys[i] = s.Key
	}
	name := in.Plan.Name
	if name == "" {
		name = "plan"
	}
	attrs := []temporal.SearchAttributeUpdate{
		api.AgentKey.ValueSet("plan"),
		api.StatusKey.ValueSet(string(api.StateRunning)),
		api.CwdKey.ValueSet(in.Cwd),
	}
	if in.ParentSessionID != "" {
		attrs = append(attrs, api.ParentSessionKey.ValueSet(in.ParentSessionID))
	}
	_, err := c.Temporal.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             c.TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(attrs...),
		Memo:                  map[string]any{"name": name, "description": in.Plan.Description},
		StaticSummary:         fmt.Sprintf("%s: %d step(s): %s", name, len(keys), strings.Join(keys, ", ")) + api.NestedUnder(in.Depth, in.ParentSessionID),
		StaticDetails:         planDetails(in),
		WorkflowIDReusePolicy: reuse,
		// As for a delegation (startDelegation): the first workflow task
		// comes back in the start's answer where a worker shares the process.
		EnableEagerStart: true,
	}, api.PlanWorkflowName, in)
	if err != nil {
		return Envelope{}, c.temporalError(err, id)
	}
	st := c.firstPlanStatus(ctx, id, in)
	return c.delegationEnvelope("start", st, nil), nil
}

// firstPlanStatus is the plan's status after its first workflow task
// (its agents resolved); bounded, so that with no worker the start
// still answers, with every step queued.
func (c *Client) firstPlanStatus(ctx context.Context, id string, in api.PlanInput) api.DelegationStatus {
	qctx, cancel := context.WithTimeout(ctx, startStatusTimeout)
	defer cancel()
	for qctx.Err() == nil {
		var now api.DelegationStatus
		v, err := c.Temporal.QueryWorkflow(qctx, id, "", api.StatusQuery)
		if err == nil && v.Get(&now) == nil && (now.Done || anyStarted(now)) {
			return now
		}
		select {
		case <-qctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	st := api.DelegationStatus{DelegationID: id, State: api.StateQueued, ParentSessionID: in.ParentSessionID, Deliver: in.Deliver,
		Plan: &api.PlanView{Name: in.Plan.Name, Attempt: in.Attempt, Budget: in.Plan.Budget}}
	for i, s := range api.TaskSteps(in.Plan) {
		st.Tasks = append(st.Tasks, api.TaskResult{Index: i, Name: s.Key, Profile: s.Agent, State: api.StateQueued})
		st.Plan.Steps = append(st.Plan.Steps, api.StepState{Key: s.Key, Path: s.Path, Agent: s.Agent, State: api.StateQueued})
	}
	st.Summarize(false)
	return st
}

func anyStarted(st api.DelegationStatus) bool {
	for _, t := range st.Tasks {
		if t.State != api.StateQueued {
			return true
		}
	}
	return false
}

// planDetails lists a plan's steps for the Temporal UI.
func planDetails(in api.PlanInput) string {
	var b strings.Builder
	if in.Plan.Description != "" {
		b.WriteString(in.Plan.Description + "\n\n")
	}
	for _, s := range api.TaskSteps(in.Plan) {
		first, _, _ := strings.Cut(strings.TrimSpace(s.Task), "\n")
		if r := []rune(first); len(r) > 120 {
			first = string(r[:120]) + "…"
		}
		where := strings.Join(s.Path, "/")
		if where != "" {
			where += "/"
		}
		fmt.Fprintf(&b, "- **%s%s** (%s): %s\n", where, s.Key, api.AgentName(s.Agent), first)
	}
	if in.Source != nil {
		fmt.Fprintf(&b, "\nfrom %s (%s)\n", in.Source.File, in.Source.Scope)
	}
	return b.String()
}

// ResumePlan runs a plan that ended failed or cancelled again under its
// ID: the steps it completed keep their results and do not run again;
// the rest run, as new sessions. With plan, that document replaces the
// old one: a step whose definition changed runs again, and so does every
// step after it. The new run is the caller's: it runs at the deeper of
// the plan's depth and caller.Depth (a child at the limit resumes no plan,
// not even a top-level one), with caller.Knobs.
func (c *Client) ResumePlan(ctx context.Context, id string, plan *api.Plan, args map[string]string, caller PlanCaller) (Envelope, error) {
	if err := api.CheckDepth(caller.Depth, 0); err != nil {
		return Envelope{}, err
	}
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return Envelope{}, c.temporalError(err, id)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != api.PlanWorkflowName {
		return Envelope{}, errcode.Errorf(errcode.InvalidInput, "%s is not a plan: resume a task's session with send", id)
	}
	if info.GetCloseTime() == nil {
		var st api.DelegationStatus
		if err := c.query(ctx, id, true, &st); err != nil {
			return Envelope{}, err
		}
		if !st.Done {
			return Envelope{}, errcode.Errorf(errcode.SessionRunning, "plan %s is still running: cancel it, or wait for it to end, before resuming it", id)
		}
		if st.State == api.StateCompleted {
			return Envelope{}, errcode.Errorf(errcode.InvalidInput, "plan %s completed: there is nothing to resume", id)
		}
		// It waits for its parent's ack: the parent has seen it end, the
		// new run delivers again.
		_ = c.Temporal.SignalWorkflow(ctx, id, "", api.AckSignal, api.AckRequest{By: "resume"})
		if err := c.Temporal.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil && !temporal.IsCanceledError(err) {
			return Envelope{}, c.temporalError(err, id)
		}
	}
	old, err := c.planRunInput(ctx, id)
	if err != nil {
		return Envelope{}, err
	}
	var last api.DelegationStatus
	if err := c.query(ctx, id, false, &last); err != nil {
		return Envelope{}, err
	}
	if last.State == api.StateCompleted {
		return Envelope{}, errcode.Errorf(errcode.InvalidInput, "plan %s completed: there is nothing to resume", id)
	}
	in := old
	in.Depth, in.Knobs = max(old.Depth, caller.Depth), caller.Knobs
	if err := api.CheckDepth(in.Depth, 0); err != nil {
		return Envelope{}, err
	}
	values := map[string]string{}
	for k, v := range old.Args {
		values[k] = v
	}
	for k, v := range args {
		values[k] = v
	}
	switch {
	case plan != nil:
		// The caller's own document: not the saved file it replaces (whose
		// project trust rules no longer apply to it), bound with the
		// arguments the plan ran with and those given now.
		in.Source = nil
		if err := bindPlan(&in, *plan, onlyDeclared(*plan, values)); err != nil {
			return Envelope{}, err
		}
		if err := resolvePlanAgents(in); err != nil {
			return Envelope{}, err
		}
	case len(args) > 0:
		return Envelope{}, errcode.New(errcode.InvalidInput, "new argument values need the plan to bind them to: pass the plan file with them")
	}
	var prior []api.StepState
	if last.Plan != nil {
		// The steps' results are their tasks' (the view leaves them out).
		steps := make([]api.StepState, len(last.Plan.Steps))
		for i, s := range last.Plan.Steps {
			if i < len(last.Tasks) {
				s.Turn = last.Tasks[i].Turn
			}
			steps[i] = s
		}
		var oldArgs map[string]string
		if old.Version >= 3 {
			// Before 3 the tasks were bound when the plan started.
			oldArgs = old.Args
		}
		prior = api.ReusableSteps(old.Plan, oldArgs, in.Plan, in.Args, steps)
		c.cancelLeftovers(ctx, steps)
	}
	in.Prior, in.Attempt = prior, old.Attempt+1
	if in.Attempt == 1 {
		in.Attempt = 2
	}
	return c.startPlan(ctx, id, in, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
}

// onlyDeclared is values without the names p does not declare (an
// argument the changed document dropped).
func onlyDeclared(p api.Plan, values map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range values {
		if _, ok := p.Args[k]; ok {
			out[k] = v
		}
	}
	return out
}

// cancelLeftovers cancels the sessions of steps that an ended plan still
// shows running (it was terminated, or cancelled through Temporal, while
// they ran): the resumed plan runs those steps again, and the old sessions
// must not work on in the same folder beside them.
func (c *Client) cancelLeftovers(ctx context.Context, steps []api.StepState) {
	for _, s := range steps {
		if s.State == api.StateRunning && s.SessionID != "" {
			_ = c.Temporal.SignalWorkflow(ctx, s.SessionID, "", api.CancelSignal, api.CancelRequest{Reason: "its plan is resumed"})
		}
	}
}

// planRunInput is the input the plan's latest run started with (its
// history's first event).
func (c *Client) planRunInput(ctx context.Context, id string) (api.PlanInput, error) {
	var in api.PlanInput
	iter := c.Temporal.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return in, errcode.Errorf(errcode.SessionNotFound, "plan %s has no history", id)
	}
	ev, err := iter.Next()
	if err != nil {
		return in, c.temporalError(err, id)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || len(attrs.GetInput().GetPayloads()) == 0 {
		return in, errcode.Errorf(errcode.Failed, "plan %s: its history does not start with its input", id)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(attrs.GetInput().GetPayloads()[0], &in); err != nil {
		return in, errcode.Wrap(errcode.Failed, err, fmt.Sprintf("plan %s: cannot read its input: %v", id, err))
	}
	return in, nil
}

// findPlan reads a saved plan by name, as the service's user sees the
// plan files from cwd.
func findPlan(cwd, name string) (api.Plan, api.PlanSource, error) {
	return profiles.FindPlan(profiles.Options{Cwd: cwd, AgentDir: profiles.DefaultAgentDir(), PromptDirs: profiles.DefaultPromptDirs()}, name)
}
