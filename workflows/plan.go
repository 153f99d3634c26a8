package workflows

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Plan runs a plan document (docs/plans.md): each task step is a session
// this workflow starts (or a session's next turn, for a step that
// continues another), its groups run in sequence, side by side or in
// rounds. Every step's start and result is in this workflow's history, so
// a crash anywhere re-runs no finished step: the replay reaches the same
// decisions and waits for what was still running.
//
// It answers a delegation's status, wait, cancel and ack, with its task
// steps as the tasks: every caller of a delegation reads a plan as one.
func Plan(ctx workflow.Context, in api.PlanInput) (api.DelegationStatus, error) {
	p, err := newPlanRun(ctx, in)
	if err != nil {
		return api.DelegationStatus{}, err
	}
	return p.run(ctx)
}

// planNode is a plan's tree as the run walks it: a task step (task >= 0)
// or a group.
type planNode struct {
	task     int
	key      string
	seq      []*planNode
	parallel bool
	loop     *api.Loop
}

type planRun struct {
	in       api.PlanInput
	id       string
	root     []*planNode
	steps    []api.PlanStep
	byKey    map[string]int
	state    []api.StepState
	resolved []profiles.ResolvedTask
	// before is api.RunsBefore of the plan: which steps end before which
	// start (set by resolve).
	before   [][]bool
	limit    int
	running  int
	cancel   bool
	stopped  *errcode.Info
	finished bool
	// delivered: the parent acknowledged the results (Deliver).
	delivered bool
	// Every turn the plan waits for has a number, the session's NotifyIndex:
	// turns[n] is its result once TaskDone (or the session's end) brought it,
	// turnOf[n] its step; latest[session] the newest number sent to a
	// session, which its end answers if no TaskDone did.
	next      int
	turns     map[int]*api.TurnResult
	turnOf    map[int]int
	turnOfSid map[int]string
	latest    map[string]int
	// gateCancel stops step i's running gate (a cancel of the plan).
	gateCancel []workflow.CancelFunc
	// spent counts the plan's tool calls and usage so far (its budget).
	spentCalls int
	spent      api.Usage
}

