package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// ScheduleRequest is what `subagents schedule` reads: its flags, or one
// JSON object (--input; the task tool's schedule parameter). Action says
// what to do; the rest is what the action takes (docs/schedules.md).
type ScheduleRequest struct {
	Action string `json:"action,omitempty"`
	// ID names the schedule (create: chosen from Name when empty).
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// When: one of At (once), Every, Cron and Calendar; Timezone for cron
	// and calendar.
	At       string `json:"at,omitempty"`
	Every    string `json:"every,omitempty"`
	Cron     string `json:"cron,omitempty"`
	Calendar string `json:"calendar,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Overlap and Catchup are the policies; End when it stops firing (a
	// time, or a duration from now); Note the schedule's note (pause and
	// resume: the pause note).
	Overlap string `json:"overlap,omitempty"`
	Catchup string `json:"catchup,omitempty"`
	End     string `json:"end,omitempty"`
	Note    string `json:"note,omitempty"`
	// Quiet delivers only the runs that did not complete.
	Quiet *bool `json:"quiet,omitempty"`
	// Cwd is the folder (its tasks' default cwd, whose next pi session
	// receives the results; list: the folder's schedules only).
	Cwd string `json:"cwd,omitempty"`
	// What it runs: Tasks (a delegation, as `start --input` takes them,
	// with Profile and MaxConcurrency) or Plan, a plan document or a saved
	// plan's name, with Args.
	Tasks []api.TaskSpec `json:"tasks,omitempty"`
	// Prompt and Agent are one task, said shortly.
	Prompt         string            `json:"prompt,omitempty"`
	Agent          string            `json:"agent,omitempty"`
	Profile        string            `json:"profile,omitempty"`
	MaxConcurrency int               `json:"max_concurrency,omitempty"`
	Plan           json.RawMessage   `json:"plan,omitempty"`
	Args           map[string]string `json:"args,omitempty"`
	Host           string            `json:"host,omitempty"`
	// Claim and ack (the extension's delivery): the session, its pi
	// process, the sessions whose gone pis it replaces, the results.
	By      string            `json:"by,omitempty"`
	Holder  *api.ResultHolder `json:"holder,omitempty"`
	Replace []string          `json:"replace,omitempty"`
	IDs     []string          `json:"ids,omitempty"`
	// Depth is the caller's subagent depth: a subagent does not schedule.
	Depth int `json:"-"`
}

// when is the request's when.
func (r ScheduleRequest) when() scheduleWhen {
	return scheduleWhen{at: r.At, every: r.Every, cron: r.Cron, calendar: r.Calendar, timezone: r.Timezone}
}

// hasWork reports whether the request says what to run.
func (r ScheduleRequest) hasWork() bool { return len(r.Tasks) > 0 || len(r.Plan) > 0 || r.Prompt != "" }

// The schedule's own memo holds what never changes (its folder); the
// action's memo, which every fire's workflow carries too and an update
// may change, what list and describe show.
const (
	memoCwd     = "cwd"
	memoName    = "name"
	memoSpec    = "spec"
	memoNote    = "note"
	memoCatchup = "catchup"
	// memoPausedAt is when `schedule pause` paused it (RFC 3339), and
	// memoPausedNote the note it paused it with: Temporal keeps no time of
	// a pause, and the note tells a pause of ours from a later one made
	// elsewhere (the UI), whose time is not known.
	memoPausedAt   = "pausedAt"
	memoPausedNote = "pausedNote"
)

// scheduleItems is the envelope of a schedule action.
func scheduleEnvelope(text string, items ...ScheduleItem) Envelope {
	if items == nil {
		items = []ScheduleItem{}
	}
	return Envelope{ContractVersion: ContractVersion, Op: "schedule", Backend: Backend, Done: true, Schedules: items, Count: len(items), Text: text}
}

// scheduledInput checks the request's work as a start would (names, each
// task valid, a plan bound and valid, a saved plan found now) and makes
// the schedule action's input.
func (c *Client) scheduledInput(id string, req ScheduleRequest) (api.ScheduledInput, string, error) {
	in := api.ScheduledInput{ScheduleID: id, Cwd: req.Cwd, Host: req.Host, Version: api.ScheduledVersion}
	if req.Quiet != nil {
		in.Quiet = *req.Quiet
	}
	if req.Prompt != "" {
		if len(req.Tasks) > 0 {
			return in, "", errcode.New(errcode.InvalidInput, "give tasks, or one task as prompt (and agent), not both")
		}
		req.Tasks = []api.TaskSpec{{Prompt: req.Prompt, Profile: req.Agent}}
	}
	switch {
	case len(req.Tasks) > 0 && len(req.Plan) > 0:
		return in, "", errcode.New(errcode.InvalidInput, "a schedule runs tasks or a plan, not both")
	case len(req.Tasks) > 0:
		start := StartRequest{Tasks: slices.Clone(req.Tasks), Profile: req.Profile, MaxConcurrency: req.MaxConcurrency, Host: req.Host}
		for i := range start.Tasks {
			if start.Tasks[i].Cwd == "" {
				start.Tasks[i].Cwd = req.Cwd
			}
			if start.Tasks[i].Context == "fork" {
				return in, "", errcode.Errorf(errcode.InvalidInput, "tasks[%d]: a scheduled task starts fresh: context fork needs a parent's conversation, and a fire has none", i)
			}
		}
		// Checked as a start checks it; the session IDs and a
		// concurrency from the settings are each fire's own.
		d, err := c.delegationInput(start)
		if err != nil {
			return in, "", err
		}
		// A start runs a batch's good items and reports a bad one on its
		// own; a schedule would fail that item at every fire: it is refused
		// now, while someone reads the answer.
		for i, t := range d.Tasks {
			if t.Rejected != nil {
				return in, "", errcode.Errorf(errcode.InvalidInput, "tasks[%d] (%s): %s", i, t.Name, t.Rejected.Message)
			}
		}
		d.SessionIDs, d.MaxConcurrency = nil, req.MaxConcurrency
		in.Delegation = &d
		names := make([]string, len(d.Tasks))
		for i, t := range d.Tasks {
			names[i] = t.Name
		}
		return in, strings.Join(names, ", "), nil
	case len(req.Plan) > 0:
		var name string
		if json.Unmarshal(req.Plan, &name) == nil {
			// A saved plan is read at each fire; it must exist now and
			// take these arguments, as a start of it would.
			if _, err := CheckPlan(PlanRequest{Name: name, Args: req.Args, Cwd: req.Cwd, Profile: req.Profile, MaxConcurrency: req.MaxConcurrency, Host: req.Host}); err != nil {
				return in, "", err
			}
			in.PlanName, in.PlanArgs, in.PlanProfile, in.PlanConcurrency = name, req.Args, req.Profile, req.MaxConcurrency
			return in, name, nil
		}
		p, err := api.ParsePlan(req.Plan)
		if err != nil {
			return in, "", err
		}
		pin, err := CheckPlan(PlanRequest{Plan: &p, Args: req.Args, Cwd: req.Cwd, Profile: req.Profile, MaxConcurrency: req.MaxConcurrency, Host: req.Host})
		if err != nil {
			return in, "", err
		}
		in.Plan = &pin
		return in, cmp.Or(p.Name, "plan"), nil
	}
	return in, "", errcode.New(errcode.InvalidInput, "say what the schedule runs: tasks (as `subagents start --input` takes them) or a plan (a document, or a saved plan's name)")
}

var slugRule = regexp.MustCompile(`[^a-z0-9]+`)

// newScheduleID is a readable ID made from name: its words, and a few
// random characters so that the same name in two folders does not clash.
func newScheduleID(name string) string {
	slug := strings.Trim(slugRule.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(slug) > 40 {
		slug = strings.TrimRight(slug[:40], "-")
	}
	if slug == "" {
		slug = "schedule"
	}
	return slug + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:6]
}

// CreateSchedule makes a schedule (docs/schedules.md): when it fires, its
// policies, and the delegation or plan each fire starts in req.Cwd.
func (c *Client) CreateSchedule(ctx context.Context, req ScheduleRequest) (Envelope, error) {
	if err := checkDepth(req, "create"); err != nil {
		return Envelope{}, err
	}
	if !strings.HasPrefix(req.Cwd, "/") {
		return Envelope{}, errcode.Errorf(errcode.InvalidInput, "cwd must be an absolute path, not %q", req.Cwd)
	}
	now := c.CurrentTime()
	spec, text, once, err := buildSpec(req.when(), now)
	if err != nil {
		return Envelope{}, err
	}
	if err := setEnd(&spec, req.End, now); err != nil {
		return Envelope{}, err
	}
	if err := checkFires(spec, text, now); err != nil {
		return Envelope{}, err
	}
	overlap, err := parseOverlap(req.Overlap)
	if err != nil {
		return Envelope{}, err
	}
	catchup, err := parseCatchup(req.Catchup)
	if err != nil {
		return Envelope{}, err
	}
	id := req.ID
	if id != "" {
		if err := api.ValidateScheduleID(id); err != nil {
			return Envelope{}, err
		}
	}
	in, what, err := c.scheduledInput(cmp.Or(id, "pending"), req)
	if err != nil {
		return Envelope{}, err
	}
	name := cmp.Or(strings.TrimSpace(req.Name), what)
	if id == "" {
		id = newScheduleID(name)
	}
	in.ScheduleID = id
	if err := api.ValidateScheduled(in); err != nil {
		return Envelope{}, err
	}
	if err := c.checkAgents(in); err != nil {
		return Envelope{}, err
	}
	opts := sdkclient.ScheduleOptions{
		ID:            id,
		Spec:          spec,
		Action:        c.scheduleAction(id, name, text, req.Note, req.Catchup, catchup, in),
		Overlap:       overlap,
		CatchupWindow: catchup,
		Note:          req.Note,
		Memo:          map[string]any{memoCwd: req.Cwd},
		// The UI's Schedules page filters on them as the workflow list does.
		TypedSearchAttributes: temporal.NewSearchAttributes(api.CwdKey.ValueSet(req.Cwd), api.AgentKey.ValueSet("schedule")),
	}
	if once {
		opts.RemainingActions = 1
	}
	if _, err := c.Temporal.ScheduleClient().Create(ctx, opts); err != nil {
		return Envelope{}, c.scheduleError(err, id)
	}
	item, err := c.describeSchedule(ctx, id, 0)
	if err != nil {
		return Envelope{}, err
	}
	return scheduleEnvelope(fmt.Sprintf("Schedule %s created: %s%s.", id, text, nextFire(item)), item), nil
}

// nextFire says what item does next, for a text: when it fires next, or,
// paused, that it does not fire until resumed, and how to resume it.
func nextFire(item ScheduleItem) string {
	if item.Paused {
		return "; " + pausedText(item)
	}
	if len(item.NextFires) == 0 {
		return ""
	}
	return ", next at " + item.NextFires[0].Format(time.RFC3339)
}

// pausedText says that item is paused, since when and why (its note, unless
// it is the one a pause gives when none is given), and the command that
// lets it fire again.
func pausedText(item ScheduleItem) string {
	var why []string
	if item.PausedSince != nil {
		why = append(why, "since "+item.PausedSince.Format(time.RFC3339))
	}
	if item.Note != "" && item.Note != pausedNote {
		why = append(why, item.Note)
	}
	text := "paused"
	if len(why) > 0 {
		text += " (" + strings.Join(why, ": ") + ")"
	}
	return text + ": no fires until `subagents schedule resume " + item.ID + "`"
}

// setEnd sets spec's end from end: a time, or a duration from now.
func setEnd(spec *sdkclient.ScheduleSpec, end string, now time.Time) error {
	if strings.TrimSpace(end) == "" {
		return nil
	}
	t, err := parseTime("end", end, now)
	if err != nil {
		return err
	}
	if !t.After(now) {
		return errcode.Errorf(errcode.InvalidInput, "end %s is in the past", t.Format(time.RFC3339))
	}
	spec.EndAt = t.UTC()
	return nil
}

// scheduleAction is the schedule's action: a fire of in, on this
// client's task queue, named after the schedule (Temporal adds the fire's
// time to the ID).
func (c *Client) scheduleAction(id, name, spec, note, catchupText string, catchup time.Duration, in api.ScheduledInput) *sdkclient.ScheduleWorkflowAction {
	memo := map[string]any{"schedule": id, memoName: name, memoSpec: spec, memoNote: note, memoCatchup: catchupText}
	if catchup > 0 {
		memo[memoCatchup] = catchupName(catchup)
	}
	return &sdkclient.ScheduleWorkflowAction{
		ID:        id,
		Workflow:  api.ScheduledWorkflowName,
		Args:      []any{in},
		TaskQueue: c.TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(api.AgentKey.ValueSet("schedule"), api.CwdKey.ValueSet(in.Cwd),
			api.StatusKey.ValueSet(string(api.StateRunning))),
		Memo:          memo,
		StaticSummary: fmt.Sprintf("%s (schedule %s, %s)", name, id, spec),
	}
}

// scheduleError gives a schedule call's error its code.
func (c *Client) scheduleError(err error, id string) error {
	var invalid *serviceerror.InvalidArgument
	switch {
	case errors.Is(err, temporal.ErrScheduleAlreadyRunning):
		return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("a schedule %q exists already: choose another id, or change it with update", id))
	case isNotFound(err):
		return errcode.Wrap(errcode.SessionNotFound, err, fmt.Sprintf("Schedule %q not found: `subagents schedule list` lists them", id))
	case errors.As(err, &invalid):
		return errcode.Wrap(errcode.InvalidInput, err, "Temporal refused the schedule: "+invalid.Message)
	}
	return c.temporalError(err, id)
}

// ListSchedules lists this service's schedules (those whose fires are
// ours), of cwd only when it is set, by ID.
func (c *Client) ListSchedules(ctx context.Context, cwd string) (Envelope, error) {
	ids, err := c.scheduleIDs(ctx, cwd)
	if err != nil {
		return Envelope{}, err
	}
	items := []ScheduleItem{}
	for _, id := range ids {
		item, err := c.describeSchedule(ctx, id, 1)
		if errcode.Is(err, errcode.SessionNotFound) {
			// Deleted since the listing.
			continue
		}
		if err != nil {
			return Envelope{}, err
		}
		items = append(items, item)
	}
	return scheduleEnvelope(fmt.Sprintf("%d schedule(s)", len(items)), items...), nil
}

// scheduleIDs are the IDs of this service's schedules (those whose fires
// are ours), of cwd only when it is set, sorted.
func (c *Client) scheduleIDs(ctx context.Context, cwd string) ([]string, error) {
	it, err := c.Temporal.ScheduleClient().List(ctx, sdkclient.ScheduleListOptions{})
	if err != nil {
		return nil, c.scheduleError(err, "")
	}
	var ids []string
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, c.scheduleError(err, "")
		}
		if e.WorkflowType.Name != api.ScheduledWorkflowName || (cwd != "" && payloadString(e.Memo.GetFields(), memoCwd) != cwd) {
			continue
		}
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

// DescribeSchedule is one schedule with its next fires and recent runs.
func (c *Client) DescribeSchedule(ctx context.Context, id string) (Envelope, error) {
	item, err := c.describeSchedule(ctx, id, 10)
	if err != nil {
		return Envelope{}, err
	}
	return scheduleEnvelope("", item), nil
}

// describeSchedule reads schedule id, with at most runs recent runs.
func (c *Client) describeSchedule(ctx context.Context, id string, runs int) (ScheduleItem, error) {
	if err := api.ValidateScheduleID(id); err != nil {
		return ScheduleItem{}, err
	}
	desc, err := c.Temporal.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	if err != nil {
		return ScheduleItem{}, c.scheduleError(err, id)
	}
	item := ScheduleItem{ID: id, Cwd: payloadString(desc.Memo.GetFields(), memoCwd), UIURL: c.scheduleLink(id)}
	s := desc.Schedule
	action, ok := s.Action.(*sdkclient.ScheduleWorkflowAction)
	if !ok || action.Workflow != api.ScheduledWorkflowName {
		return item, errcode.Errorf(errcode.SessionNotFound, "schedule %q does not start subagents work", id)
	}
	memo := payloadFields(action.Memo)
	item.Name, item.Spec = payloadString(memo, memoName), payloadString(memo, memoSpec)
	if in, err := actionInput(action); err == nil {
		item.Kind, item.Quiet = in.Kind(), in.Quiet
	}
	if s.State != nil {
		item.Paused, item.Note = s.State.Paused, s.State.Note
	}
	if item.Paused {
		item.PausedSince = pausedSince(memo, item.Note)
	}
	if s.Policy != nil {
		item.Overlap = overlapName(s.Policy.Overlap)
		item.Catchup = cmp.Or(payloadString(memo, memoCatchup), catchupName(s.Policy.CatchupWindow))
	}
	if s.Spec != nil {
		item.Timezone = s.Spec.TimeZoneName
		if !s.Spec.EndAt.IsZero() {
			end := s.Spec.EndAt
			item.End = &end
		}
	}
	info := desc.Info
	item.NextFires, item.Fires, item.Missed, item.Skipped = info.NextActionTimes, info.NumActions, info.NumActionsMissedCatchupWindow, info.NumActionsSkippedOverlap
	if s.State != nil && s.State.LimitedActions && s.State.RemainingActions == 0 {
		// A schedule that fired its one time has nothing next.
		item.NextFires = nil
	}
	if item.Paused {
		// A paused schedule fires at none of them (Temporal counts them
		// from where it stood at the pause, so the first may be past).
		item.NextFires = nil
	}
	if !info.CreatedAt.IsZero() {
		created := info.CreatedAt
		item.Created = &created
	}
	recent := slices.Clone(info.RecentActions)
	slices.Reverse(recent)
	for _, a := range recent {
		if len(item.Runs) >= runs {
			break
		}
		if a.StartWorkflowResult == nil {
			continue
		}
		item.Runs = append(item.Runs, c.scheduleRun(ctx, a))
	}
	return item, nil
}

// actionInput decodes a described action's input.
func actionInput(a *sdkclient.ScheduleWorkflowAction) (api.ScheduledInput, error) {
	var in api.ScheduledInput
	if len(a.Args) != 1 {
		return in, fmt.Errorf("the action has %d arguments", len(a.Args))
	}
	switch arg := a.Args[0].(type) {
	case *commonpb.Payload:
		return in, converter.GetDefaultDataConverter().FromPayload(arg, &in)
	case api.ScheduledInput:
		return arg, nil
	}
	return in, fmt.Errorf("the action's argument is a %T", a.Args[0])
}

// payloadFields is a described memo's fields (their values are payloads).
func payloadFields(m map[string]any) map[string]*commonpb.Payload {
	out := map[string]*commonpb.Payload{}
	for k, v := range m {
		if p, ok := v.(*commonpb.Payload); ok {
			out[k] = p
		}
	}
	return out
}

// scheduleRun is one recent fire: how its workflow stands, the delegation
// it ran, and whether a pi session has its result.
func (c *Client) scheduleRun(ctx context.Context, a sdkclient.ScheduleActionResult) ScheduleRun {
	id := a.StartWorkflowResult.WorkflowID
	run := ScheduleRun{ID: id, Fired: a.ActualTime, Status: string(api.StateRunning), UIURL: c.uiLink(id)}
	if !a.ScheduleTime.IsZero() && !a.ScheduleTime.Equal(a.ActualTime) {
		at := a.ScheduleTime
		run.Scheduled = &at
	}
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if isNotFound(err) {
		// Past the namespace's retention: Temporal no longer knows how it
		// ended.
		run.Status = RunExpired
		return run
	}
	if err != nil {
		return run
	}
	info := desc.GetWorkflowExecutionInfo()
	run.DelegationID, run.Summary = memoString(info, "delegation"), memoString(info, "summary")
	run.Status = fireStatus(info.GetStatus(), searchAttr(info, api.StatusKey.GetName()))
	if info.GetCloseTime() == nil {
		return run
	}
	res, err := c.Temporal.DescribeWorkflowExecution(ctx, id+api.ResultIDSuffix, "")
	if err != nil {
		return run
	}
	rinfo := res.GetWorkflowExecutionInfo()
	run.ResultID = id + api.ResultIDSuffix
	run.ClaimedBy = memoString(rinfo, "claimedBy")
	run.Delivered = memoString(rinfo, "deliveredTo") != ""
	return run
}

// RunExpired is the status of a schedule's recent run whose workflow is
// past the namespace's retention (30 days after it ended, with `subagents
// dev`): how it ended is no longer known.
const RunExpired = "expired"

// fireStatus is a fire's status: running while its workflow runs, else
// the state it recorded, else how Temporal says it closed.
func fireStatus(st enumspb.WorkflowExecutionStatus, recorded string) string {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return string(api.StateRunning)
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return string(api.StateTerminated)
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return string(api.StateTimedOut)
	}
	if recorded != "" && recorded != string(api.StateRunning) {
		return recorded
	}
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return string(api.StateCancelled)
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return string(api.StateCompleted)
	}
	return string(api.StateFailed)
}

