package cli

import (
	"testing"

	"github.com/durable-pi/subagents/client"
)

// TestCancelPriorStatus (issue 31, item 7): a cancel's prior_status is a
// task status, never waiting_for_input (what sessions of versions before 4
// recorded between turns: the answer's status says how that turn ended),
// and a cancel of several IDs has one at the top too: the status their
// collection had before the cancel, by combine's rule.
func TestCancelPriorStatus(t *testing.T) {
	one := []struct {
		name, prior, status, want string
	}{
		{"running", "running", "cancelled", "running"},
		{"finished", "completed", "completed", "completed"},
		{"between turns, before version 4", "waiting_for_input", "completed", "completed"},
		{"between turns after a failed turn", "waiting_for_input", "failed", "failed"},
		{"no answer", "", "completed", ""},
	}
	for _, tc := range one {
		t.Run(tc.name, func(t *testing.T) {
			if got := taskPrior(client.Envelope{PriorStatus: tc.prior, Status: tc.status}); got != tc.want {
				t.Fatalf("taskPrior(%q, status %q) = %q, want %q", tc.prior, tc.status, got, tc.want)
			}
		})
	}
	several := []struct {
		name   string
		priors []string
		want   string
	}{
		{"one ran", []string{"completed", "running"}, "running"},
		{"one waited to run", []string{"queued", "failed"}, "running"},
		{"all completed", []string{"completed", "completed"}, "completed"},
		{"one failed", []string{"completed", "failed"}, "failed"},
		{"one cancelled before", []string{"cancelled", "completed"}, "failed"},
		{"one without an answer", []string{"", "completed"}, "completed"},
	}
	for _, tc := range several {
		t.Run(tc.name, func(t *testing.T) {
			var envs []client.Envelope
			for _, p := range tc.priors {
				envs = append(envs, client.Envelope{PriorStatus: p})
			}
			if got := collectionPrior(envs); got != tc.want {
				t.Fatalf("collectionPrior(%v) = %q, want %q", tc.priors, got, tc.want)
			}
		})
	}
}