func newPlanRun(ctx workflow.Context, in api.PlanInput) (*planRun, error) {
	// As the plan's version checked it when it started: a plan accepted
	// then still replays and runs.
	if err := api.ValidatePlanAsOf(in.Plan, max(in.Version, 1)); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.CodeOf(err)), err)
	}
	p := &planRun{
		in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID, steps: api.TaskSteps(in.Plan),
		byKey: map[string]int{}, turns: map[int]*api.TurnResult{}, turnOf: map[int]int{}, turnOfSid: map[int]string{}, latest: map[string]int{},
	}
	p.limit = in.Plan.Concurrency
	if p.limit == 0 {
		p.limit = in.MaxConcurrency
	}
	if p.limit == 0 {
		p.limit = api.DefaultMaxConcurrency
	}
	if p.in.Attempt == 0 {
		p.in.Attempt = 1
	}
	// Each attempt numbers its turns apart from the earlier ones': a
	// session of an earlier attempt that still reports (a plan terminated,
	// then resumed) cannot answer a turn of this one.
	if p.in.Version >= 2 {
		p.next = (p.in.Attempt - 1) * turnsPerAttempt
	}
	p.gateCancel = make([]workflow.CancelFunc, len(p.steps))
	p.state = make([]api.StepState, len(p.steps))
	for i, s := range p.steps {
		p.byKey[s.Key] = i
	}
	for i, s := range p.steps {
		p.state[i] = api.StepState{Key: s.Key, Path: s.Path, Agent: api.AgentName(p.agentOf(i)), State: api.StateQueued}
	}
	next := 0
	p.root = buildNodes(in.Plan.Steps, &next)
	if err := p.registerHandlers(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// buildNodes turns steps into nodes, numbering task steps in the order
// api.TaskSteps lists them.
func buildNodes(steps []api.Step, next *int) []*planNode {
	var out []*planNode
	for _, s := range steps {
		if s.IsTask() {
			out = append(out, &planNode{task: *next, key: s.Key})
			*next++
			continue
		}
		n := &planNode{task: -1, key: s.Key, loop: s.Loop}
		if len(s.Parallel) > 0 {
			n.parallel = true
			n.seq = buildNodes(s.Parallel, next)
		} else {
			n.seq = buildNodes(s.Steps, next)
		}
		out = append(out, n)
	}
	return out
}

// tasksOf lists the task steps under nodes.
func tasksOf(nodes []*planNode) []int {
	var out []int
	for _, n := range nodes {
		if n.task >= 0 {
			out = append(out, n.task)
		} else {
			out = append(out, tasksOf(n.seq)...)
		}
	}
	return out
}

func (p *planRun) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, api.StatusQuery, func() (api.DelegationStatus, error) { return p.status(), nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, api.WaitUpdate, func(ctx workflow.Context, _ api.WaitRequest) (api.DelegationStatus, error) {
		if err := workflow.Await(ctx, func() bool { return p.finished }); err != nil {
			return api.DelegationStatus{}, err
		}
		return p.status(), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, api.CancelUpdate, func(ctx workflow.Context, _ api.CancelRequest) (api.CancelResult, error) {
		prior := p.status().State
		applied := !p.finished
		if applied {
			p.cancelAll(ctx)
		}
		return api.CancelResult{CancelApplied: applied, PriorStatus: prior}, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, api.AckUpdate,
		func(_ workflow.Context, _ api.AckRequest) (api.DelegationStatus, error) {
			p.delivered = true
			return p.status(), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(api.AckRequest) error {
			if !p.finished {
				return temporal.NewApplicationError("the plan has not finished: there is nothing to acknowledge yet", string(errcode.SessionRunning))
			}
			return nil
		}}); err != nil {
		return err
	}
	workflow.Go(ctx, p.receiveSignals)
	return nil
}

// receiveSignals serves the plan's signals as a delegation's
// (delegationSignals).
func (p *planRun) receiveSignals(ctx workflow.Context) {
	delegationSignals(ctx,
		func(msg api.TaskDone) { p.turnEnded(msg.Index, msg.SessionID, msg.Turn) },
		func() {
			if !p.finished {
				p.cancelAll(ctx)
			}
		},
		func() {
			if p.finished {
				p.delivered = true
			}
		})
}

// turnsPerAttempt spaces the turn numbers of a plan's attempts: far more
// than the turns one attempt waits for (MaxPlanRuns, each with a few
// corrective turns).
const turnsPerAttempt = 1_000_000

// turnEnded records turn n's result, once, when it comes from the session
// the turn was sent to.
func (p *planRun) turnEnded(n int, sid string, t api.TurnResult) {
	if _, waited := p.turnOf[n]; !waited || p.turns[n] != nil || (sid != "" && sid != p.turnOfSid[n]) {
		return
	}
	p.turns[n] = &t
}

// cancelAll stops the plan: running steps' sessions get the cancel, steps
// not started are cancelled, finished ones keep their results.
func (p *planRun) cancelAll(ctx workflow.Context) {
	p.cancel = true
	for _, stop := range p.gateCancel {
		if stop != nil {
			stop()
		}
	}
	for _, sid := range p.runningSessions() {
		workflow.SignalExternalWorkflow(ctx, sid, "", api.CancelSignal, api.CancelRequest{Reason: "plan cancelled"})
	}
}

// runningSessions are the sessions whose turn the plan waits for, in
// step order (deterministic, unlike the map).
func (p *planRun) runningSessions() []string {
	var out []string
	for i := range p.state {
		if p.state[i].State == api.StateRunning && p.state[i].SessionID != "" && !slices.Contains(out, p.state[i].SessionID) {
			out = append(out, p.state[i].SessionID)
		}
	}
	return out
}

func (p *planRun) run(ctx workflow.Context) (api.DelegationStatus, error) {
	upsertChanged(ctx, keyword{api.StatusKey, string(api.StateRunning)}, keyword{api.AgentKey, "plan"},
		keyword{api.ParentSessionKey, p.in.ParentSessionID})
	if err := p.resolve(ctx); err != nil {
		return p.status(), err
	}
	if p.refused() {
		p.finished = true
	} else {
		p.applyPrior()
		p.sequence(ctx, p.root, 0)
		p.finished = true
	}
	if ctx.Err() != nil {
		p.cancelledByTemporal(ctx)
		return p.status(), ctx.Err()
	}
	p.showDetails(ctx)
	return settle(ctx, p.status, p.in.Deliver, p.in.AckTTLSeconds, func() bool { return p.delivered })
}

// cancelledByTemporal passes a cancel of the plan's own workflow (the UI,
// `temporal workflow cancel`) to its running steps, and stays open until
// they have it: the server drops what a closed workflow asked of others.
func (p *planRun) cancelledByTemporal(ctx workflow.Context) {
	if !temporal.IsCanceledError(ctx.Err()) {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	p.cancel = true
	var sent []workflow.Future
	for _, sid := range p.runningSessions() {
		sent = append(sent, workflow.SignalExternalWorkflow(dctx, sid, "", api.CancelSignal, api.CancelRequest{Reason: "plan cancelled"}))
	}
	for _, f := range sent {
		_ = f.Get(dctx, nil)
	}
	for i := range p.state {
		if !p.state[i].State.Terminal() {
			p.state[i].State, p.state[i].Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the plan was cancelled")
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(dctx, api.StatusKey.ValueSet(string(api.StateCancelled)))
}

// resolve resolves every step's agent before any child starts: an unknown
// or denied agent refuses the whole plan, naming the step.
func (p *planRun) resolve(ctx workflow.Context) error {
	req := profiles.ResolveRequest{Depth: p.in.Depth + 1, Knobs: p.in.Knobs}
	p.before = api.RunsBefore(p.in.Plan)
	early := 0
	for i, s := range p.steps {
		first := s.Continue == "" && !slices.Contains(p.before[i], true) && early < p.limit
		if first {
			early++
		}
		req.Tasks = append(req.Tasks, profiles.ResolveTask{Profile: p.agentOf(i), Cwd: p.cwdOf(i), Model: s.Model,
			TimeoutSeconds: s.Timeout, Tool: p.in.Tool, Early: first && p.in.Attempt == 1})
	}
	out, err := resolveTasks(ctx, p.in.Host, api.CurrentVersion, req)
	if err != nil {
		return err
	}
	p.resolved = out
	return nil
}

// agentOf is step i's profile: its own, the continued step's, or the
// plan's default.
func (p *planRun) agentOf(i int) string {
	s := p.steps[i]
	if s.Continue != "" {
		return p.agentOf(p.byKey[s.Continue])
	}
	return cmp(s.Agent, p.in.Profile)
}

// cwdOf is step i's folder.
func (p *planRun) cwdOf(i int) string {
	s := p.steps[i]
	if s.Continue != "" {
		return p.cwdOf(p.byKey[s.Continue])
	}
	if s.Cwd != "" && !filepath.IsAbs(s.Cwd) {
		// A step's folder is relative to the plan's.
		return filepath.Join(p.in.Cwd, s.Cwd)
	}
	return cmp(s.Cwd, p.in.Cwd)
}

// refused marks the plan refused when a step's agent did not resolve: no
// step runs.
func (p *planRun) refused() bool {
	bad := -1
	for i, r := range p.resolved {
		if r.Error != nil && p.steps[i].Continue == "" {
			bad = i
			break
		}
	}
	if bad < 0 {
		return false
	}
	e := *p.resolved[bad].Error
	e.Message = fmt.Sprintf("step %q: %s", p.steps[bad].Key, e.Message)
	p.stopped = &e
	for i := range p.state {
		if i == bad {
			p.state[i].State, p.state[i].Error = api.StateFailed, &e
		} else {
			p.state[i].State, p.state[i].Error = api.StateSkipped, errcode.NewInfo(errcode.Skipped, "the plan was refused before any step ran: "+e.Message)
		}
	}
	return true
}

// applyPrior keeps what an earlier attempt finished (a resumed plan): a
// completed step, and a loop's steps only when the loop had ended.
func (p *planRun) applyPrior() {
	prior := map[string]api.StepState{}
	for _, s := range p.in.Prior {
		if s.State == api.StateCompleted {
			prior[s.Key] = s
		}
	}
	if len(prior) == 0 {
		return
	}
	var keep func(nodes []*planNode)
	keep = func(nodes []*planNode) {
		for _, n := range nodes {
			if n.task >= 0 {
				if s, ok := prior[p.steps[n.task].Key]; ok {
					s.Reused, s.Path = true, p.steps[n.task].Path
					p.state[n.task] = s
					if s.Turn != nil {
						// What it spent counts against the plan's budget.
						p.spentCalls += workCalls(s.Turn.Result)
						p.spent = p.spent.Add(s.Turn.Usage)
					}
				}
				continue
			}
			if n.loop != nil {
				u, ok := prior[n.loop.Until.Step]
				if !ok || !n.loop.Until.Holds(u.Turn) {
					continue
				}
			}
			keep(n.seq)
		}
	}
	keep(p.root)
}

// sequence runs nodes one after another; a failure skips the rest (the
// lane) and reports false.
func (p *planRun) sequence(ctx workflow.Context, nodes []*planNode, round int) bool {
	for k, n := range nodes {
		if !p.node(ctx, n, round) {
			p.skipRest(nodes[k+1:], n)
			return false
		}
	}
	return true
}

// skipRest marks the task steps of nodes skipped because failed did not
// finish (or cancelled, when the plan was).
func (p *planRun) skipRest(nodes []*planNode, failed *planNode) {
	why := fmt.Sprintf("group %q did not finish", failed.key)
	if failed.task >= 0 {
		why = fmt.Sprintf("step %q ended %s", p.steps[failed.task].Key, p.state[failed.task].State)
	} else {
		// A group: name the step in it that failed.
		for _, i := range tasksOf(failed.seq) {
			if st := p.state[i].State; st == api.StateFailed || st == api.StateTimedOut || st == api.StateCancelled {
				why = fmt.Sprintf("step %q ended %s", p.steps[i].Key, st)
				break
			}
		}
	}
	for _, i := range tasksOf(nodes) {
		if p.state[i].State.Terminal() && !p.state[i].Reused {
			continue
		}
		switch {
		case p.cancel:
			p.state[i].State, p.state[i].Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the plan was cancelled before this step started")
		case p.stopped != nil:
			p.state[i].State, p.state[i].Error = api.StateSkipped, errcode.NewInfo(errcode.Skipped, "not started: "+p.stopped.Message)
		default:
			p.state[i].State, p.state[i].Error = api.StateSkipped, errcode.NewInfo(errcode.Skipped, "not started: "+why)
		}
		p.state[i].Reused = false
	}
}

// node runs one node; true when it finished.
func (p *planRun) node(ctx workflow.Context, n *planNode, round int) bool {
	switch {
	case n.task >= 0:
		return p.step(ctx, n.task, round)
	case n.loop != nil:
		return p.loop(ctx, n)
	case n.parallel:
		ok := make([]bool, len(n.seq))
		wg := workflow.NewWaitGroup(ctx)
		for k, m := range n.seq {
			wg.Add(1)
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer wg.Done()
				ok[k] = p.node(ctx, m, round)
			})
		}
		wg.Wait(ctx)
		return !slices.Contains(ok, false)
	default:
		return p.sequence(ctx, n.seq, round)
	}
}

// loop runs its body in rounds until its until holds after one of the
// body's steps, at most Rounds rounds; the step until names fails with
// LOOP_EXHAUSTED when it never held.
func (p *planRun) loop(ctx workflow.Context, n *planNode) bool {
	until := p.byKey[n.loop.Until.Step]
	if p.state[until].Reused && n.loop.Until.Holds(p.state[until].Turn) {
		return true // an earlier attempt finished this loop
	}
	for round := 1; round <= n.loop.Rounds(); round++ {
		for k, m := range n.seq {
			if !p.node(ctx, m, round) {
				p.skipRest(n.seq[k+1:], m)
				return false
			}
			st := p.state[until]
			if round == n.loop.Rounds() && st.Round == round && !n.loop.Until.Holds(st.Turn) {
				// The last round's until step did not hold: what follows it
				// (a fix) would go unchecked.
				break
			}
			if st.Round == round && st.State == api.StateCompleted && n.loop.Until.Holds(st.Turn) {
				// Done: the round's later steps are not needed.
				for _, i := range tasksOf(n.seq[k+1:]) {
					if p.state[i].State == api.StateQueued {
						p.state[i].State = api.StateSkipped
					}
				}
				return true
			}
		}
	}
	st := &p.state[until]
	want := n.loop.Until.Verdict
	if want == "" {
		want = "status " + n.loop.Until.Status
	}
	st.State = api.StateFailed
	st.Error = errcode.NewInfo(errcode.LoopExhausted, fmt.Sprintf("loop %q ran its %d rounds and step %q never ended with %s (its last verdict: %q)",
		cmp(n.key, "loop"), n.loop.Rounds(), st.Key, want, st.Verdict))
	return false
}

// step runs task step i in round: its child's turn, then its verdict and
// gate checks with corrective turns; true when it completed.
func (p *planRun) step(ctx workflow.Context, i, round int) bool {
	st := &p.state[i]
	// The UI's "current details" show the steps as they stand.
	defer p.showDetails(ctx)
	if st.Reused {
		return true
	}
	if p.cancel {
		st.State, st.Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the plan was cancelled before this step started")
		return false
	}
	if p.stopped == nil {
		if why := p.in.Plan.Budget.Exceeded(p.spentCalls, p.spent); why != "" {
			p.stopped = errcode.NewInfo(errcode.BudgetExceeded, fmt.Sprintf("the plan's budget is spent (%s): step %q and the steps after it did not start", why, st.Key))
		}
	}
	if p.stopped != nil {
		st.State, st.Error = api.StateSkipped, p.stopped
		return false
	}
	if err := workflow.Await(ctx, func() bool { return p.running < p.limit || p.cancel }); err != nil || p.cancel {
		st.State, st.Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the plan was cancelled before this step started")
		return false
	}
	if why := p.in.Plan.Budget.Exceeded(p.spentCalls, p.spent); why != "" && p.stopped == nil {
		// Spent by the steps that ran while this one waited for its slot.
		p.stopped = errcode.NewInfo(errcode.BudgetExceeded, fmt.Sprintf("the plan's budget is spent (%s): step %q and the steps after it did not start", why, st.Key))
	}
	if p.stopped != nil {
		st.State, st.Error = api.StateSkipped, p.stopped
		return false
	}
	p.running++
	defer func() { p.running-- }()
	s := p.steps[i]
	st.State, st.Round, st.Turn, st.Error, st.Verdict, st.GateOutput = api.StateRunning, round, nil, nil, "", ""
	p.showDetails(ctx)
	var args map[string]string
	if p.in.Version >= 3 {
		// Before 3 the task was bound when the plan started.
		args = p.in.Args
	}
	prompt := api.ExpandTask(s.Task, round, args, p.view)
	if len(s.Verdicts) > 0 {
		prompt += fmt.Sprintf("\n\nWhen you call subagent_finalize, set verdict to one of: %s.", strings.Join(s.Verdicts, ", "))
	}
	turn := p.firstTurn(ctx, i, round, prompt)
	corrections, gates := 0, 0
	for {
		if turn == nil {
			st.State, st.Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the plan was cancelled")
			return false
		}
		p.spentCalls += workCalls(turn.Result)
		p.spent = p.spent.Add(turn.Usage)
		st.Turn = turn
		if f := turn.Result.Finalize; f != nil {
			st.Verdict = f.Verdict
		}
		if turn.State != api.StateCompleted || p.cancel {
			st.State, st.Error = turn.State, turn.Error
			if st.State == api.StateCompleted {
				st.State = api.StateCancelled
			}
			return false
		}
		if len(s.Verdicts) > 0 && !containsFold(s.Verdicts, st.Verdict) {
			if corrections >= api.DefaultMaxFinalizeRetries {
				st.State, st.Error = api.StateFailed, errcode.NewInfo(errcode.FinalizeMissing,
					fmt.Sprintf("step %q: the child finalized with verdict %q, not one of %s", st.Key, st.Verdict, strings.Join(s.Verdicts, ", ")))
				return false
			}
			corrections++
			turn = p.nextTurn(ctx, i, fmt.Sprintf("Your subagent_finalize call gave the verdict %q, and this task needs one of: %s. Call subagent_finalize again with the same result and verdict set to one of them.",
				st.Verdict, strings.Join(s.Verdicts, ", ")))
			continue
		}
		if s.Gate != nil {
			res, err := p.gate(ctx, i)
			// A run the worker's death cut short ran too (the activity's
			// retry ran the command again): count each. From PlanVersion 4
			// a gate that failed for good counts the runs its attempts
			// started (none for one refused before it ran); before, 1.
			if p.in.Version >= 4 && err != nil && !temporal.IsCanceledError(err) {
				st.GateRuns += gateRunsOf(err)
			} else {
				st.GateRuns += max(res.Runs, 1)
			}
			if p.cancel || temporal.IsCanceledError(err) || ctx.Err() != nil {
				st.State, st.Error = api.StateCancelled, errcode.NewInfo(errcode.Cancelled, "the plan was cancelled while the step's gate ran")
				return false
			}
			if err != nil {
				st.State, st.Error = api.StateFailed, gateError(st.Key, err)
				return false
			}
			if !res.Passed() {
				st.GateOutput = res.Output
				if gates >= s.Gate.GateAttempts() {
					st.State, st.Error = api.StateFailed, errcode.NewInfo(errcode.GateFailed,
						fmt.Sprintf("step %q: the gate `%s` %s after %d corrective round(s):\n%s", st.Key, api.GateCommandText(s.Gate.Command, p.in.Args), gateEnd(res), gates, res.Output))
					return false
				}
				gates++
				turn = p.nextTurn(ctx, i, gateFeedback(api.GateCommandText(s.Gate.Command, p.in.Args), res))
				continue
			}
			st.GateOutput = ""
		}
		st.State = api.StateCompleted
		return true
	}
}

// workCalls are a run's tool calls but its finalize, which a budget does
// not count (the child's own budget does not either).
func workCalls(r api.RunPiResult) int {
	if r.Finalize != nil && r.ToolCalls > 0 {
		return r.ToolCalls - 1
	}
	return r.ToolCalls
}

// childBudget is what step i's child may spend: its own budget, within
// what the plan's budget has left (at least one of each, as a step only
// starts while the plan has some left).
func (p *planRun) childBudget(i int) *api.Budget {
	own, plan := p.steps[i].Budget, p.in.Plan.Budget
	if plan == nil {
		return own
	}
	b := api.Budget{}
	if own != nil {
		b = *own
	}
	tighter := func(cur, left int) int {
		left = max(left, 1)
		if cur == 0 || left < cur {
			return left
		}
		return cur
	}
	if plan.ToolCalls > 0 {
		b.ToolCalls = tighter(b.ToolCalls, plan.ToolCalls-p.spentCalls)
	}
	if plan.Tokens > 0 {
		b.Tokens = tighter(b.Tokens, plan.Tokens-int(p.spent.Tokens()))
	}
	if plan.Cost > 0 {
		if left := plan.Cost - p.spent.Cost; b.Cost == 0 || left < b.Cost {
			b.Cost = max(left, 0.0001)
		}
	}
	return &b
}

func containsFold(list []string, s string) bool {
	for _, w := range list {
		if strings.EqualFold(w, s) {
			return true
		}
	}
	return false
}

// gateError is a gate that could not run: the activity's own code where it
// has one (PERMISSION_DENIED of an untrusted project), else GATE_FAILED.
func gateError(key string, err error) *errcode.Info {
	code := errcode.GateFailed
	msg := err.Error()
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		msg = app.Message()
		if c, ok := errcode.Parse(app.Type()); ok {
			code = c
		}
	}
	return errcode.NewInfo(code, fmt.Sprintf("step %q: the gate could not run: %s", key, msg))
}

// gateRunsOf is how many times a gate that failed for good started its
// command: its last attempt's error says (api.GateRunCount), or, when that
// attempt timed out, its last heartbeat (one that predates the count
// still says a run started); nothing says none ran.
func gateRunsOf(err error) int {
	var n api.GateRunCount
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() && app.Details(&n) == nil {
		return n.Runs
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) && timeout.HasLastHeartbeatDetails() && timeout.LastHeartbeatDetails(&n) == nil {
		return max(n.Runs, 1)
	}
	return 0
}

// gateEnd says how a failed gate ended.
func gateEnd(r api.GateResult) string {
	if r.TimedOut {
		return "timed out"
	}
	return fmt.Sprintf("failed (exit %d)", r.ExitCode)
}

// gateFeedback is what a failed gate tells the child: the command and
// the end of its output, which is where a test run says why.
func gateFeedback(command string, r api.GateResult) string {
	return fmt.Sprintf("The check `%s` %s after your work:\n\n```\n%s\n```\n\nFix what it reports, then call subagent_finalize again with your result.", command, gateEnd(r), r.Output)
}

// gateActivitySlackSec is the gate activity's time beyond the command's
// own timeout: the worker kills the command at its timeout and needs a
// moment to report.
const gateActivitySlackSec = 30

// gate runs step i's gate command in its folder, on the worker of the
// plan's host.
func (p *planRun) gate(ctx workflow.Context, i int) (api.GateResult, error) {
	g := p.steps[i].Gate
	ctx, stop := workflow.WithCancel(ctx)
	p.gateCancel[i] = stop
	defer func() { p.gateCancel[i] = nil }()
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           hostQueue(ctx, p.in.Host),
		StartToCloseTimeout: time.Duration(g.GateTimeout()+gateActivitySlackSec) * time.Second,
		// The gate heartbeats every 10 s: a worker that dies mid-command is
		// noticed within this, not at the command's timeout.
		HeartbeatTimeout: 30 * time.Second,
		// A worker that dies mid-command runs it once more elsewhere; a
		// command that fails is a result, not an error, and never retried.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:     fmt.Sprintf("gate of %s: %s", p.steps[i].Key, g.Command),
	})
	var res api.GateResult
	err := workflow.ExecuteActivity(actx, api.RunGateActivityName,
		api.GateInput{Command: g.Command, Cwd: p.cwdOf(i), TimeoutSeconds: g.GateTimeout(), Step: p.steps[i].Key, Source: p.in.Source, Args: p.in.Args}).Get(ctx, &res)
	return res, err
}

