package client

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/internal/errcode"
)

// When a schedule fires, as a person or a model writes it
// (docs/schedules.md): once (at), every interval, by a cron line, or by a
// calendar (Temporal's calendar spec, written key=value). Each becomes a
// Temporal ScheduleSpec; the words given are kept as the schedule's spec
// text, which list and describe show.

// scheduleWhen is the when of a request: exactly one of its first four.
type scheduleWhen struct {
	at, every, cron, calendar string
	timezone                  string
}

func (w scheduleWhen) given() bool {
	return w.at != "" || w.every != "" || w.cron != "" || w.calendar != ""
}

// buildSpec is the Temporal spec of w (without an end), its text, and
// whether it fires once (at: the schedule then takes one action).
func buildSpec(w scheduleWhen, now time.Time) (sdkclient.ScheduleSpec, string, bool, error) {
	var spec sdkclient.ScheduleSpec
	n := 0
	for _, s := range []string{w.at, w.every, w.cron, w.calendar} {
		if strings.TrimSpace(s) != "" {
			n++
		}
	}
	const ways = "at (once: 10m or an RFC 3339 time), every (an interval: 2h, 1d), cron (\"0 9 * * 1-5\"), calendar (\"hour=9 day_of_week=mon-fri\")"
	switch {
	case n == 0:
		return spec, "", false, errcode.New(errcode.InvalidInput, "say when it runs with one of: "+ways)
	case n > 1:
		return spec, "", false, errcode.New(errcode.InvalidInput, "say when it runs with only one of: "+ways)
	}
	if w.timezone != "" {
		if _, err := time.LoadLocation(w.timezone); err != nil {
			return spec, "", false, errcode.Errorf(errcode.InvalidInput, "timezone %q: %v (an IANA name such as Europe/Berlin)", w.timezone, err)
		}
		spec.TimeZoneName = w.timezone
	}
	switch {
	case w.at != "":
		t, err := parseTime("at", w.at, now)
		if err != nil {
			return spec, "", false, err
		}
		if !t.After(now) {
			return spec, "", false, errcode.Errorf(errcode.InvalidInput, "at %s is in the past", t.Format(time.RFC3339))
		}
		if t.Before(now.Add(minAtLead)) {
			return spec, "", false, errcode.Errorf(errcode.InvalidInput, "at %s is less than %s from now: the server may make the schedule after that second, and it would never fire (give at least %s ahead)", t.Format(time.RFC3339), minAtLead, minAtLead)
		}
		if t.UTC().Year() > maxCalendarYear {
			return spec, "", false, errcode.Errorf(errcode.InvalidInput, "at %s: Temporal's schedules end with the year %d", t.Format(time.RFC3339), maxCalendarYear)
		}
		// One calendar entry matching that second, in UTC whatever the
		// timezone: it fires once.
		t = t.UTC().Truncate(time.Second)
		spec.TimeZoneName = ""
		spec.Calendars = []sdkclient.ScheduleCalendarSpec{{
			Year: one(t.Year()), Month: one(int(t.Month())), DayOfMonth: one(t.Day()),
			Hour: one(t.Hour()), Minute: one(t.Minute()), Second: one(t.Second()),
		}}
		return spec, "at " + t.Format(time.RFC3339), true, nil
	case w.every != "":
		d, err := parseDuration("every", w.every)
		if err != nil {
			return spec, "", false, err
		}
		if d < time.Second || d%time.Second != 0 {
			return spec, "", false, errcode.Errorf(errcode.InvalidInput, "every %s: an interval is whole seconds, at least 1s", w.every)
		}
		// Temporal counts intervals from the epoch: the offset makes the
		// first fire one interval after now, as "every" reads.
		spec.Intervals = []sdkclient.ScheduleIntervalSpec{{Every: d, Offset: time.Duration(now.Unix()%int64(d/time.Second)) * time.Second}}
		return spec, "every " + formatDuration(d), false, nil
	case w.cron != "":
		c := strings.TrimSpace(w.cron)
		// Read here as Temporal reads it: a field out of range is this
		// command's INVALID_INPUT, whether or not the service runs.
		if _, err := parseCron(c); err != nil {
			return spec, "", false, err
		}
		spec.CronExpressions = []string{c}
		return spec, "cron " + c, false, nil
	default:
		cal, err := parseCalendar(w.calendar)
		if err != nil {
			return spec, "", false, err
		}
		spec.Calendars = []sdkclient.ScheduleCalendarSpec{cal}
		return spec, "calendar " + strings.Join(strings.Fields(w.calendar), " "), false, nil
	}
}

