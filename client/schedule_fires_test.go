package client

import (
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

// TestParseCron: a cron line is read as Temporal's scheduler reads it;
// what Temporal would refuse is INVALID_INPUT here.
func TestParseCron(t *testing.T) {
	tests := []struct {
		line string
		bad  bool
	}{
		{line: "0 9 * * 1-5"},
		{line: "*/15 * * * *"},
		{line: "0 9 * * 7"},
		{line: "0 9 * * mon-fri"},
		{line: "0 9 * * mo,we"},
		{line: "0 9 1 sept *"},
		{line: "0 0 9 * * * 2099"},
		{line: "0 9 * * * 2030"},
		{line: "@daily"},
		{line: "@every 90m"},
		{line: "@every 1h/30m"},
		{line: "TZ=Europe/Berlin 0 9 * * *"},
		{line: "0 9 * * * # weekday mornings"},
		{line: "0 25 * * *", bad: true},
		{line: "60 * * * *", bad: true},
		{line: "0 9 32 * *", bad: true},
		{line: "0 9 0 * *", bad: true},
		{line: "0 9 * 13 *", bad: true},
		{line: "0 9 * * 8", bad: true},
		{line: "* * * * * 1999", bad: true},
		{line: "0 9 * *", bad: true},
		{line: "0 0 0 9 * * * *", bad: true},
		{line: "1-5-7 * * * *", bad: true},
		{line: "*/0 * * * *", bad: true},
		{line: "5-3 * * * *", bad: true},
		{line: "@sometimes", bad: true},
		{line: "@every soon", bad: true},
		{line: "TZ=Mars/Olympus 0 9 * * *", bad: true},
		{line: "TZ=Europe/Berlin", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			_, err := parseCron(tt.line)
			if tt.bad {
				if !errcode.Is(err, errcode.InvalidInput) {
					t.Fatalf("err = %v, want INVALID_INPUT", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckFires: a schedule's first fire is found as Temporal would fire
// it; one that would never fire (its end first, or no date matching) is
// refused.
func TestCheckFires(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 25, 31, 0, time.UTC) // a Thursday
	tests := []struct {
		name  string
		when  scheduleWhen
		end   string
		first time.Time
		never bool
	}{
		{name: "at, its end before it", when: scheduleWhen{at: "10m"}, end: "5m", never: true},
		{name: "at, its end after it", when: scheduleWhen{at: "10m"}, end: "15m", first: now.Add(10 * time.Minute)},
		{name: "every, its end before the first", when: scheduleWhen{every: "1h"}, end: "30m", never: true},
		{name: "every, one interval from now", when: scheduleWhen{every: "1h"}, end: "2h", first: now.Add(time.Hour)},
		{name: "cron, tomorrow morning", when: scheduleWhen{cron: "0 9 * * *"}, first: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)},
		{name: "cron, in Berlin", when: scheduleWhen{cron: "0 9 * * *", timezone: "Europe/Berlin"}, first: time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)},
		{name: "cron, 7 is Sunday", when: scheduleWhen{cron: "30 8 * * 7"}, first: time.Date(2026, 11, 29, 8, 30, 0, 0, time.UTC)},
		{name: "cron, later today", when: scheduleWhen{cron: "*/15 * * * *"}, first: time.Date(2026, 11, 26, 10, 30, 0, 0, time.UTC)},
		{name: "cron, a leap day", when: scheduleWhen{cron: "0 0 29 2 *"}, first: time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		{name: "cron, every minute", when: scheduleWhen{cron: "* * * * *"}, first: time.Date(2026, 11, 26, 10, 26, 0, 0, time.UTC)},
		{name: "cron, @every", when: scheduleWhen{cron: "@every 1h"}, first: time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)},
		{name: "cron, February 31st", when: scheduleWhen{cron: "0 9 31 2 *"}, never: true},
		{name: "cron, a year gone", when: scheduleWhen{cron: "0 9 * * * 2025"}, never: true},
		{name: "cron, its end first", when: scheduleWhen{cron: "0 9 * * *"}, end: "1h", never: true},
		{name: "calendar, the 30th of February", when: scheduleWhen{calendar: "day_of_month=30 month=feb"}, never: true},
		{name: "calendar, Monday mornings", when: scheduleWhen{calendar: "hour=9 minute=30 dow=mon"}, first: time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)},
		{name: "calendar, today, a second on", when: scheduleWhen{calendar: "hour=10 minute=25 second=32"}, first: now.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, text, _, err := buildSpec(tt.when, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := setEnd(&spec, tt.end, now); err != nil {
				t.Fatal(err)
			}
			err = checkFires(spec, text, now)
			if tt.never {
				if !errcode.Is(err, errcode.InvalidInput) {
					t.Fatalf("err = %v, want INVALID_INPUT: it never fires", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			first, err := firstFire(spec, now)
			if err != nil || !first.Equal(tt.first) {
				t.Fatalf("first fire %v (%v), want %v", first, err, tt.first)
			}
		})
	}
}
