package client

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// ScheduleActions are the actions of `subagents schedule`
// (docs/schedules.md), in the order its help lists them; claim and ack are
// the extension's delivery of scheduled runs' results.
var ScheduleActions = []string{"create", "list", "describe", "pause", "resume", "trigger", "update", "delete", "claim", "ack"}

// ChangesSchedules reports whether action makes, changes, fires or removes
// a schedule: what a subagent may not do (it may list and describe them).
func ChangesSchedules(action string) bool {
	switch action {
	case "create", "update", "pause", "resume", "trigger", "delete":
		return true
	}
	return false
}

// CheckScheduleRequest checks all of req that needs no service, as of
// now: the action, the caller's depth, the schedule ID, when it fires
// (a cron line as Temporal reads it, and a first fire before its end),
// its end and policies, and at create what it runs (each task valid, a
// saved plan found with its arguments bound, a plan document valid). The
// command runs it before it connects, so that a mistake is INVALID_INPUT
// whether or not a service runs; Schedule runs it again, and resolves the
// work's agents where the schedule is made (checkAgents).
func CheckScheduleRequest(req ScheduleRequest, now time.Time) error {
	if req.Depth > 0 && ChangesSchedules(req.Action) {
		return depthError(req.Action)
	}
	switch req.Action {
	case "create":
		if !strings.HasPrefix(req.Cwd, "/") {
			return errcode.Errorf(errcode.InvalidInput, "cwd must be an absolute path, not %q", req.Cwd)
		}
		if req.ID != "" {
			if err := api.ValidateScheduleID(req.ID); err != nil {
				return err
			}
		}
		if err := checkTiming(req, true, now); err != nil {
			return err
		}
		// The work as a start would check it, with no connection: a client
		// of no Temporal makes what it needs (session IDs) itself.
		_, _, err := (&Client{}).scheduledInput("pending", req)
		return err
	case "update":
		if err := api.ValidateScheduleID(req.ID); err != nil {
			return err
		}
		if !updateGiven(req) {
			return errcode.New(errcode.InvalidInput, "nothing to update: give when it runs, timezone, overlap, catchup, end, note, name, quiet, or what it runs")
		}
		return checkTiming(req, false, now)
	case "trigger":
		if req.Overlap != "" {
			if _, err := parseOverlap(req.Overlap); err != nil {
				return err
			}
		}
		return api.ValidateScheduleID(req.ID)
	case "describe", "pause", "resume", "delete":
		return api.ValidateScheduleID(req.ID)
	case "list":
		return nil
	case "claim":
		if !strings.HasPrefix(req.Cwd, "/") {
			return errcode.Errorf(errcode.InvalidInput, "cwd must be an absolute path, not %q", req.Cwd)
		}
		if req.By == "" {
			return errcode.New(errcode.InvalidInput, "a claim names the pi session that takes the results (--by)")
		}
		return nil
	case "ack":
		if len(req.IDs) == 0 {
			return errcode.New(errcode.InvalidInput, "name the results to acknowledge (their result IDs)")
		}
		return nil
	}
	return errcode.Errorf(errcode.InvalidInput, "schedule action %q: one of %s", req.Action, strings.Join(ScheduleActions[:8], ", "))
}

// checkTiming checks when req fires (required at create), its timezone,
// end and policies.
func checkTiming(req ScheduleRequest, create bool, now time.Time) error {
	w := req.when()
	var spec sdkclient.ScheduleSpec
	text := ""
	switch {
	case create || w.given():
		var err error
		if spec, text, _, err = buildSpec(w, now); err != nil {
			return err
		}
	case req.Timezone != "":
		if _, err := time.LoadLocation(req.Timezone); err != nil {
			return errcode.Errorf(errcode.InvalidInput, "timezone %q: %v (an IANA name such as Europe/Berlin)", req.Timezone, err)
		}
	}
	if err := setEnd(&spec, req.End, now); err != nil {
		return err
	}
	// An update's end or time meets the other half only in the schedule
	// (updated checks them there); here what the request gives whole.
	if text != "" {
		if err := checkFires(spec, text, now); err != nil {
			return err
		}
	}
	if _, err := parseOverlap(req.Overlap); err != nil {
		return err
	}
	_, err := parseCatchup(req.Catchup)
	return err
}

