package client

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/api/serviceerror"
)

func TestRetryNoPoller(t *testing.T) {
	noPoller := serviceerror.NewFailedPrecondition("no poller seen for task queue recently, worker may be down")
	other := serviceerror.NewFailedPrecondition("workflow is closed")
	tests := []struct {
		name   string
		errs   []error // what the calls return, in turn; then success
		calls  int
		wantOK bool
	}{
		{"answers at once", nil, 1, true},
		{"rides out two refusals", []error{noPoller, noPoller}, 3, true},
		{"another precondition is the answer", []error{other}, 1, false},
		{"a plain error is the answer", []error{errors.New("boom")}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			v, err := retryNoPoller(context.Background(), func() (int, error) {
				calls++
				if calls <= len(tt.errs) {
					return 0, tt.errs[calls-1]
				}
				return 42, nil
			})
			if calls != tt.calls || (err == nil) != tt.wantOK || (tt.wantOK && v != 42) {
				t.Fatalf("calls %d, value %d, error %v", calls, v, err)
			}
		})
	}
	// A worker that stays down: the refusal is returned within the budget.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := retryNoPoller(ctx, func() (int, error) { return 0, noPoller }); !isNoPoller(err) {
		t.Fatalf("after the caller gave up: %v", err)
	}
}
