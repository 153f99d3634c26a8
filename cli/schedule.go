package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// scheduleOptions are `schedule ACTION [ID] [flags]` (docs/schedules.md):
// create, list, describe, pause, resume, trigger, update, delete, and the
// extension's claim and ack of scheduled runs' results. Flags may come
// before or after the action and its ID, as for every verb (ParseFlags);
// --input reads the whole request as JSON (the task tool's schedule
// parameter), or, for create and update, the work alone as `start --input`
// takes it.
type scheduleOptions struct {
	req      client.ScheduleRequest
	input    string
	plan     string
	agent    string
	args     argFlags
	quiet    triState
	pid      int
	pidStart string
	replace  string
	// prepared is the request once read and checked (prepare).
	prepared *client.ScheduleRequest
}

func (o *scheduleOptions) register(fs *flag.FlagSet) {
	r := &o.req
	str := func(p *string, name, usage string) { fs.Var(stringFlag{p}, name, usage) }
	str(&o.input, "input", "read the request as JSON from this `FILE` (- for stdin): {\"action\": ...} as docs/schedules.md shows, or for create and update the work as start --input takes it")
	str(&r.ID, "id", "create: the schedule's `ID` (default: made from its name)")
	str(&r.Name, "name", "create, update: the schedule's readable `NAME` (default: its tasks' names or the plan's)")
	str(&r.At, "at", "create, update: run once, at a `TIME` (RFC 3339) or after a duration from now (10m, 2h, 1d)")
	str(&r.Every, "every", "create, update: run every `INTERVAL` (90s, 10m, 2h, 1d, 1w), the first one interval from now")
	str(&r.Cron, "cron", "create, update: run by a cron `LINE` (\"0 9 * * 1-5\", @daily)")
	str(&r.Calendar, "calendar", "create, update: run by a calendar `SPEC` (\"hour=9 minute=30 day_of_week=mon-fri\")")
	str(&r.Timezone, "timezone", "create, update: the IANA `ZONE` cron and calendar read their times in (default UTC)")
	str(&r.Overlap, "overlap", "create, update, trigger: what a fire does while the last one runs: `POLICY` skip (default), buffer_one, cancel_other or allow_all")
	str(&r.Catchup, "catchup", "create, update: how late a fire missed while the service was down may still run: a `DURATION`, or none (default: a year)")
	str(&r.End, "end", "create, update: stop firing at a `TIME` (RFC 3339) or after a duration from now")
	str(&r.Note, "note", "create, update: the schedule's `TEXT`; pause, resume: why")
	str(&r.Cwd, "cwd", "create: the `DIR` its tasks run in and whose next pi session gets the results (default: the current folder); list, claim: that folder's only")
	str(&o.agent, "agent", "create, update: the `PROFILE` of a task given as prompt words")
	str(&o.plan, "plan", "create, update: run a plan: a plan `FILE` (.yaml, .yml, .json) or a saved plan's name")
	fs.Var(&o.args, "arg", "a saved plan's argument, `NAME=VALUE` (repeatable)")
	fs.Var(&o.quiet, "quiet", "create, update: deliver only runs that did not complete (--quiet=false: every run)")
	str(&r.By, "by", "claim, ack: the pi `SESSION` that takes the results")
	fs.Var(intFlag{&o.pid}, "pid", "claim: the `PID` of the pi process that takes them")
	str(&o.pidStart, "pid-start", "claim: that process's start `TICKS` (/proc/PID/stat)")
	str(&o.replace, "replace", "claim: take the results these comma-separated `SESSIONS` hold (their pi is gone)")
}

func (o *scheduleOptions) readsStdin() bool { return o.input == "-" }

// scheduleHelp is what `subagents schedule -h` says after its flags: the
// actions, and an example of each kind of when and of a plan.
const scheduleHelp = `
subagents schedule ACTION [ID] [flags] ["prompt words"]: delegations and plans on a timer, run in
their folder by the service with no pi open; their results reach the next pi started there
(docs/schedules.md). Flags may come before or after the action and its ID.

Actions:
  create        make a schedule of this folder (or --cwd): when it fires (one of --at, --every,
                --cron, --calendar) and what it runs (prompt words, --input tasks, or --plan)
  list          the schedules (--cwd DIR: that folder's only)
  describe ID   when it fires, its policies, its next fires and its last ten runs
  pause ID      no fires until resumed; --note says why
  resume ID     fires again
  trigger ID    one run now, paused or not; says which run it started
  update ID     change what the flags give (when, --timezone, policies, --end, --note, --name,
                --quiet, the work); the rest stays
  delete ID     remove it; runs it started go on, and their results still come

Examples:
  subagents schedule create --at 30m "Check whether the release build passed"
  subagents schedule create --every 6h --agent scout "Read the new log lines and report anything unusual"
  subagents schedule create --cron "0 9 * * 1-5" --timezone Europe/Berlin --input tasks.json
  subagents schedule create --calendar "hour=2 day_of_week=sun" --note "weekly" "Review last week's commits"
  subagents schedule create --every 1d --plan nightly-review --arg file=cli/cmd.go
`