// scheduleLink is the schedule's page in the Temporal UI.
func (c *Client) scheduleLink(id string) string {
	if c.UIURL == "" {
		return ""
	}
	return strings.TrimRight(c.UIURL, "/") + "/namespaces/" + cmp.Or(c.Namespace, "default") + "/schedules/" + id
}

// The notes pause and resume give a schedule when the request has none:
// the SDK would put its own ("Paused via Go SDK") in the UI otherwise.
const (
	pausedNote  = "paused with subagents schedule pause"
	resumedNote = "resumed with subagents schedule resume"
)

// PauseSchedule stops schedule req.ID's fires until it is resumed;
// req.Note says why (the UI shows it). It is an update rather than
// Temporal's pause, which keeps no time: the action's memo keeps when it
// was paused (a schedule paused already keeps its first pause's time).
func (c *Client) PauseSchedule(ctx context.Context, req ScheduleRequest) (Envelope, error) {
	if err := checkDepth(req, "pause"); err != nil {
		return Envelope{}, err
	}
	note, now := cmp.Or(req.Note, pausedNote), c.CurrentTime()
	return c.scheduleChange(ctx, req.ID, "paused", func(h sdkclient.ScheduleHandle) error {
		return h.Update(ctx, sdkclient.ScheduleUpdateOptions{DoUpdate: func(u sdkclient.ScheduleUpdateInput) (*sdkclient.ScheduleUpdate, error) {
			s, err := pausedSchedule(u.Description.Schedule, note, now)
			if err != nil {
				return nil, err
			}
			return &sdkclient.ScheduleUpdate{Schedule: s}, nil
		}})
	})
}