// showDetails sets the plan's current details for the Temporal UI: a
// table of its steps with their state.
func (p *planRun) showDetails(ctx workflow.Context) {
	var b strings.Builder
	b.WriteString("| step | agent | state | round | gate runs | session |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, st := range p.state {
		key := strings.Join(append(slices.Clone(st.Path), st.Key), "/")
		b.WriteString(fmt.Sprintf("| %s | %s | %s | %d | %d | `%s` |\n", key, st.Agent, st.State, st.Round, st.GateRuns, st.SessionID))
	}
	if p.stopped != nil {
		b.WriteString(fmt.Sprintf("\nstopped: %s: %s\n", p.stopped.Code, p.stopped.Message))
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// view is what step key's result gives a later step's task.
func (p *planRun) view(key string) (api.StepView, bool) {
	i, ok := p.byKey[key]
	if !ok {
		return api.StepView{}, false
	}
	st := p.state[i]
	v := api.StepView{Status: string(st.State), Verdict: st.Verdict, Session: st.SessionID}
	if st.Turn != nil {
		v.Output = st.Turn.Result.Output
	}
	return v, true
}

// firstTurn runs step i's task: a new session (its ID from the plan's,
// the key, the round and the attempt), or the next turn of the session of
// the step it continues.
func (p *planRun) firstTurn(ctx workflow.Context, i, round int, prompt string) *api.TurnResult {
	s := p.steps[i]
	st := &p.state[i]
	st.Runs++
	if s.Continue != "" {
		st.SessionID = p.state[p.byKey[s.Continue]].SessionID
		return p.sendTurn(ctx, i, prompt, s.Files)
	}
	st.SessionID = api.PlanStepSessionID(p.id, s.Key, round, p.in.Attempt)
	n := p.expect(i, st.SessionID)
	if !p.startSession(ctx, i, n, prompt, s.Files) {
		return p.turns[n]
	}
	return p.await(ctx, n)
}

// nextTurn sends step i's session a corrective prompt.
func (p *planRun) nextTurn(ctx workflow.Context, i int, prompt string) *api.TurnResult {
	p.state[i].Runs++
	return p.sendTurn(ctx, i, prompt, nil)
}

// sendTurn queues prompt as the next turn of step i's session; a session
// that has closed (its idle time passed) starts again under its ID, on
// the same pi session file.
func (p *planRun) sendTurn(ctx workflow.Context, i int, prompt string, files []api.FileSpec) *api.TurnResult {
	sid := p.state[i].SessionID
	n := p.expect(i, sid)
	req := api.SendRequest{Prompt: prompt, Files: files, NotifyWorkflowID: p.id, NotifyIndex: n, Name: p.steps[i].Key}
	if !sendToSession(ctx, p.in.Version, sid, true, req) {
		if !p.startSession(ctx, i, n, prompt, files) {
			return p.turns[n]
		}
	} else if p.cancel {
		// Cancelled while the send was on its way: the cancel signal went
		// out before the session had the turn.
		workflow.SignalExternalWorkflow(ctx, sid, "", api.CancelSignal, api.CancelRequest{Reason: "plan cancelled"})
	}
	return p.await(ctx, n)
}

// sessionVersion is the version of the sessions the plan starts: 5 from
// PlanVersion 5 (they close after each turn, and a continuing step
// reopens them), else 4, as such a plan started them when it ran.
func (p *planRun) sessionVersion() int {
	if p.in.Version >= 5 {
		return api.CurrentVersion
	}
	return 4
}

// expect numbers a turn step i waits for from session sid.
func (p *planRun) expect(i int, sid string) int {
	p.next++
	p.turnOf[p.next] = i
	p.turnOfSid[p.next] = sid
	p.latest[sid] = p.next
	return p.next
}

// await waits for turn n; nil when the plan is cancelled by Temporal.
func (p *planRun) await(ctx workflow.Context, n int) *api.TurnResult {
	if err := workflow.Await(ctx, func() bool { return p.turns[n] != nil }); err != nil {
		return nil
	}
	return p.turns[n]
}

// startSession starts step i's session (the session of the step it
// continues, for a continuing step) with prompt as its first turn,
// numbered n; false, with turn n failed, when it could not start.
func (p *planRun) startSession(ctx workflow.Context, i, n int, prompt string, files []api.FileSpec) bool {
	s := p.steps[i]
	owner := i
	for p.steps[owner].Continue != "" {
		owner = p.byKey[p.steps[owner].Continue]
	}
	r := p.resolved[owner]
	sid := p.state[i].SessionID
	child := r.Child
	// A continuing step's session is its owner's, in the owner's
	// worktree or none.
	profiles.Isolate(&child, p.steps[owner].Worktree, p.steps[owner].BaseRef)
	child.Depth = p.in.Depth + 1
	child.Budget = p.childBudget(i)
	child.Then = p.startsAfter(i)
	if s.Context == "fork" {
		child.ForkFrom = p.in.ParentSessionFile
	}
	agent, cwd := p.agentOf(i), p.cwdOf(i)
	if p.state[i].Turn == nil {
		p.state[i].Agent = api.AgentName(agent)
	}
	in := api.SessionInput{
		SessionID: sid, Agent: agent, Cwd: cwd, Prompt: prompt, Files: files, Name: s.Key,
		ParentSessionID: p.in.ParentSessionID, Child: child, Host: p.in.Host,
		MaxFinalizeRetries: r.MaxFinalizeRetries, IdleTTLSeconds: p.in.IdleTTLSeconds,
		NotifyWorkflowID: p.id, NotifyIndex: n, Version: p.sessionVersion(),
		QuestionTimeoutSeconds: r.QuestionTimeoutSeconds,
	}
	task := api.TaskSpec{Name: s.Key, Prompt: prompt, Cwd: cwd}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: sid,
		// A step whose session closed runs its next turn under the same ID.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// The steps' sessions outlive the plan: send, status and output
		// address them until their idle time passes.
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		TypedSearchAttributes: api.SessionAttributes(api.AgentName(agent), cwd, api.StateRunning, p.in.ParentSessionID),
		Memo:                  api.SessionMemo(task, p.id, p.in.Host),
		StaticSummary:         fmt.Sprintf("plan step %s (%s)", s.Key, api.AgentName(agent)) + api.NestedUnder(p.in.Depth, p.in.ParentSessionID),
		StaticDetails:         api.TaskDetails(s.Key, api.AgentName(agent), cwd, prompt, p.in.ParentSessionID, p.id, p.in.Depth),
	})
	fut := workflow.ExecuteChildWorkflow(cctx, api.SessionWorkflowName, in)
	if err := fut.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		p.turns[n] = &api.TurnResult{State: api.StateFailed, Error: errcode.NewInfo(errcode.Failed, "could not start the step's session: "+err.Error())}
		return false
	}
	if p.cancel {
		// Cancelled while the session was starting: the plan's cancel
		// could not reach it yet.
		workflow.SignalExternalWorkflow(ctx, sid, "", api.CancelSignal, api.CancelRequest{Reason: "plan cancelled"})
	}
	// The session signals each turn's end; if it ends without doing so
	// (terminated from the UI), its completion answers its latest turn.
	workflow.Go(ctx, func(ctx workflow.Context) {
		var res api.SessionResult
		err := fut.Get(ctx, &res)
		if p.in.Version >= 5 && sessionResultOf(err, &res) {
			// It closed as its turn ended (failed or cancelled).
			err = nil
		}
		last := p.latest[sid]
		if last == 0 || p.turns[last] != nil {
			return
		}
		switch {
		case err == nil && res.LastTurn != nil && res.LastTurn.Turn > 0:
			t := *res.LastTurn
			p.turns[last] = &t
		case err == nil:
			p.turns[last] = &api.TurnResult{State: res.State, Error: errcode.NewInfo(errcode.Failed, "the step's session ended without a result")}
		case errors.As(err, new(*temporal.CanceledError)):
			p.turns[last] = &api.TurnResult{State: api.StateCancelled, Error: errcode.NewInfo(errcode.Cancelled, "the step's session was cancelled")}
		default:
			p.turns[last] = &api.TurnResult{State: api.StateFailed, Error: errcode.NewInfo(errcode.Failed, err.Error())}
		}
	})
	return true
}

