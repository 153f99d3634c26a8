package client

import (
	"strings"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/internal/errcode"
)

// A schedule is checked whole before it is made (docs/schedules.md): a
// cron line read as Temporal's scheduler reads it, so that a field out of
// range is INVALID_INPUT here and not Temporal's refusal (or exit 3 while
// the service is down), and its first fire found, so that a schedule that
// would never fire (an end before its first fire, a calendar no date
// matches) is refused instead of made.

// Temporal's scheduler reads calendar years from 2000 to 2100 only
// (service/worker/scheduler: minCalendarYear, maxCalendarYear): a year
// outside them is refused by the server, and no fire is found after 2100.
const (
	minCalendarYear = 2000
	maxCalendarYear = 2100
)

// cronFields are a cron line's fields by count (Temporal's parseCronString):
// five, six with a year, seven with seconds first and a year last.
var cronFields = map[int][]string{
	5: {"minute", "hour", "day_of_month", "month", "day_of_week"},
	6: {"minute", "hour", "day_of_month", "month", "day_of_week", "year"},
	7: {"second", "minute", "hour", "day_of_month", "month", "day_of_week", "year"},
}

// cronShorthands are the @words a cron line may be, as Temporal expands them.
var cronShorthands = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

// cronSpec is what a cron line fires by: a calendar, or an interval
// (@every), and the zone a TZ= prefix names.
type cronSpec struct {
	calendar *sdkclient.ScheduleCalendarSpec
	interval *sdkclient.ScheduleIntervalSpec
	timezone string
}

// parseCron reads a cron line as Temporal's scheduler does: an optional
// TZ= or CRON_TZ= prefix, a # comment, @every INTERVAL[/PHASE], the
// @daily-style shorthands, or 5 to 7 fields whose values are numbers,
// month and weekday names (or their prefixes), ranges, lists and steps;
// day_of_week is 0 to 7 (both Sunday).
func parseCron(line string) (cronSpec, error) {
	var out cronSpec
	c := strings.TrimSpace(line)
	bad := func(format string, args ...any) (cronSpec, error) {
		return out, errcode.Errorf(errcode.InvalidInput, "cron %q: "+format+" (e.g. \"0 9 * * 1-5\": minute hour day-of-month month day-of-week)", append([]any{line}, args...)...)
	}
	if strings.HasPrefix(c, "TZ=") || strings.HasPrefix(c, "CRON_TZ=") {
		tz, rest, ok := strings.Cut(c, " ")
		if !ok {
			return bad("a time zone and no fields")
		}
		_, out.timezone, _ = strings.Cut(tz, "=")
		if _, err := time.LoadLocation(out.timezone); err != nil {
			return bad("time zone %q: %v", out.timezone, err)
		}
		c = strings.TrimSpace(rest)
	}
	c, _, _ = strings.Cut(c, "#")
	c = strings.TrimSpace(c)
	if rest, ok := strings.CutPrefix(c, "@every"); ok {
		every, phase, _ := strings.Cut(strings.TrimSpace(rest), "/")
		d, err := parseDuration("@every", every)
		if err != nil {
			return bad("@every takes an interval: %v", err)
		}
		out.interval = &sdkclient.ScheduleIntervalSpec{Every: d}
		if phase != "" {
			if out.interval.Offset, err = parseDuration("@every phase", phase); err != nil || out.interval.Offset > d {
				return bad("the phase after / is a duration no longer than the interval")
			}
		}
		return out, nil
	}
	if full, ok := cronShorthands[c]; ok {
		c = full
	} else if strings.HasPrefix(c, "@") {
		return bad("%s is not one of @yearly, @monthly, @weekly, @daily, @hourly, @every INTERVAL", c)
	}
	fields := strings.Fields(c)
	names, ok := cronFields[len(fields)]
	if !ok {
		return bad("a cron line has 5 fields (minute hour day-of-month month day-of-week), 6 (and a year) or 7 (seconds first, a year last), or is @daily, @hourly, @weekly, @monthly, @yearly")
	}
	// Temporal's defaults for the fields a line does not have: second 0,
	// every year.
	cal := sdkclient.ScheduleCalendarSpec{Second: one(0)}
	for i, v := range fields {
		f := calendarFields[names[i]]
		hi, prefix := f.max, 3
		if names[i] == "day_of_week" {
			// 7 is Sunday too; weekday names may be two letters (mo, tu).
			hi, prefix = 7, 2
		}
		var ranges []sdkclient.ScheduleRange
		for _, item := range strings.Split(strings.ToLower(v), ",") {
			r, err := parseRange(item, f.min, hi, f.names, prefix)
			if err != nil {
				return bad("%s %q: %v", strings.ReplaceAll(names[i], "_", "-"), v, err)
			}
			ranges = append(ranges, r)
		}
		if names[i] == "year" && v == "*" {
			ranges = nil
		}
		setCalendarField(&cal, names[i], ranges)
	}
	out.calendar = &cal
	return out, nil
}