func one(v int) []sdkclient.ScheduleRange { return []sdkclient.ScheduleRange{{Start: v, End: v}} }

// parseTime reads an absolute time (RFC 3339) or one relative to now
// ("10m", "+10m", "2d").
func parseTime(what, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := parseDuration(what, strings.TrimPrefix(s, "+"))
	if err != nil {
		return time.Time{}, errcode.Errorf(errcode.InvalidInput, "%s %q is neither a time (RFC 3339: 2026-12-01T09:00:00+01:00) nor a duration from now (10m, 2h, 1d)", what, s)
	}
	return now.Add(d), nil
}

// durationUnits are the units beyond Go's that a schedule reads.
var durationUnits = map[byte]time.Duration{'d': 24 * time.Hour, 'w': 7 * 24 * time.Hour}

// parseDuration reads a Go duration, with days (d) and weeks (w) too:
// "90s", "1h30m", "2d", "1w2d".
func parseDuration(what, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var total time.Duration
	rest := s
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9') {
			i++
		}
		if i > 0 && i < len(rest) && durationUnits[rest[i]] != 0 && (i+1 == len(rest) || rest[i+1] < 'a' || rest[i+1] > 'z') {
			n, err := strconv.Atoi(rest[:i])
			if err != nil {
				return 0, errcode.Errorf(errcode.InvalidInput, "%s %q: %v", what, s, err)
			}
			total += time.Duration(n) * durationUnits[rest[i]]
			rest = rest[i+1:]
			continue
		}
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, errcode.Errorf(errcode.InvalidInput, "%s %q is not a duration (90s, 10m, 1h30m, 2d, 1w)", what, s)
		}
		total += d
		break
	}
	if s == "" || total <= 0 {
		return 0, errcode.Errorf(errcode.InvalidInput, "%s %q is not a positive duration (90s, 10m, 1h30m, 2d, 1w)", what, s)
	}
	return total, nil
}

