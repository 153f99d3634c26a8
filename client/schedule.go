package client

import (
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// ScheduleItem is one schedule in `schedule list` and `schedule describe`
// (docs/schedules.md). Its JSON field names are a contract (the fleet view
// reads them): fields are only ever added.
type ScheduleItem struct {
	// ID is the schedule's ID, as the Temporal UI's Schedules page shows it.
	ID string `json:"id"`
	// Name is the schedule's readable title: what it runs.
	Name string `json:"name,omitempty"`
	// Note is the creator's note, or the pause note while paused.
	Note string `json:"note,omitempty"`
	// Cwd is the folder whose delegations it starts (and whose next pi
	// session receives their results).
	Cwd string `json:"cwd,omitempty"`
	// Kind is what each fire starts: "delegation" or "plan".
	Kind string `json:"kind,omitempty"`
	// Spec says when it fires, in the words it was created with: "every
	// 2h", "at 2026-12-01T09:00:00Z", "cron 0 9 * * 1-5", "calendar
	// hour=9 day_of_week=1-5"; Timezone the zone cron and calendar specs
	// read their times in ("" is UTC).
	Spec     string `json:"spec"`
	Timezone string `json:"timezone,omitempty"`
	// Overlap is what a fire does while the previous one still runs:
	// skip, buffer_one, cancel_other or allow_all.
	Overlap string `json:"overlap"`
	// Catchup is how late a fire missed while the service was down may
	// still start ("none": not at all; Temporal's default is a year).
	Catchup string `json:"catchup"`
	// End is when it stops firing, if it does.
	End *time.Time `json:"end,omitempty"`
	// Quiet schedules deliver only their failed runs to the folder's next
	// pi session.
	Quiet  bool `json:"quiet,omitempty"`
	Paused bool `json:"paused"`
	// PausedSince is when `schedule pause` paused it (absent while it
	// runs, and for a schedule paused elsewhere, as from the UI).
	PausedSince *time.Time `json:"paused_since,omitempty"`
	// NextFires are the next times it fires: none once it has ended, and
	// none while it is paused (it fires again only once resumed; Temporal
	// would give the times it was due at when paused, past ones too).
	NextFires []time.Time `json:"next_fires,omitempty"`
	// Fires counts the runs it started; Missed those it skipped because
	// they were later than the catch-up window; Skipped those the overlap
	// policy skipped.
	Fires   int `json:"fires"`
	Missed  int `json:"missed,omitempty"`
	Skipped int `json:"skipped,omitempty"`
	// Running (claim) counts its runs in the folder that have not left
	// their results yet: still running, or ended a moment ago (the result
	// they left may not be listed yet). A schedule deleted while a run of
	// it runs is in a claim's answer while it does, so that the folder
	// keeps looking for that run's result.
	Running int `json:"running,omitempty"`
	// Runs are its recent runs, newest first (describe: the last ten;
	// claim: the results this session took).
	Runs    []ScheduleRun `json:"runs,omitempty"`
	Created *time.Time    `json:"created,omitempty"`
	UIURL   string        `json:"ui_url,omitempty"`
}

// ScheduleRun is one fire of a schedule: the workflow the schedule started,
// and the delegation or plan it ran.
type ScheduleRun struct {
	// ID is the fire's workflow ID (the schedule's ID and the fire's time).
	ID string `json:"id"`
	// ResultID is the workflow that holds the run's result until a pi
	// session of the folder has it (schedule claim and ack take it).
	ResultID string `json:"result_id,omitempty"`
	// DelegationID is the delegation or plan it started ("" until it has,
	// or when its preparation failed).
	DelegationID string `json:"delegation_id,omitempty"`
	// Status is the run's: running while its delegation runs, then the
	// delegation's end (completed, failed, cancelled, ...); expired once
	// its workflow is past the namespace's retention.
	Status string `json:"status"`
	// Fired is when it started; Scheduled the time it stood for (earlier
	// for a fire caught up after the service was down). In a claim, Fired
	// is the time the fire stood for (its ID's), and Ended when it ended
	// and left its result (the result's start).
	Fired     time.Time  `json:"fired"`
	Scheduled *time.Time `json:"scheduled,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
	// Summary is the start of its first task's output, or of its error.
	Summary string        `json:"summary,omitempty"`
	Error   *errcode.Info `json:"error,omitempty"`
	// Delivery: Delivered once a pi session of the folder has its result;
	// ClaimedBy is the session that took it (schedule claim), Holder that
	// session's pi process.
	Delivered bool              `json:"delivered,omitempty"`
	ClaimedBy string            `json:"claimed_by,omitempty"`
	Holder    *api.ResultHolder `json:"holder,omitempty"`
	// Result is the delegation's envelope, in the answer of a claim this
	// session won (what it delivers).
	Result *Envelope `json:"result,omitempty"`
	UIURL  string    `json:"ui_url,omitempty"`
}
