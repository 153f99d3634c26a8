package client

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// described is schedule "nightly" as Describe gives it to an update: a
// cron in Berlin that ends, with its policies, note, name and quiet set,
// its memo and input as payloads.
func described(t *testing.T, now time.Time) sdkclient.Schedule {
	t.Helper()
	c := &Client{TaskQueue: "q"}
	in := api.ScheduledInput{ScheduleID: "nightly", Cwd: "/repo", Quiet: true, Version: api.ScheduledVersion,
		Delegation: &api.DelegationInput{Tasks: []api.TaskSpec{{Name: "scan", Prompt: "scan", Cwd: "/repo"}}}}
	a := c.scheduleAction("nightly", "the scan", "cron 0 9 * * *", "made by hand", "1h", time.Hour, in)
	dc := converter.GetDefaultDataConverter()
	memo := map[string]any{}
	for k, v := range a.Memo {
		p, err := dc.ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		memo[k] = p
	}
	arg, err := dc.ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	a.Memo, a.Args = memo, []any{arg}
	return sdkclient.Schedule{
		Action: a,
		Spec:   &sdkclient.ScheduleSpec{CronExpressions: []string{"0 9 * * *"}, TimeZoneName: "Europe/Berlin", EndAt: now.Add(30 * 24 * time.Hour)},
		Policy: &sdkclient.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE, CatchupWindow: time.Hour},
		State:  &sdkclient.ScheduleState{Note: "made by hand"},
	}
}

// view is what describe reads of an updated schedule.
type view struct {
	spec, timezone, overlap, catchup, note, name string
	end                                          time.Time
	quiet                                        bool
}

func viewOf(t *testing.T, s *sdkclient.Schedule) view {
	t.Helper()
	a := s.Action.(*sdkclient.ScheduleWorkflowAction)
	in, err := actionInput(a)
	if err != nil {
		t.Fatal(err)
	}
	// Described memos hold payloads, updated ones the values.
	str := func(k string) string {
		if v, ok := a.Memo[k].(string); ok {
			return v
		}
		return payloadString(payloadFields(a.Memo), k)
	}
	return view{spec: str(memoSpec), timezone: s.Spec.TimeZoneName, overlap: overlapName(s.Policy.Overlap), catchup: str(memoCatchup),
		note: str(memoNote), name: str(memoName), end: s.Spec.EndAt, quiet: in.Quiet}
}