// startsAfter are the runs whose children start early once step i's child
// has finalized (api.RunPiInput.Then): the steps whose every other
// predecessor ends before i starts, so that i's end is what they wait
// for. Only a step that starts a session of its own, in no worktree (the
// worker keeps no child for one), that no earlier attempt already ran.
// None after a step with a gate: its command may run for minutes, past
// what a child started early waits for its task.
func (p *planRun) startsAfter(i int) []api.RunPiInput {
	if p.steps[i].Gate != nil {
		return nil
	}
	before := p.before
	var out []api.RunPiInput
	for j, s := range p.steps {
		if !before[j][i] || s.Continue != "" || s.Worktree || p.state[j].Reused || p.resolved[j].Error != nil {
			continue
		}
		last := true
		for k := range p.steps {
			if k != i && before[j][k] && !before[i][k] {
				last = false
				break
			}
		}
		if !last {
			continue
		}
		in := p.resolved[j].Child
		in.Cwd, in.Depth = p.cwdOf(j), p.in.Depth+1
		out = append(out, in)
	}
	return out
}

// status is the plan as a delegation whose tasks are its task steps.
func (p *planRun) status() api.DelegationStatus {
	st := api.DelegationStatus{
		DelegationID: p.id, Done: p.finished, Deliver: p.in.Deliver, Delivered: p.delivered, ParentSessionID: p.in.ParentSessionID,
		Plan: &api.PlanView{Name: p.in.Plan.Name, Attempt: p.in.Attempt, Budget: p.in.Plan.Budget,
			SpentToolCalls: p.spentCalls, Stopped: p.stopped},
	}
	for i, s := range p.state {
		// Each step's turn is its task's: once, and without its event
		// timeline, so that 64 steps' results stay far below Temporal's
		// 2 MB payload limit (the timeline is in the session's own status).
		turn := s.Turn
		if turn != nil {
			slim := *turn
			slim.Result.Timeline = nil
			turn = &slim
		}
		view := s
		view.Turn = nil
		st.Plan.Steps = append(st.Plan.Steps, view)
		t := api.TaskResult{Index: i, Name: s.Key, SessionID: s.SessionID, Profile: s.Agent, State: s.State, Turn: turn, Error: s.Error}
		if i < len(p.resolved) {
			t.Model = p.resolved[i].Child.Model
		}
		if s.Turn != nil && s.Turn.Result.Model != "" {
			t.Model = s.Turn.Result.Model
		}
		st.Tasks = append(st.Tasks, t)
	}
	st.Summarize(p.cancel)
	// Every turn's usage, corrective turns and earlier rounds included:
	// a step's result holds only its latest.
	st.Usage = p.spent
	if st.Done && st.State == api.StateCompleted && p.stopped != nil {
		st.State = api.StateFailed
	}
	return st
}