// helpText is what -h prints after the verb's flags.
func (o *scheduleOptions) helpText() string { return scheduleHelp }

// scheduleActions are the actions, and whether each takes a schedule ID.
var scheduleActions = map[string]bool{
	"create": false, "list": false, "claim": false, "ack": false,
	"describe": true, "pause": true, "resume": true, "trigger": true, "update": true, "delete": true,
}

// prepare reads the action, its flags and words and the request, and checks
// all of it that needs no service (client.CheckScheduleRequest): a mistake
// is INVALID_INPUT (or SUBAGENT_DEPTH_EXCEEDED for a subagent's change)
// before any connection is made, whether or not a service runs. It runs
// once; a request read from stdin stays readable for a call the local
// service runs.
func (o *scheduleOptions) prepare(cmd *command) error {
	if o.prepared != nil {
		return nil
	}
	var stdin []byte
	if o.input == "-" {
		b, err := io.ReadAll(io.LimitReader(cmd.io.In, maxRequestBytes+1))
		if err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, "request: "+err.Error())
		}
		stdin = b
		cmd.io.In = bytes.NewReader(stdin)
		defer func() { cmd.io.In = bytes.NewReader(stdin) }()
	}
	// The verb's parse read the flags, before and after the action alike:
	// what is left is the action, an ID, prompt words.
	req, err := o.request(cmd, cmd.args)
	if err != nil {
		return err
	}
	if err := client.CheckScheduleRequest(req, time.Now()); err != nil {
		return err
	}
	o.prepared = &req
	return nil
}

// unavailable is err, the service not answering, with what keeps
// schedules firing: the service, run at login by `subagents service install`.
func (o *scheduleOptions) unavailable(err error) error {
	if !errcode.Is(err, errcode.ServiceUnavailable) {
		return err
	}
	return errcode.Wrap(errcode.ServiceUnavailable, err, err.Error()+"; schedules fire only while the service runs: `subagents service install --enable` starts it now and at every login (docs/schedules.md)")
}

func (o *scheduleOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	if err := o.prepare(cmd); err != nil {
		return err
	}
	req := *o.prepared
	switch req.Action {
	case "create", "update", "pause", "resume", "delete", "trigger":
		// The actions a subagent may not take get the caller's proven
		// depth, as a start's (fillDefaults gave its claim): a child that
		// keeps its token but drops its claim is still a child. The others
		// (list, describe, claim, ack) are open to a subagent, so a stale
		// token does not block them.
		depth, err := cmd.depth(ctx, c, req.Depth)
		if err != nil {
			return err
		}
		req.Depth = depth
	}
	env, err := c.Schedule(ctx, req)
	if err != nil {
		return o.unavailable(err)
	}
	if req.Action == "create" {
		if err := markScheduledFolder(cmd.dataDir(), req.Cwd); err != nil {
			env.Text += fmt.Sprintf(" (%v: a pi session started there looks for the results once pi has made a schedule there)", err)
		}
	}
	return cmd.finishQuiet(env, func(env client.Envelope) { printSchedules(cmd.io.Out, req.Action, env, time.Now()) })
}

// A folder that has schedules is marked in the data dir
// (<data dir>/scheduled/<sha256 of the folder>, holding {"cwd": ...}): a
// pi session started there asks for the results of its scheduled runs only
// when the mark is there, so that a start elsewhere makes no call
// (extension/src/delivery.ts reads it; it removes a mark once its folder
// has neither schedules nor results).

// ScheduledMark is the mark of folder cwd in dataDir.
func ScheduledMark(dataDir, cwd string) string {
	sum := sha256.Sum256([]byte(cwd))
	return filepath.Join(dataDir, "scheduled", hex.EncodeToString(sum[:16]))
}

