package api

import (
	"strings"
	"testing"
)

func TestFireKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nightly-2026-11-26T10:25:31Z", "nightly-2026-11-26T102531Z"},
		{"a_b-2026-11-26T10:25:31.5+01:00", "a_b-2026-11-26T102531-5-0100"},
		{"plain", "plain"},
		{"über", "-ber"},
	}
	for _, tt := range tests {
		if got := FireKey(tt.in); got != tt.want || !ValidName(got) {
			t.Errorf("FireKey(%q) = %q, want %q (a valid name)", tt.in, got, tt.want)
		}
	}
}

func TestDelivered(t *testing.T) {
	tests := []struct {
		quiet bool
		state State
		want  bool
	}{
		{false, StateCompleted, true},
		{true, StateCompleted, false},
		{true, StateFailed, true},
		{true, StateCancelled, true},
		{true, StateTimedOut, true},
		{true, StateTerminated, true},
	}
	for _, tt := range tests {
		if got := Delivered(tt.quiet, tt.state); got != tt.want {
			t.Errorf("Delivered(quiet %v, %s) = %v, want %v", tt.quiet, tt.state, got, tt.want)
		}
	}
}

func TestValidateScheduled(t *testing.T) {
	d := &DelegationInput{Tasks: []TaskSpec{{Prompt: "x"}}}
	tests := []struct {
		name string
		in   ScheduledInput
		ok   bool
	}{
		{"tasks", ScheduledInput{ScheduleID: "n", Cwd: "/r", Delegation: d}, true},
		{"a saved plan", ScheduledInput{ScheduleID: "n", Cwd: "/r", PlanName: "review"}, true},
		{"nothing to run", ScheduledInput{ScheduleID: "n", Cwd: "/r"}, false},
		{"two things", ScheduledInput{ScheduleID: "n", Cwd: "/r", Delegation: d, PlanName: "review"}, false},
		{"a relative folder", ScheduledInput{ScheduleID: "n", Cwd: "r", Delegation: d}, false},
		{"an ID with a colon", ScheduledInput{ScheduleID: "a:b", Cwd: "/r", Delegation: d}, false},
		{"an ID too long", ScheduledInput{ScheduleID: strings.Repeat("a", 65), Cwd: "/r", Delegation: d}, false},
	}
	for _, tt := range tests {
		if err := ValidateScheduled(tt.in); (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestSummarize(t *testing.T) {
	long := strings.Repeat("é", SummaryChars+5)
	tests := []struct{ in, want string }{
		{"  First line.\nSecond.", "First line."},
		{long, strings.Repeat("é", SummaryChars) + "…"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Summarize(tt.in); got != tt.want {
			t.Errorf("Summarize(%.20q) = %.20q, want %.20q", tt.in, got, tt.want)
		}
	}
}
