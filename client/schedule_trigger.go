package client

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	schedulepb "go.temporal.io/api/schedule/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A trigger asks Temporal's scheduler for a run now. The scheduler names a
// run by its schedule and the second it stands for (FireID), so two runs
// asked for in the same second would be one: the second start finds the
// first's workflow ID taken and is dropped, while both callers were told
// "triggered". So a trigger asks for a second no run of the schedule has
// (waiting for the next one when this one is taken), gives the scheduler
// the exact time it asks for, and waits to see a run of that exact time
// start: then it answers with that run. Two triggers sent at the very same
// moment from two processes may still pick the same free second; the one
// whose run the scheduler dropped sees it, and asks again for the next
// second.

// triggerConfirmWait bounds how long a trigger waits to see its run start:
// the scheduler starts it within milliseconds of the request; the bound
// covers a busy service. A run an overlap policy other than allow_all
// holds back (skip, buffer_one) is told as such once it passes.
const triggerConfirmWait = 5 * time.Second

// triggerPoll is how often a trigger looks at the schedule meanwhile.
const triggerPoll = 100 * time.Millisecond

// triggerAttempts bounds the seconds a trigger tries: each retry follows a
// run dropped because another trigger took its second, so this many
// triggers sent at one moment all get their own run.
const triggerAttempts = 5

// FireID is the workflow ID of schedule id's run that stands for time t:
// the schedule's ID and t's second, in UTC (Temporal's scheduler names
// every run so).
func FireID(id string, t time.Time) string {
	return id + "-" + t.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// triggerOutcome is what became of one trigger.
type triggerOutcome int

const (
	// triggerStarted: its run started.
	triggerStarted triggerOutcome = iota
	// triggerTaken: another run has its second; its own was dropped.
	triggerTaken
	// triggerHeld: not started within triggerConfirmWait (an overlap
	// policy skips it or keeps it waiting, or a busy service).
	triggerHeld
)

// TriggerSchedule runs schedule req.ID now, paused or not, and answers
// with the run it started (the schedule's runs hold just that one). Its
// overlap is allow_all unless req.Overlap names another policy: a person
// who asks for a run now wants one.
func (c *Client) TriggerSchedule(ctx context.Context, req ScheduleRequest) (Envelope, error) {
	if err := checkDepth(req, "trigger"); err != nil {
		return Envelope{}, err
	}
	id := req.ID
	policy := enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL
	if req.Overlap != "" {
		p, err := parseOverlap(req.Overlap)
		if err != nil {
			return Envelope{}, err
		}
		policy = p
	}
	if _, err := c.describeSchedule(ctx, id, 0); err != nil {
		return Envelope{}, err
	}
	h := c.Temporal.ScheduleClient().GetHandle(ctx, id)
	for range triggerAttempts {
		at, err := c.freeSecond(ctx, id)
		if err != nil {
			return Envelope{}, err
		}
		before, err := h.Describe(ctx)
		if err != nil {
			return Envelope{}, c.scheduleError(err, id)
		}
		_, err = c.Temporal.WorkflowService().PatchSchedule(ctx, &workflowservice.PatchScheduleRequest{
			Namespace:  cmp.Or(c.Namespace, "default"),
			ScheduleId: id,
			Patch: &schedulepb.SchedulePatch{TriggerImmediately: &schedulepb.TriggerImmediatelyRequest{
				OverlapPolicy: policy, ScheduledTime: timestamppb.New(at),
			}},
			RequestId: uuid.NewString(),
		})
		if err != nil {
			return Envelope{}, c.scheduleError(err, id)
		}
		outcome, run, err := c.confirmTrigger(ctx, h, at, before.Info.NumActionsSkippedOverlap)
		if err != nil {
			return Envelope{}, err
		}
		fire := FireID(id, at)
		switch outcome {
		case triggerTaken:
			continue
		case triggerHeld:
			item, err := c.describeSchedule(ctx, id, 1)
			if err != nil {
				return Envelope{}, err
			}
			why := fmt.Sprintf("overlap %s holds it while a run runs", overlapName(policy))
			if policy == enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL {
				why = fmt.Sprintf("it did not start within %s", triggerConfirmWait)
			}
			return scheduleEnvelope(fmt.Sprintf("Schedule %s triggered, but its run %s has not started: %s.", id, fire, why), item), nil
		}
		item, err := c.describeSchedule(ctx, id, 0)
		if err != nil {
			return Envelope{}, err
		}
		item.Runs = []ScheduleRun{c.scheduleRun(ctx, run)}
		return scheduleEnvelope(fmt.Sprintf("Schedule %s triggered: run %s started%s.", id, run.StartWorkflowResult.WorkflowID, nextFire(item)), item), nil
	}
	return Envelope{}, c.scheduleError(fmt.Errorf("%d triggers of schedule %s each found their second taken by another run", triggerAttempts, id), id)
}

// freeSecond is a time in the first second from now that no run of
// schedule id stands for: now, or the start of a later second (after
// waiting for it).
func (c *Client) freeSecond(ctx context.Context, id string) (time.Time, error) {
	for {
		now := c.CurrentTime()
		_, err := c.Temporal.DescribeWorkflowExecution(ctx, FireID(id, now), "")
		switch {
		case isNotFound(err):
			return now, nil
		case err != nil:
			return time.Time{}, c.temporalError(err, id)
		}
		next := now.Truncate(time.Second).Add(time.Second)
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(next.Sub(now)):
		}
	}
}

// confirmTrigger waits until the scheduler has started the run of the
// exact time at (its recent actions hold it), another run holds at's
// second, or the bound passes. skipped is the count of runs the overlap
// policy skipped before the trigger: one more, with no run of ours, is
// ours skipped.
func (c *Client) confirmTrigger(ctx context.Context, h sdkclient.ScheduleHandle, at time.Time, skipped int) (triggerOutcome, sdkclient.ScheduleActionResult, error) {
	fire := FireID(h.GetID(), at)
	deadline := time.Now().Add(triggerConfirmWait)
	var takenSince time.Time
	for {
		desc, err := h.Describe(ctx)
		if err != nil {
			return 0, sdkclient.ScheduleActionResult{}, c.scheduleError(err, h.GetID())
		}
		taken := false
		for _, a := range desc.Info.RecentActions {
			if a.StartWorkflowResult == nil {
				continue
			}
			if a.ScheduleTime.Equal(at) {
				return triggerStarted, a, nil
			}
			taken = taken || a.StartWorkflowResult.WorkflowID == fire
		}
		now := time.Now()
		switch {
		case taken && takenSince.IsZero():
			takenSince = now
		case taken && now.Sub(takenSince) >= 5*triggerPoll:
			// The scheduler tries the starts it was given one after
			// another: ours would be there by now.
			return triggerTaken, sdkclient.ScheduleActionResult{}, nil
		case !taken && desc.Info.NumActionsSkippedOverlap > skipped:
			return triggerHeld, sdkclient.ScheduleActionResult{}, nil
		}
		if now.After(deadline) {
			return triggerHeld, sdkclient.ScheduleActionResult{}, nil
		}
		select {
		case <-ctx.Done():
			return 0, sdkclient.ScheduleActionResult{}, ctx.Err()
		case <-time.After(triggerPoll):
		}
	}
}