// formatDuration writes d as parseDuration reads it, in weeks and days
// where they divide it: "2s", "1h30m", "2d", "1w".
func formatDuration(d time.Duration) string {
	day := 24 * time.Hour
	switch {
	case d >= 7*day && d%(7*day) == 0:
		return fmt.Sprintf("%dw", d/(7*day))
	case d >= day && d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// calendarFields are the keys of a calendar spec and their ranges; "dow"
// and "dom" are short for day_of_week and day_of_month.
var calendarFields = map[string]struct {
	min, max int
	names    []string
}{
	"second":       {0, 59, nil},
	"minute":       {0, 59, nil},
	"hour":         {0, 23, nil},
	"day_of_month": {1, 31, nil},
	"month":        {1, 12, []string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"}},
	"year":         {minCalendarYear, maxCalendarYear, nil},
	"day_of_week":  {0, 6, []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}},
}

// parseCalendar reads "hour=9 minute=30 day_of_week=mon-fri": each key a
// field of Temporal's calendar spec, each value a comma-separated list of
// values, ranges (1-5) and steps (*/15, 0-30/10), names for months and
// weekdays. Fields not given are Temporal's defaults: second, minute and
// hour 0, every day, month and year.
func parseCalendar(s string) (sdkclient.ScheduleCalendarSpec, error) {
	var cal sdkclient.ScheduleCalendarSpec
	bad := func(format string, args ...any) (sdkclient.ScheduleCalendarSpec, error) {
		return cal, errcode.Errorf(errcode.InvalidInput, "calendar %q: "+format+" (e.g. \"hour=9 minute=30 day_of_week=mon-fri\")", append([]any{s}, args...)...)
	}
	seen := map[string]bool{}
	for _, kv := range strings.Fields(s) {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.ToLower(k)
		switch k {
		case "dow", "weekday":
			k = "day_of_week"
		case "dom", "day":
			k = "day_of_month"
		}
		f, known := calendarFields[k]
		if !ok || !known || v == "" {
			return bad("%q is not key=value with a key of second, minute, hour, day_of_month, month, year, day_of_week", kv)
		}
		if seen[k] {
			return bad("%s is given twice", k)
		}
		seen[k] = true
		var ranges []sdkclient.ScheduleRange
		for _, item := range strings.Split(strings.ToLower(v), ",") {
			r, err := parseRange(item, f.min, f.max, f.names, 3)
			if err != nil {
				return bad("%s=%s: %v", k, v, err)
			}
			ranges = append(ranges, r)
		}
		setCalendarField(&cal, k, ranges)
	}
	if len(seen) == 0 {
		return bad("no field given")
	}
	return cal, nil
}

// parseRange reads "*", "N", "N-M", each with an optional "/STEP"; a
// value may be one of names (its index counts from lo), or a prefix of
// one at least prefix letters long (Temporal reads "sept" and "mo").
func parseRange(item string, lo, hi int, names []string, prefix int) (sdkclient.ScheduleRange, error) {
	r := sdkclient.ScheduleRange{}
	body, step, hasStep := strings.Cut(item, "/")
	if hasStep {
		n, err := strconv.Atoi(step)
		if err != nil || n < 1 {
			return r, fmt.Errorf("step %q is not a positive number", step)
		}
		r.Step = n
	}
	value := func(s string) (int, error) {
		for i, name := range names {
			if s == name || len(s) >= prefix && strings.HasPrefix(name, s) {
				return i + lo, nil
			}
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%q is not %d to %d", s, lo, hi)
		}
		return n, nil
	}
	if body == "*" {
		r.Start, r.End = lo, hi
		return r, nil
	}
	a, b, isRange := strings.Cut(body, "-")
	start, err := value(a)
	if err != nil {
		return r, err
	}
	r.Start, r.End = start, start
	if isRange {
		if r.End, err = value(b); err != nil {
			return r, err
		}
		if r.End < r.Start {
			return r, fmt.Errorf("range %q ends before it starts", body)
		}
	} else if hasStep {
		r.End = hi
	}
	return r, nil
}

// overlapPolicies are the overlap policies by their names (docs/schedules.md).
var overlapPolicies = []struct {
	name   string
	policy enumspb.ScheduleOverlapPolicy
}{
	{"skip", enumspb.SCHEDULE_OVERLAP_POLICY_SKIP},
	{"buffer_one", enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE},
	{"cancel_other", enumspb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER},
	{"allow_all", enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL},
}

// parseOverlap reads an overlap policy's name ("buffer-one" and
// "buffer_one" alike; "" is skip, Temporal's default).
func parseOverlap(s string) (enumspb.ScheduleOverlapPolicy, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
	if n == "" {
		n = "skip"
	}
	for _, p := range overlapPolicies {
		if p.name == n {
			return p.policy, nil
		}
	}
	return 0, errcode.Errorf(errcode.InvalidInput, "overlap %q: one of skip (the default: no new run while one runs), buffer_one (run it after the running one), cancel_other (cancel the running one), allow_all", s)
}

// overlapName is p's name ("skip" for unspecified, Temporal's default).
func overlapName(p enumspb.ScheduleOverlapPolicy) string {
	for _, o := range overlapPolicies {
		if o.policy == p {
			return o.name
		}
	}
	return "skip"
}

// minCatchup is the least catch-up window Temporal keeps (its scheduler's
// MinCatchupWindow): "none" asks for it, a fire missed by more is dropped.
const minCatchup = 10 * time.Second

// parseCatchup reads a catch-up window: a duration, or "none" (a fire
// missed while the service was down is dropped). 0 is Temporal's default.
func parseCatchup(s string) (time.Duration, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch s {
	case "":
		return 0, nil
	case "none", "0", "off":
		return minCatchup, nil
	}
	d, err := parseDuration("catchup", s)
	if err != nil {
		return 0, errcode.Errorf(errcode.InvalidInput, "catchup %q: a duration (10m, 1h, 1d) or none", s)
	}
	return max(d, minCatchup), nil
}

// catchupName is how describe shows a catch-up window.
func catchupName(d time.Duration) string {
	if d <= minCatchup {
		return "none"
	}
	return formatDuration(d)
}

// minAtLead is how far ahead a one-time `at` must be: the schedule fires
// only at that second, and the client reads the clock before it dials the
// server and the server makes the schedule; on a loaded machine that takes
// seconds, and a schedule made after its one second never fires.
const minAtLead = 5 * time.Second