// markScheduledFolder writes cwd's mark.
func markScheduledFolder(dataDir, cwd string) error {
	if dataDir == "" {
		return errors.New("no data dir to mark the folder in")
	}
	path := ScheduledMark(dataDir, cwd)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(map[string]string{"cwd": cwd})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// dataDir is the local service's data dir as this call sees it.
func (cmd *command) dataDir() string {
	if d := cmd.io.getenv("SUBAGENTS_DATA_DIR"); d != "" {
		return d
	}
	d, err := connection.DefaultDataDir()
	if err != nil {
		return ""
	}
	return d
}

// request builds the request from --input, the flags and the words.
func (o *scheduleOptions) request(cmd *command, pos []string) (client.ScheduleRequest, error) {
	req := o.req
	var work json.RawMessage
	if o.input != "" {
		var raw json.RawMessage
		if err := cmd.readJSON(o.input, &raw); err != nil {
			return req, err
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			return req, errcode.Errorf(errcode.InvalidInput, "input: %v", err)
		}
		if _, ok := probe["action"]; ok {
			var in client.ScheduleRequest
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return req, errcode.Wrap(errcode.InvalidInput, err, "schedule request: "+strings.TrimPrefix(err.Error(), "json: "))
			}
			req = mergeRequest(in, req)
		} else {
			work = raw
		}
	}
	if len(pos) > 0 {
		if req.Action != "" && req.Action != pos[0] {
			return req, errcode.Errorf(errcode.InvalidInput, "the action is %q in the input and %q in the arguments", req.Action, pos[0])
		}
		req.Action, pos = pos[0], pos[1:]
	}
	takesID, known := scheduleActions[req.Action]
	if !known {
		if req.Action == "" {
			return req, errcode.New(errcode.InvalidInput, "subagents schedule takes an action: create, list, describe, pause, resume, trigger, update or delete (subagents schedule -h shows each with an example)")
		}
		return req, errcode.Errorf(errcode.InvalidInput, "schedule action %q: one of create, list, describe, pause, resume, trigger, update, delete (subagents schedule -h shows each with an example)", req.Action)
	}
	if takesID && len(pos) > 0 {
		if req.ID != "" && req.ID != pos[0] {
			return req, errcode.Errorf(errcode.InvalidInput, "two schedule IDs: %q and %q", req.ID, pos[0])
		}
		req.ID, pos = pos[0], pos[1:]
	}
	if takesID && req.ID == "" {
		return req, errcode.Errorf(errcode.InvalidInput, "subagents schedule %s takes a schedule ID (subagents schedule list lists them)", req.Action)
	}
	if req.Action == "ack" {
		req.IDs, pos = append(req.IDs, pos...), nil
	}
	if o.quiet.set {
		req.Quiet = &o.quiet.value
	}
	if o.pid > 0 {
		req.Holder = &api.ResultHolder{PID: o.pid, Start: o.pidStart}
	}
	for _, s := range strings.Split(o.replace, ",") {
		if s = strings.TrimSpace(s); s != "" {
			req.Replace = append(req.Replace, s)
		}
	}
	if err := o.fillWork(cmd, &req, work, pos); err != nil {
		return req, err
	}
	if req.Action == "list" && req.Cwd != "" || req.Action == "create" || req.Action == "claim" {
		dir, err := cmd.io.dir()
		if err != nil {
			return req, errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
		if req.Cwd == "" {
			req.Cwd = dir
		}
		req.Cwd = realDir(cmd.abs(req.Cwd))
	}
	// The caller's host and depth, as a start's.
	defaults := client.StartRequest{Host: req.Host}
	if err := cmd.fillDefaults(&defaults); err != nil {
		return req, err
	}
	req.Host, req.Depth = defaults.Host, defaults.Depth
	return req, nil
}

// realDir is dir with its symbolic links resolved, as pi names the folder
// it runs in (the real path): a schedule made through a linked path belongs
// to the same folder as a pi started there, whose results it claims. A
// folder that cannot be resolved (not there yet) stays as given.
func realDir(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return dir
}

// fillWork sets what the schedule runs from the work JSON, --plan, or
// prompt words (with --agent); words are refused where nothing takes them.
func (o *scheduleOptions) fillWork(cmd *command, req *client.ScheduleRequest, work json.RawMessage, words []string) error {
	creates := req.Action == "create" || req.Action == "update"
	prompt := strings.TrimSpace(strings.Join(words, " "))
	switch {
	case !creates && (len(work) > 0 || o.plan != "" || prompt != "" || o.agent != "" || len(o.args) > 0 || req.Prompt != "" || len(req.Tasks) > 0 || len(req.Plan) > 0):
		return errcode.Errorf(errcode.InvalidInput, "schedule %s takes no work (tasks, plan, prompt): only create and update do", req.Action)
	case len(work) > 0:
		plan, err := planInput(work)
		if err != nil {
			return err
		}
		if plan != nil {
			return schedulePlan(req, plan)
		}
		var start client.StartRequest
		dec := json.NewDecoder(bytes.NewReader(work))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&start); err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, "request: "+err.Error())
		}
		req.Tasks, req.Profile, req.MaxConcurrency = start.Tasks, start.Profile, start.MaxConcurrency
		req.Host = start.Host
	case o.plan != "":
		if prompt != "" {
			return errcode.Errorf(errcode.InvalidInput, "a plan takes no prompt (%q): its steps hold the tasks", prompt)
		}
		pr := client.PlanRequest{Args: o.args, Profile: o.agent}
		if isPlanFile(o.plan) {
			p, err := profiles.ReadPlanFile(cmd.abs(o.plan))
			if err != nil {
				return err
			}
			pr.Plan = &p
		} else {
			pr.Name = o.plan
		}
		return schedulePlan(req, &pr)
	case prompt != "":
		req.Prompt, req.Agent = prompt, o.agent
	case o.agent != "":
		return errcode.New(errcode.InvalidInput, "--agent names the profile of a task given as prompt words: subagents schedule create --every 1h --agent scout \"what to do\"")
	}
	if len(o.args) > 0 && len(req.Plan) == 0 {
		return errcode.New(errcode.InvalidInput, "--arg gives a saved plan's arguments: use it with --plan NAME")
	}
	return nil
}