// ResumeSchedule lets a paused schedule fire again; its note becomes
// req.Note, else the note it was created with (resumeNote).
func (c *Client) ResumeSchedule(ctx context.Context, req ScheduleRequest) (Envelope, error) {
	if err := checkDepth(req, "resume"); err != nil {
		return Envelope{}, err
	}
	return c.scheduleChange(ctx, req.ID, "resumed", func(h sdkclient.ScheduleHandle) error {
		return h.Update(ctx, sdkclient.ScheduleUpdateOptions{DoUpdate: func(u sdkclient.ScheduleUpdateInput) (*sdkclient.ScheduleUpdate, error) {
			s, err := resumedSchedule(u.Description.Schedule, req.Note)
			if err != nil {
				return nil, err
			}
			return &sdkclient.ScheduleUpdate{Schedule: s}, nil
		}})
	})
}

// pausedSchedule is schedule s (as described) paused with note as of now:
// its action's memo records when, unless our record of a pause still
// stands (paused already: the first pause's time stays).
func pausedSchedule(s sdkclient.Schedule, note string, now time.Time) (*sdkclient.Schedule, error) {
	action, ok := s.Action.(*sdkclient.ScheduleWorkflowAction)
	if !ok {
		return nil, errcode.New(errcode.SessionNotFound, "the schedule does not start subagents work")
	}
	memo := maps.Clone(action.Memo)
	if memo == nil {
		memo = map[string]any{}
	}
	state := sdkclient.ScheduleState{}
	if s.State != nil {
		state = *s.State
	}
	since := now.UTC()
	if state.Paused {
		if t := pausedSince(payloadFields(memo), state.Note); t != nil {
			since = *t
		}
	}
	state.Paused, state.Note = true, note
	memo[memoPausedAt], memo[memoPausedNote] = since.Format(time.RFC3339Nano), note
	a := *action
	a.Memo = memo
	s.Action, s.State = &a, &state
	return &s, nil
}