// updateGiven reports whether an update request gives anything to change.
func updateGiven(req ScheduleRequest) bool {
	return req.when().given() || req.Timezone != "" || req.End != "" || req.Overlap != "" || req.Catchup != "" ||
		req.Note != "" || req.Name != "" || req.Quiet != nil || req.hasWork()
}

// Schedule runs one schedule action (docs/schedules.md) after checking the
// request: the one entry the command and the extension use.
func (c *Client) Schedule(ctx context.Context, req ScheduleRequest) (Envelope, error) {
	if err := CheckScheduleRequest(req, c.CurrentTime()); err != nil {
		return Envelope{}, err
	}
	switch req.Action {
	case "create":
		return c.CreateSchedule(ctx, req)
	case "list":
		return c.ListSchedules(ctx, req.Cwd)
	case "describe":
		return c.DescribeSchedule(ctx, req.ID)
	case "pause":
		return c.PauseSchedule(ctx, req)
	case "resume":
		return c.ResumeSchedule(ctx, req)
	case "trigger":
		return c.TriggerSchedule(ctx, req)
	case "update":
		return c.UpdateSchedule(ctx, req)
	case "delete":
		return c.DeleteSchedule(ctx, req)
	case "claim":
		return c.ClaimResults(ctx, req.Cwd, req.By, req.Holder, req.Replace)
	case "ack":
		return c.AckResults(ctx, req.IDs, req.By)
	}
	return Envelope{}, fmt.Errorf("schedule action %q passed its check", req.Action)
}

// checkDepth refuses a subagent's action on a schedule (docs/schedules.md:
// schedules are made and changed by a person or a top-level pi).
func checkDepth(req ScheduleRequest, action string) error {
	if req.Depth > 0 {
		return depthError(action)
	}
	return nil
}

func depthError(action string) error {
	return errcode.Errorf(errcode.DepthExceeded, "a subagent cannot %s schedules: schedules are made and changed by a top-level pi or a person (list and describe are open to it)", action)
}

// checkAgents resolves the agents of in's work as the worker will at each
// fire, in the schedule's folder (profiles.Activities, with this process's
// pi config dir, prompt folders and settings variables: the local
// service's are its worker's). An unknown, disabled or refused agent is
// refused now, with its code (UNKNOWN_AGENT, ...) and the task or step it
// belongs to, instead of failing every fire unattended. Work bound for
// another host's workers is resolved there, at the fire.
func (c *Client) checkAgents(in api.ScheduledInput) error {
	if in.Host != "" {
		if h, err := os.Hostname(); err != nil || h != in.Host {
			return nil
		}
	}
	var tasks []profiles.ResolveTask
	var labels []string
	if d := in.Delegation; d != nil {
		for i, t := range d.Tasks {
			if t.Rejected != nil {
				continue
			}
			// Depth 1: a fire's delegation is a top-level one (its children
			// are at depth 1), as PrepareScheduled makes it.
			tasks = append(tasks, profiles.ResolveTask{Profile: t.ProfileOr(d.Profile), Cwd: t.Cwd, Model: t.Model, TimeoutSeconds: t.TimeoutSeconds, Tool: d.Tool, Depth: 1})
			labels = append(labels, fmt.Sprintf("tasks[%d] (%s)", i, t.Name))
		}
	} else {
		// A plan's steps resolve as its start resolves them (CheckPlan).
		if in.Plan != nil {
			return resolvePlanAgents(*in.Plan)
		}
		_, err := CheckPlan(PlanRequest{Name: in.PlanName, Args: in.PlanArgs, Cwd: in.Cwd, Profile: in.PlanProfile, Host: in.Host})
		return err
	}
	r := &profiles.Activities{AgentDir: profiles.DefaultAgentDir(), PromptDirs: profiles.DefaultPromptDirs(), Getenv: os.Getenv}
	for i, t := range tasks {
		if err := r.CheckTask(t); err != nil {
			return errcode.Wrap(errcode.CodeOf(err), err, labels[i]+": "+err.Error())
		}
	}
	return nil
}