// schedulePlan puts a plan request into the schedule request: the plan's
// name as a JSON string, or its document.
func schedulePlan(req *client.ScheduleRequest, p *client.PlanRequest) error {
	var err error
	if p.Plan != nil {
		req.Plan, err = json.Marshal(p.Plan)
	} else {
		req.Plan, err = json.Marshal(p.Name)
	}
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	req.Args, req.Profile, req.MaxConcurrency = p.Args, p.Profile, p.MaxConcurrency
	if p.Cwd != "" {
		req.Cwd = p.Cwd
	}
	return nil
}

// mergeRequest is the JSON request with the flags given on the command
// line over it.
func mergeRequest(in, flags client.ScheduleRequest) client.ScheduleRequest {
	for _, f := range []struct{ dst, src *string }{
		{&in.ID, &flags.ID}, {&in.Name, &flags.Name}, {&in.At, &flags.At}, {&in.Every, &flags.Every}, {&in.Cron, &flags.Cron},
		{&in.Calendar, &flags.Calendar}, {&in.Timezone, &flags.Timezone}, {&in.Overlap, &flags.Overlap}, {&in.Catchup, &flags.Catchup},
		{&in.End, &flags.End}, {&in.Note, &flags.Note}, {&in.Cwd, &flags.Cwd}, {&in.By, &flags.By},
	} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	return in
}

// printSchedules prints a schedule action's answer for people.
func printSchedules(w io.Writer, action string, env client.Envelope, now time.Time) {
	switch action {
	case "list":
		if len(env.Schedules) == 0 {
			_, _ = fmt.Fprintln(w, "no schedules")
			return
		}
		const row = "%-28s %-7s %-24s %-20s %-10s %s\n"
		_, _ = fmt.Fprintf(w, row, "ID", "STATE", "WHEN", "NEXT", "LAST", "NAME")
		var paused []string
		for _, s := range env.Schedules {
			state, next, last := "active", "-", "-"
			if s.Paused {
				// A paused schedule has no next fire: what it waits for
				// is said under the table.
				state, next = "paused", "(paused)"
				paused = append(paused, pausedLine(s, now))
			} else if len(s.NextFires) > 0 {
				next = shortWhen(s.NextFires[0], now)
			}
			if len(s.Runs) > 0 {
				last = s.Runs[0].Status
			}
			_, _ = fmt.Fprintf(w, row, s.ID, state, s.Spec, next, last, s.Name)
		}
		for _, l := range paused {
			_, _ = fmt.Fprintln(w, l)
		}
	case "describe":
		for _, s := range env.Schedules {
			describeSchedule(w, s, now)
		}
	case "claim":
		for _, s := range env.Schedules {
			for _, r := range s.Runs {
				took := "held by " + r.ClaimedBy
				if r.Result != nil {
					took = "taken"
				}
				_, _ = fmt.Fprintf(w, "%s  %s  %s  %s\n", r.ResultID, s.ID, r.Status, took)
			}
		}
		_, _ = fmt.Fprintln(w, env.Text)
	default:
		_, _ = fmt.Fprintln(w, env.Text)
		if action != "delete" && action != "ack" {
			for _, s := range env.Schedules {
				if s.UIURL != "" {
					_, _ = fmt.Fprintf(w, "  %s\n", s.UIURL)
				}
			}
		}
	}
}

