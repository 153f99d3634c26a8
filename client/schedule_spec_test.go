package client

import (
	"reflect"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
)

func TestBuildSpec(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 25, 31, 0, time.UTC)
	r := func(a, b int) sdkclient.ScheduleRange { return sdkclient.ScheduleRange{Start: a, End: b} }
	tests := []struct {
		name string
		when scheduleWhen
		text string
		once bool
		spec sdkclient.ScheduleSpec
		bad  bool
	}{
		{name: "at, relative", when: scheduleWhen{at: "10m"}, text: "at 2026-11-26T10:35:31Z", once: true,
			spec: sdkclient.ScheduleSpec{Calendars: []sdkclient.ScheduleCalendarSpec{{Year: []sdkclient.ScheduleRange{r(2026, 2026)}, Month: []sdkclient.ScheduleRange{r(11, 11)},
				DayOfMonth: []sdkclient.ScheduleRange{r(26, 26)}, Hour: []sdkclient.ScheduleRange{r(10, 10)}, Minute: []sdkclient.ScheduleRange{r(35, 35)}, Second: []sdkclient.ScheduleRange{r(31, 31)}}}}},
		{name: "at, relative with a plus and days", when: scheduleWhen{at: "+1d"}, text: "at 2026-11-27T10:25:31Z", once: true},
		{name: "at, absolute with an offset, kept in UTC", when: scheduleWhen{at: "2026-12-01T09:00:00+01:00"}, text: "at 2026-12-01T08:00:00Z", once: true},
		{name: "at, in the past", when: scheduleWhen{at: "2020-01-01T00:00:00Z"}, bad: true},
		{name: "at, too soon to be made in time", when: scheduleWhen{at: "2s"}, bad: true},
		{name: "at, just far enough", when: scheduleWhen{at: "5s"}, text: "at 2026-11-26T10:25:36Z", once: true},
		{name: "at, nonsense", when: scheduleWhen{at: "tomorrow"}, bad: true},
		{name: "every, from now", when: scheduleWhen{every: "2s"}, text: "every 2s",
			spec: sdkclient.ScheduleSpec{Intervals: []sdkclient.ScheduleIntervalSpec{{Every: 2 * time.Second, Offset: time.Second}}}},
		{name: "every day", when: scheduleWhen{every: "1d"}, text: "every 1d",
			spec: sdkclient.ScheduleSpec{Intervals: []sdkclient.ScheduleIntervalSpec{{Every: 24 * time.Hour, Offset: 10*time.Hour + 25*time.Minute + 31*time.Second}}}},
		{name: "every, 90 minutes", when: scheduleWhen{every: "90m"}, text: "every 1h30m"},
		{name: "every, under a second", when: scheduleWhen{every: "500ms"}, bad: true},
		{name: "cron", when: scheduleWhen{cron: "0 9 * * 1-5", timezone: "Europe/Berlin"}, text: "cron 0 9 * * 1-5",
			spec: sdkclient.ScheduleSpec{CronExpressions: []string{"0 9 * * 1-5"}, TimeZoneName: "Europe/Berlin"}},
		{name: "cron shorthand", when: scheduleWhen{cron: "@daily"}, text: "cron @daily"},
		{name: "cron, too few fields", when: scheduleWhen{cron: "0 9 *"}, bad: true},
		{name: "an unknown timezone", when: scheduleWhen{cron: "@daily", timezone: "Mars/Olympus"}, bad: true},
		{name: "calendar", when: scheduleWhen{calendar: "hour=9 minute=30  dow=mon-fri"}, text: "calendar hour=9 minute=30 dow=mon-fri",
			spec: sdkclient.ScheduleSpec{Calendars: []sdkclient.ScheduleCalendarSpec{{Hour: []sdkclient.ScheduleRange{r(9, 9)}, Minute: []sdkclient.ScheduleRange{r(30, 30)}, DayOfWeek: []sdkclient.ScheduleRange{r(1, 5)}}}}},
		{name: "calendar with steps and lists", when: scheduleWhen{calendar: "minute=*/15 month=jan,jul day_of_month=1-7/2"}, text: "calendar minute=*/15 month=jan,jul day_of_month=1-7/2",
			spec: sdkclient.ScheduleSpec{Calendars: []sdkclient.ScheduleCalendarSpec{{Minute: []sdkclient.ScheduleRange{{Start: 0, End: 59, Step: 15}},
				Month: []sdkclient.ScheduleRange{r(1, 1), r(7, 7)}, DayOfMonth: []sdkclient.ScheduleRange{{Start: 1, End: 7, Step: 2}}}}}},
		{name: "calendar, an unknown key", when: scheduleWhen{calendar: "hours=9"}, bad: true},
		{name: "calendar, out of range", when: scheduleWhen{calendar: "hour=24"}, bad: true},
		{name: "calendar, a backward range", when: scheduleWhen{calendar: "dow=fri-mon"}, bad: true},
		{name: "nothing", when: scheduleWhen{}, bad: true},
		{name: "two at once", when: scheduleWhen{every: "1h", cron: "@daily"}, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, text, once, err := buildSpec(tt.when, now)
			if tt.bad {
				if err == nil {
					t.Fatalf("no error; spec %+v", spec)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if text != tt.text || once != tt.once {
				t.Fatalf("text %q once %v, want %q %v", text, once, tt.text, tt.once)
			}
			if tt.spec.Calendars != nil || tt.spec.Intervals != nil || tt.spec.CronExpressions != nil {
				if !reflect.DeepEqual(spec, tt.spec) {
					t.Fatalf("spec = %+v\nwant %+v", spec, tt.spec)
				}
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "90s", want: 90 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "2d", want: 48 * time.Hour},
		{in: "1w2d", want: 9 * 24 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "", bad: true},
		{in: "-5m", bad: true},
		{in: "soon", bad: true},
	}
	for _, tt := range tests {
		got, err := parseDuration("every", tt.in)
		if (err != nil) != tt.bad || (!tt.bad && got != tt.want) {
			t.Errorf("parseDuration(%q) = %v, %v; want %v (bad %v)", tt.in, got, err, tt.want, tt.bad)
		}
		if !tt.bad {
			if back, err := parseDuration("every", formatDuration(got)); err != nil || back != got {
				t.Errorf("formatDuration(%v) = %q reads back as %v, %v", got, formatDuration(got), back, err)
			}
		}
	}
}

func TestPolicies(t *testing.T) {
	overlaps := []struct {
		in   string
		want enumspb.ScheduleOverlapPolicy
		bad  bool
	}{
		{"", enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, false},
		{"skip", enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, false},
		{"buffer-one", enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE, false},
		{"cancel_other", enumspb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER, false},
		{"ALLOW_ALL", enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL, false},
		{"terminate_other", 0, true},
	}
	for _, tt := range overlaps {
		got, err := parseOverlap(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("parseOverlap(%q) = %v, %v", tt.in, got, err)
		}
		if !tt.bad && tt.in != "" && overlapName(got) == "" {
			t.Errorf("overlapName(%v) is empty", got)
		}
	}
	catchups := []struct {
		in   string
		want time.Duration
		name string
		bad  bool
	}{
		{"", 0, "", false},
		{"none", minCatchup, "none", false},
		{"5s", minCatchup, "none", false},
		{"10m", 10 * time.Minute, "10m", false},
		{"1d", 24 * time.Hour, "1d", false},
		{"latest", 0, "", true},
	}
	for _, tt := range catchups {
		got, err := parseCatchup(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("parseCatchup(%q) = %v, %v", tt.in, got, err)
		}
		if tt.name != "" && catchupName(got) != tt.name {
			t.Errorf("catchupName(%v) = %q, want %q", got, catchupName(got), tt.name)
		}
	}
}