// rangeMatcher reports whether a value is in ranges (Temporal's reading:
// an End below Start is Start, a Step of 0 is 1); none matches def.
func rangeMatcher(ranges []sdkclient.ScheduleRange, def func(int) bool) func(int) bool {
	if len(ranges) == 0 {
		return def
	}
	return func(v int) bool {
		for _, r := range ranges {
			end, step := max(r.End, r.Start), max(r.Step, 1)
			if v >= r.Start && v <= end && (v-r.Start)%step == 0 {
				return true
			}
		}
		return false
	}
}

func matchAll(int) bool    { return true }
func matchZero(v int) bool { return v == 0 }

// nextCalendarFire is the first time after now that cal matches in loc,
// before maxCalendarYear ends; zero if none does.
func nextCalendarFire(cal sdkclient.ScheduleCalendarSpec, loc *time.Location, now time.Time) time.Time {
	year, month, dom := rangeMatcher(cal.Year, matchAll), rangeMatcher(cal.Month, matchAll), rangeMatcher(cal.DayOfMonth, matchAll)
	dowRanges := rangeMatcher(cal.DayOfWeek, matchAll)
	// A cron line's 7 is Sunday, as 0 is.
	dow := func(d int) bool { return dowRanges(d) || d == 0 && dowRanges(7) }
	hour, minute, second := rangeMatcher(cal.Hour, matchZero), rangeMatcher(cal.Minute, matchZero), rangeMatcher(cal.Second, matchZero)
	now = now.In(loc)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	for day.Year() <= maxCalendarYear {
		switch {
		case !year(day.Year()):
			day = time.Date(day.Year()+1, 1, 1, 0, 0, 0, 0, loc)
			continue
		case !month(int(day.Month())):
			day = time.Date(day.Year(), day.Month()+1, 1, 0, 0, 0, 0, loc)
			continue
		}
		if dom(day.Day()) && dow(int(day.Weekday())) {
			for h := range 24 {
				if !hour(h) {
					continue
				}
				for m := range 60 {
					if !minute(m) {
						continue
					}
					for s := range 60 {
						if !second(s) {
							continue
						}
						if t := time.Date(day.Year(), day.Month(), day.Day(), h, m, s, 0, loc); t.After(now) {
							return t
						}
					}
				}
			}
		}
		day = time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc)
	}
	return time.Time{}
}

// nextIntervalFire is the first time after now that iv fires: Temporal
// counts intervals from the epoch, shifted by the offset.
func nextIntervalFire(iv sdkclient.ScheduleIntervalSpec, now time.Time) time.Time {
	every, offset := iv.Every.Nanoseconds(), iv.Offset.Nanoseconds()
	if every <= 0 {
		return time.Time{}
	}
	n := (now.UnixNano()-offset)/every + 1
	return time.Unix(0, n*every+offset)
}

// firstFire is when spec fires first after now, ignoring its end; zero
// when it never does.
func firstFire(spec sdkclient.ScheduleSpec, now time.Time) (time.Time, error) {
	loc := time.UTC
	if spec.TimeZoneName != "" {
		l, err := time.LoadLocation(spec.TimeZoneName)
		if err != nil {
			return time.Time{}, errcode.Errorf(errcode.InvalidInput, "timezone %q: %v (an IANA name such as Europe/Berlin)", spec.TimeZoneName, err)
		}
		loc = l
	}
	var first time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	for _, iv := range spec.Intervals {
		earliest(nextIntervalFire(iv, now))
	}
	for _, cal := range spec.Calendars {
		earliest(nextCalendarFire(cal, loc, now))
	}
	for _, line := range spec.CronExpressions {
		c, err := parseCron(line)
		if err != nil {
			return time.Time{}, err
		}
		cloc := loc
		if c.timezone != "" {
			cloc, _ = time.LoadLocation(c.timezone)
		}
		if c.interval != nil {
			earliest(nextIntervalFire(*c.interval, now))
		} else {
			earliest(nextCalendarFire(*c.calendar, cloc, now))
		}
	}
	return first, nil
}

// checkFires refuses a spec (text: as the schedule says it) that would
// never fire after now: none of its times comes before its end, or none
// comes at all.
func checkFires(spec sdkclient.ScheduleSpec, text string, now time.Time) error {
	first, err := firstFire(spec, now)
	if err != nil {
		return err
	}
	switch {
	case first.IsZero():
		return errcode.Errorf(errcode.InvalidInput, "%s never fires: no date after now matches it (Temporal's calendar ends with %d)", text, maxCalendarYear)
	case !spec.EndAt.IsZero() && first.After(spec.EndAt):
		return errcode.Errorf(errcode.InvalidInput, "%s first fires at %s, after its end at %s: it would never fire (give an end after its first fire, or no end)",
			text, first.UTC().Format(time.RFC3339), spec.EndAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// setCalendarField sets cal's field named key to ranges.
func setCalendarField(cal *sdkclient.ScheduleCalendarSpec, key string, ranges []sdkclient.ScheduleRange) {
	switch key {
	case "second":
		cal.Second = ranges
	case "minute":
		cal.Minute = ranges
	case "hour":
		cal.Hour = ranges
	case "day_of_month":
		cal.DayOfMonth = ranges
	case "month":
		cal.Month = ranges
	case "year":
		cal.Year = ranges
	case "day_of_week":
		cal.DayOfWeek = ranges
	}
}