// describeSchedule prints one schedule in full.
func describeSchedule(w io.Writer, s client.ScheduleItem, now time.Time) {
	p := func(k, v string) {
		if v != "" {
			_, _ = fmt.Fprintf(w, "%-10s %s\n", k+":", v)
		}
	}
	state := "active"
	if s.Paused {
		state = "paused"
		if s.PausedSince != nil {
			state += " since " + shortWhen(*s.PausedSince, now)
		}
	}
	p("schedule", s.ID)
	p("name", s.Name)
	p("runs", s.Kind+" in "+s.Cwd)
	p("when", strings.TrimSpace(s.Spec+" "+s.Timezone))
	p("state", state)
	p("note", s.Note)
	p("overlap", s.Overlap)
	p("catchup", s.Catchup)
	if s.End != nil {
		p("ends", s.End.Local().Format(time.RFC3339))
	}
	delivers := "every run's result to the folder's next pi session"
	if s.Quiet {
		delivers = "only failed runs' results (quiet)"
	}
	p("delivers", delivers)
	var next []string
	for i, t := range s.NextFires {
		if i == 5 {
			break
		}
		next = append(next, shortWhen(t, now))
	}
	if s.Paused {
		p("next", "none while paused: `subagents schedule resume "+s.ID+"` lets it fire again")
	} else {
		p("next", strings.Join(next, ", "))
	}
	counts := strconv.Itoa(s.Fires) + " run(s)"
	if s.Missed > 0 {
		counts += fmt.Sprintf(", %d missed (later than the catch-up window)", s.Missed)
	}
	if s.Skipped > 0 {
		counts += fmt.Sprintf(", %d skipped (overlap)", s.Skipped)
	}
	p("fired", counts)
	p("ui", s.UIURL)
	if len(s.Runs) > 0 {
		_, _ = fmt.Fprintln(w, "recent runs:")
		for _, r := range s.Runs {
			delivered := ""
			switch {
			case r.Delivered:
				delivered = "delivered"
			case r.ResultID != "":
				delivered = "waiting for a pi session"
			}
			_, _ = fmt.Fprintf(w, "  %-20s %-10s %-46s %s\n", shortWhen(r.Fired, now), r.Status, r.DelegationID, delivered)
			if r.Summary != "" {
				_, _ = fmt.Fprintf(w, "    %s\n", r.Summary)
			}
		}
	}
}

// pausedLine says under a list that schedule s is paused, since when and
// why, and the command that lets it fire again.
func pausedLine(s client.ScheduleItem, now time.Time) string {
	var why []string
	if s.PausedSince != nil {
		why = append(why, "since "+shortWhen(*s.PausedSince, now))
	}
	if s.Note != "" {
		why = append(why, s.Note)
	}
	text := s.ID + " is paused"
	if len(why) > 0 {
		text += " (" + strings.Join(why, ": ") + ")"
	}
	return text + ": `subagents schedule resume " + s.ID + "` lets it fire again"
}

// shortWhen is a time as a listing shows it: local, to the second.
func shortWhen(t time.Time, now time.Time) string {
	t = t.In(now.Location())
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return "today " + t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// stringFlag is a string flag whose registration leaves its field alone.
type stringFlag struct{ p *string }

func (f stringFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}

func (f stringFlag) Set(v string) error { *f.p = v; return nil }

// intFlag is an int flag whose registration leaves its field alone.
type intFlag struct{ p *int }

func (f intFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f intFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a number", v)
	}
	*f.p = n
	return nil
}

// triState is a boolean flag that knows whether it was given.
type triState struct{ set, value bool }

func (t *triState) String() string   { return strconv.FormatBool(t != nil && t.value) }
func (t *triState) IsBoolFlag() bool { return true }
func (t *triState) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	t.set, t.value = true, b
	return nil
}