// resumedSchedule is schedule s (as described) resumed: its note is the
// one given, else its creation's (resumeNote), and the record of its
// pause goes.
func resumedSchedule(s sdkclient.Schedule, given string) (*sdkclient.Schedule, error) {
	action, ok := s.Action.(*sdkclient.ScheduleWorkflowAction)
	if !ok {
		return nil, errcode.New(errcode.SessionNotFound, "the schedule does not start subagents work")
	}
	memo := maps.Clone(action.Memo)
	delete(memo, memoPausedAt)
	delete(memo, memoPausedNote)
	state := sdkclient.ScheduleState{}
	if s.State != nil {
		state = *s.State
	}
	state.Paused, state.Note = false, resumeNote(given, payloadString(payloadFields(action.Memo), memoNote))
	a := *action
	a.Memo = memo
	s.Action, s.State = &a, &state
	return &s, nil
}

// pausedSince is when our pause paused a schedule whose note is note: nil
// when the memo has no record of one, or the note is not the one it paused
// with (paused since elsewhere, as from the UI, at a time not known).
func pausedSince(memo map[string]*commonpb.Payload, note string) *time.Time {
	at := payloadString(memo, memoPausedAt)
	if at == "" || payloadString(memo, memoPausedNote) != note {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil
	}
	return &t
}