// TestUpdateKeepsWhatItIsNotGiven: an update changes what it is given and
// keeps every other field: a new time keeps the timezone, the end, the
// note, the policies, quiet and the name; a timezone alone is an update.
func TestUpdateKeepsWhatItIsNotGiven(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	c := &Client{TaskQueue: "q"}
	before := viewOf(t, ptr(described(t, now)))
	if before.timezone != "Europe/Berlin" || before.overlap != "buffer_one" || before.catchup != "1h" || !before.quiet {
		t.Fatalf("the schedule to update: %+v", before)
	}
	no := false
	tests := []struct {
		name    string
		req     ScheduleRequest
		changed func(*view)
		said    string
	}{
		{name: "a new cron keeps the timezone and the rest", req: ScheduleRequest{Cron: "30 8 * * 1-5"},
			changed: func(v *view) { v.spec = "cron 30 8 * * 1-5" }, said: "cron 30 8 * * 1-5"},
		{name: "a new calendar keeps the timezone", req: ScheduleRequest{Calendar: "hour=7"},
			changed: func(v *view) { v.spec = "calendar hour=7" }, said: "calendar hour=7"},
		{name: "a new interval keeps the rest", req: ScheduleRequest{Every: "2h"},
			changed: func(v *view) { v.spec = "every 2h" }, said: "every 2h"},
		{name: "a new time in another timezone", req: ScheduleRequest{Cron: "@daily", Timezone: "Asia/Tokyo"},
			changed: func(v *view) { v.spec, v.timezone = "cron @daily", "Asia/Tokyo" }, said: "timezone Asia/Tokyo"},
		{name: "a timezone alone", req: ScheduleRequest{Timezone: "America/New_York"},
			changed: func(v *view) { v.timezone = "America/New_York" }, said: "timezone America/New_York"},
		{name: "an end", req: ScheduleRequest{End: "2d"},
			changed: func(v *view) { v.end = now.Add(48 * time.Hour) }, said: "ends"},
		{name: "an overlap", req: ScheduleRequest{Overlap: "allow_all"},
			changed: func(v *view) { v.overlap = "allow_all" }, said: "overlap allow_all"},
		{name: "a catch-up", req: ScheduleRequest{Catchup: "none"},
			changed: func(v *view) { v.catchup = "none" }, said: "catchup none"},
		{name: "a note", req: ScheduleRequest{Note: "changed"},
			changed: func(v *view) { v.note = "changed" }, said: "note"},
		{name: "a name", req: ScheduleRequest{Name: "the new scan"},
			changed: func(v *view) { v.name = "the new scan" }, said: "name"},
		{name: "quiet off", req: ScheduleRequest{Quiet: &no},
			changed: func(v *view) { v.quiet = false }, said: "quiet false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.ID, tt.req.Cwd = "nightly", "/repo"
			s, changed, err := c.updated(tt.req, described(t, now), now)
			if err != nil {
				t.Fatal(err)
			}
			want := before
			tt.changed(&want)
			if got := viewOf(t, s); got != want {
				t.Errorf("updated\n %+v\nwant\n %+v", got, want)
			}
			if !slices.ContainsFunc(changed, func(c string) bool { return strings.HasPrefix(c, tt.said) }) {
				t.Errorf("it says it changed %v, not %q", changed, tt.said)
			}
		})
	}
	// A schedule that fires once, at a time: no timezone changes it.
	s := described(t, now)
	s.Action.(*sdkclient.ScheduleWorkflowAction).Memo[memoSpec] = mustPayload(t, "at 2026-12-01T08:00:00Z")
	if _, _, err := c.updated(ScheduleRequest{ID: "nightly", Timezone: "Asia/Tokyo"}, s, now); !errcode.Is(err, errcode.InvalidInput) {
		t.Errorf("a timezone for an at schedule: %v", err)
	}
	// A timezone alone moves the fires: 09:00 in Berlin is 08:00 UTC, before
	// the end at 08:30; 09:00 UTC is after it, and the schedule would never
	// fire again.
	s = described(t, now)
	s.Spec.EndAt = time.Date(2026, 11, 27, 8, 30, 0, 0, time.UTC)
	if _, _, err := c.updated(ScheduleRequest{ID: "nightly", Timezone: "Europe/Helsinki"}, s, now); err != nil {
		t.Errorf("a timezone that still fires before the end: %v", err)
	}
	if _, _, err := c.updated(ScheduleRequest{ID: "nightly", Timezone: "UTC"}, s, now); !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "never fire") {
		t.Errorf("a timezone that moves the first fire past the end: %v", err)
	}
	if _, _, err := c.updated(ScheduleRequest{ID: "nightly"}, described(t, now), now); !errcode.Is(err, errcode.InvalidInput) {
		t.Errorf("an update of nothing: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func mustPayload(t *testing.T, v any) any {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestScheduledBatchWithABadTask: a batch a start would run in part (its
// bad item rejected on its own) is refused as a schedule, naming the task:
// it would fail that task at every fire.
func TestScheduledBatchWithABadTask(t *testing.T) {
	c := &Client{}
	req := ScheduleRequest{Cwd: "/repo", MaxConcurrency: 2, Tasks: []api.TaskSpec{{Name: "good", Prompt: "look"}, {Name: "bad", Prompt: " "}}}
	_, _, err := c.scheduledInput("nightly", req)
	if !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "tasks[1] (bad)") {
		t.Fatalf("err = %v", err)
	}
	req.Tasks[1].Prompt = "check"
	if _, _, err := c.scheduledInput("nightly", req); err != nil {
		t.Fatalf("a good batch: %v", err)
	}
}

// TestSubagentsOnlyLookAtSchedules: every action that makes, changes,
// fires or removes a schedule is refused to a subagent before anything is
// asked of Temporal (this client has none); list and describe are not.
func TestSubagentsOnlyLookAtSchedules(t *testing.T) {
	c := &Client{}
	for _, action := range []string{"create", "update", "pause", "resume", "trigger", "delete"} {
		req := ScheduleRequest{Action: action, ID: "nightly", Every: "1h", Prompt: "x", Note: "n", Cwd: "/repo", Depth: 1}
		if _, err := c.Schedule(context.Background(), req); !errcode.Is(err, errcode.DepthExceeded) {
			t.Errorf("%s by a subagent: %v", action, err)
		}
	}
	// The methods themselves refuse it too.
	sub := ScheduleRequest{ID: "nightly", Depth: 1}
	for name, call := range map[string]func(context.Context, ScheduleRequest) (Envelope, error){
		"create": c.CreateSchedule, "update": c.UpdateSchedule, "pause": c.PauseSchedule, "resume": c.ResumeSchedule,
		"trigger": c.TriggerSchedule, "delete": c.DeleteSchedule,
	} {
		if _, err := call(context.Background(), sub); !errcode.Is(err, errcode.DepthExceeded) {
			t.Errorf("%s by a subagent: %v", name, err)
		}
	}
	for _, action := range []string{"list", "describe"} {
		if err := CheckScheduleRequest(ScheduleRequest{Action: action, ID: "nightly", Depth: 1}, time.Now()); err != nil {
			t.Errorf("%s by a subagent: %v", action, err)
		}
	}
}

// TestResumeNote: a resumed schedule's note is the one given, else its
// creation's, else ours: never empty, which the SDK would fill with its
// own words.
func TestResumeNote(t *testing.T) {
	for _, tt := range []struct{ given, created, want string }{
		{"back", "nightly scan", "back"},
		{"", "nightly scan", "nightly scan"},
		{"", "", resumedNote},
	} {
		if got := resumeNote(tt.given, tt.created); got != tt.want {
			t.Errorf("resumeNote(%q, %q) = %q, want %q", tt.given, tt.created, got, tt.want)
		}
	}
}

func TestFireID(t *testing.T) {
	at := time.Date(2026, 11, 26, 11, 25, 31, 900_000_000, time.FixedZone("CET", 3600))
	if got := FireID("nightly", at); got != "nightly-2026-11-26T10:25:31Z" {
		t.Fatalf("FireID = %q", got)
	}
	// A claim reads the time back: when the run fired, not when it ended.
	for _, tt := range []struct {
		id, fire string
		want     time.Time
		ok       bool
	}{
		{"nightly", "nightly-2026-11-26T10:25:31Z", at.Truncate(time.Second), true},
		{"night-2", "night-2-2026-11-26T10:25:31Z", at.Truncate(time.Second), true},
		{"nightly", "other-2026-11-26T10:25:31Z", time.Time{}, false},
		{"nightly", "nightly-soon", time.Time{}, false},
	} {
		got, ok := fireTime(tt.id, tt.fire)
		if ok != tt.ok || !got.Equal(tt.want) {
			t.Errorf("fireTime(%q, %q) = %v, %v", tt.id, tt.fire, got, ok)
		}
	}
}

// TestScheduleRunPastRetention: a recent run whose workflow Temporal no
// longer keeps (past the namespace's retention) is shown expired, not
// running.
func TestScheduleRunPastRetention(t *testing.T) {
	tc := &mocks.Client{}
	tc.On("DescribeWorkflowExecution", mock.Anything, "weekly-2026-09-01T09:00:00Z", "").Return(nil, serviceerror.NewNotFound("workflow not found"))
	c := &Client{Temporal: tc}
	fired := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	run := c.scheduleRun(context.Background(), sdkclient.ScheduleActionResult{ScheduleTime: fired, ActualTime: fired,
		StartWorkflowResult: &sdkclient.ScheduleWorkflowExecution{WorkflowID: "weekly-2026-09-01T09:00:00Z"}})
	if run.Status != RunExpired {
		t.Fatalf("a run past retention: %+v", run)
	}
}
