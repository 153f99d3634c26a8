package client

import (
	"context"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
)

// fakeSchedules is one schedule as Temporal keeps it, for pause, resume,
// update and describe: an update's memo values come back as payloads, and
// its next times are those Temporal gives, whatever the state (a paused
// schedule's stay where the pause left them, in the past).
type fakeSchedules struct {
	sdkclient.ScheduleClient
	s    sdkclient.Schedule
	next []time.Time
}

func (f *fakeSchedules) GetHandle(context.Context, string) sdkclient.ScheduleHandle {
	return &fakeHandle{f: f}
}

type fakeHandle struct {
	sdkclient.ScheduleHandle
	f *fakeSchedules
}

func (h *fakeHandle) Describe(context.Context) (*sdkclient.ScheduleDescription, error) {
	return &sdkclient.ScheduleDescription{Schedule: h.f.s, Info: sdkclient.ScheduleInfo{NextActionTimes: h.f.next}}, nil
}

func (h *fakeHandle) Update(ctx context.Context, o sdkclient.ScheduleUpdateOptions) error {
	d, _ := h.Describe(ctx)
	u, err := o.DoUpdate(sdkclient.ScheduleUpdateInput{Description: *d})
	if err != nil {
		return err
	}
	s := *u.Schedule
	a := *s.Action.(*sdkclient.ScheduleWorkflowAction)
	memo := map[string]any{}
	for k, v := range a.Memo {
		if p, ok := v.(*commonpb.Payload); ok {
			memo[k] = p
			continue
		}
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			return err
		}
		memo[k] = p
	}
	a.Memo = memo
	s.Action = &a
	h.f.s = s
	return nil
}

// TestPausedScheduleHasNoNextFire: a paused schedule answers (pause,
// describe, an update, a trigger's text) with no next fire, since when it
// is paused and the command that resumes it; a pause of a paused schedule
// keeps its first time; resumed, it has its next fires again and no pause
// time; paused elsewhere (the UI: another note), no time is claimed.
func TestPausedScheduleHasNoNextFire(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	past := []time.Time{now.Add(-20 * time.Minute), now.Add(40 * time.Minute)}
	f := &fakeSchedules{s: described(t, now), next: past}
	tc := &mocks.Client{}
	tc.On("ScheduleClient").Return(f)
	clock := now
	c := &Client{Temporal: tc, TaskQueue: "q", Now: func() time.Time { return clock }}
	ctx := context.Background()

	paused, err := c.PauseSchedule(ctx, ScheduleRequest{ID: "nightly", Note: "holidays"})
	if err != nil {
		t.Fatal(err)
	}
	want := "Schedule nightly paused (since 2026-11-26T10:00:00Z: holidays): no fires until `subagents schedule resume nightly`."
	if item := paused.Schedules[0]; paused.Text != want || !item.Paused || item.NextFires != nil || item.PausedSince == nil || !item.PausedSince.Equal(now) || item.Note != "holidays" {
		t.Fatalf("pause answered %q, %+v", paused.Text, item)
	}

	clock = now.Add(time.Hour)
	again, err := c.PauseSchedule(ctx, ScheduleRequest{ID: "nightly", Note: "still away"})
	if err != nil {
		t.Fatal(err)
	}
	if item := again.Schedules[0]; item.PausedSince == nil || !item.PausedSince.Equal(now) || item.Note != "still away" {
		t.Fatalf("paused again: %+v (its first pause's time stays)", item)
	}

	updated, err := c.UpdateSchedule(ctx, ScheduleRequest{ID: "nightly", Every: "2h"})
	if err != nil {
		t.Fatal(err)
	}
	if item := updated.Schedules[0]; strings.Contains(updated.Text, "next at") || !strings.Contains(updated.Text, "paused (since 2026-11-26T10:00:00Z: still away): no fires until `subagents schedule resume nightly`") ||
		item.PausedSince == nil || item.NextFires != nil {
		t.Fatalf("an update of a paused schedule: %q, %+v", updated.Text, item)
	}

	described, err := c.DescribeSchedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if item := described.Schedules[0]; item.NextFires != nil || item.PausedSince == nil {
		t.Fatalf("describe of a paused schedule: %+v", item)
	}

	resumed, err := c.ResumeSchedule(ctx, ScheduleRequest{ID: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if item := resumed.Schedules[0]; item.Paused || item.PausedSince != nil || len(item.NextFires) != 2 || item.Note != "made by hand" ||
		resumed.Text != "Schedule nightly resumed, next at 2026-11-26T09:40:00Z." {
		t.Fatalf("resumed: %q, %+v", resumed.Text, item)
	}
	a := f.s.Action.(*sdkclient.ScheduleWorkflowAction)
	if _, ok := a.Memo[memoPausedAt]; ok {
		t.Fatalf("a resumed schedule keeps its pause time: %v", a.Memo)
	}

	// Paused from the UI after our pause's record: a note of its own, no time.
	f.s.State.Paused, f.s.State.Note = true, "Paused via the UI"
	a.Memo[memoPausedAt], a.Memo[memoPausedNote] = mustPayload(t, now.Format(time.RFC3339)), mustPayload(t, "holidays")
	ui, err := c.DescribeSchedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if item := ui.Schedules[0]; item.PausedSince != nil || item.NextFires != nil {
		t.Fatalf("paused from the UI: %+v", item)
	}
	if got := nextFire(ui.Schedules[0]); got != "; paused (Paused via the UI): no fires until `subagents schedule resume nightly`" {
		t.Fatalf("its text: %q", got)
	}
	tc.AssertExpectations(t)
}