// resumeNote is the note of a resumed schedule: the one given, else the
// one it was created with, else ours saying it was resumed (never empty:
// the SDK puts its own text for an empty one).
func resumeNote(given, created string) string {
	return cmp.Or(given, created, resumedNote)
}

// DeleteSchedule removes schedule req.ID; runs it started go on, and their
// results still reach the folder.
func (c *Client) DeleteSchedule(ctx context.Context, req ScheduleRequest) (Envelope, error) {
	if err := checkDepth(req, "delete"); err != nil {
		return Envelope{}, err
	}
	id := req.ID
	item, err := c.describeSchedule(ctx, id, 0)
	if err != nil {
		return Envelope{}, err
	}
	if err := c.Temporal.ScheduleClient().GetHandle(ctx, id).Delete(ctx); err != nil {
		return Envelope{}, c.scheduleError(err, id)
	}
	return scheduleEnvelope(fmt.Sprintf("Schedule %s deleted.", id), item), nil
}

// scheduleChange runs change on schedule id (one of ours) and answers
// with the schedule as it is after it.
func (c *Client) scheduleChange(ctx context.Context, id, done string, change func(sdkclient.ScheduleHandle) error) (Envelope, error) {
	if _, err := c.describeSchedule(ctx, id, 0); err != nil {
		return Envelope{}, err
	}
	if err := change(c.Temporal.ScheduleClient().GetHandle(ctx, id)); err != nil {
		return Envelope{}, c.scheduleError(err, id)
	}
	item, err := c.describeSchedule(ctx, id, 1)
	if err != nil {
		return Envelope{}, err
	}
	if done == "paused" && item.Paused {
		return scheduleEnvelope(fmt.Sprintf("Schedule %s %s.", id, pausedText(item)), item), nil
	}
	return scheduleEnvelope(fmt.Sprintf("Schedule %s %s%s.", id, done, nextFire(item)), item), nil
}

// UpdateSchedule changes what req gives of schedule req.ID (updated): the
// rest stays as it is. Its folder stays.
func (c *Client) UpdateSchedule(ctx context.Context, req ScheduleRequest) (Envelope, error) {
	if err := checkDepth(req, "update"); err != nil {
		return Envelope{}, err
	}
	id := req.ID
	cur, err := c.describeSchedule(ctx, id, 0)
	if err != nil {
		return Envelope{}, err
	}
	req.Cwd = cur.Cwd
	now := c.CurrentTime()
	var changed []string
	err = c.Temporal.ScheduleClient().GetHandle(ctx, id).Update(ctx, sdkclient.ScheduleUpdateOptions{
		DoUpdate: func(u sdkclient.ScheduleUpdateInput) (*sdkclient.ScheduleUpdate, error) {
			s, what, err := c.updated(req, u.Description.Schedule, now)
			if err != nil {
				return nil, err
			}
			changed = what
			return &sdkclient.ScheduleUpdate{Schedule: s}, nil
		},
	})
	if err != nil {
		return Envelope{}, c.scheduleError(err, id)
	}
	item, err := c.describeSchedule(ctx, id, 1)
	if err != nil {
		return Envelope{}, err
	}
	return scheduleEnvelope(fmt.Sprintf("Schedule %s updated (%s)%s.", id, strings.Join(changed, ", "), nextFire(item)), item), nil
}

// updated is schedule s (as described) with what req gives changed, as of
// now: when it fires (in its timezone unless req names another), the
// timezone alone, end, overlap, catch-up, note, name, quiet, or what it
// runs (checked as at create, in the schedule's folder req.Cwd). What req
// does not give stays; the answer says what changed.
func (c *Client) updated(req ScheduleRequest, s sdkclient.Schedule, now time.Time) (*sdkclient.Schedule, []string, error) {
	action, ok := s.Action.(*sdkclient.ScheduleWorkflowAction)
	if !ok {
		return nil, nil, errcode.Errorf(errcode.SessionNotFound, "schedule %q does not start subagents work", req.ID)
	}
	memo := payloadFields(action.Memo)
	in, err := actionInput(action)
	if err != nil {
		return nil, nil, errcode.Wrap(errcode.Failed, err, fmt.Sprintf("schedule %q: its input: %v", req.ID, err))
	}
	name, spec, note, catchupText := payloadString(memo, memoName), payloadString(memo, memoSpec), payloadString(memo, memoNote), payloadString(memo, memoCatchup)
	if s.Spec == nil {
		s.Spec = &sdkclient.ScheduleSpec{}
	}
	if s.State == nil {
		s.State = &sdkclient.ScheduleState{}
	}
	if s.Policy == nil {
		s.Policy = &sdkclient.SchedulePolicies{}
	}
	var changed []string
	w := req.when()
	switch {
	case w.given():
		// A new time keeps the zone the schedule reads its times in.
		w.timezone = cmp.Or(w.timezone, s.Spec.TimeZoneName)
		newSpec, text, once, err := buildSpec(w, now)
		if err != nil {
			return nil, nil, err
		}
		newSpec.EndAt = s.Spec.EndAt
		s.Spec, spec = &newSpec, text
		s.State.LimitedActions, s.State.RemainingActions = once, 0
		if once {
			s.State.RemainingActions = 1
		}
		changed = append(changed, text)
		if req.Timezone != "" && !strings.HasPrefix(text, "at ") {
			changed = append(changed, "timezone "+req.Timezone)
		}
	case req.Timezone != "":
		if strings.HasPrefix(spec, "at ") {
			return nil, nil, errcode.Errorf(errcode.InvalidInput, "schedule %s fires once, %s: a timezone does not change an absolute time (give a new at, every, cron or calendar)", req.ID, spec)
		}
		if _, err := time.LoadLocation(req.Timezone); err != nil {
			return nil, nil, errcode.Errorf(errcode.InvalidInput, "timezone %q: %v (an IANA name such as Europe/Berlin)", req.Timezone, err)
		}
		s.Spec.TimeZoneName = req.Timezone
		changed = append(changed, "timezone "+req.Timezone)
	}
	if req.End != "" {
		if err := setEnd(s.Spec, req.End, now); err != nil {
			return nil, nil, err
		}
		changed = append(changed, "ends "+s.Spec.EndAt.Format(time.RFC3339))
	}
	if w.given() || req.End != "" || req.Timezone != "" {
		// The new time with the old end, the new end with the old time, or
		// the old time read in a new zone (which moves its fires): a
		// schedule that would never fire again is refused, not made.
		if err := checkFires(*s.Spec, spec, now); err != nil {
			return nil, nil, err
		}
	}
	if req.Overlap != "" {
		if s.Policy.Overlap, err = parseOverlap(req.Overlap); err != nil {
			return nil, nil, err
		}
		changed = append(changed, "overlap "+overlapName(s.Policy.Overlap))
	}
	if req.Catchup != "" {
		if s.Policy.CatchupWindow, err = parseCatchup(req.Catchup); err != nil {
			return nil, nil, err
		}
		catchupText = catchupName(s.Policy.CatchupWindow)
		changed = append(changed, "catchup "+catchupText)
	}
	if req.Note != "" {
		note = req.Note
		if !s.State.Paused {
			// A paused schedule's note says why; it becomes this at resume.
			s.State.Note = note
		}
		changed = append(changed, "note")
	}
	if req.Name != "" {
		name = req.Name
		changed = append(changed, "name")
	}
	if req.hasWork() {
		req.Host = cmp.Or(req.Host, in.Host)
		if req.Quiet == nil {
			req.Quiet = &in.Quiet
		}
		next, _, err := c.scheduledInput(req.ID, req)
		if err != nil {
			return nil, nil, err
		}
		if err := c.checkAgents(next); err != nil {
			return nil, nil, err
		}
		in = next
		changed = append(changed, "what it runs")
	} else if req.Quiet != nil {
		in.Quiet = *req.Quiet
		changed = append(changed, fmt.Sprintf("quiet %v", in.Quiet))
	}
	if len(changed) == 0 {
		return nil, nil, errcode.New(errcode.InvalidInput, "nothing to update: give when it runs, timezone, overlap, catchup, end, note, name, quiet, or what it runs")
	}
	next := c.scheduleAction(req.ID, name, spec, note, catchupText, 0, in)
	// A paused schedule keeps the record of when it was paused.
	for _, k := range []string{memoPausedAt, memoPausedNote} {
		if p, ok := action.Memo[k]; ok {
			next.Memo[k] = p
		}
	}
	s.Action = next
	return &s, changed, nil
}
