package api

import (
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

// TestValidateTaskQuestionTimeout (issue 39): a task's
// questionTimeoutSeconds is 0 (its profile's, else the default) or 1 to a
// week; anything else is INVALID_INPUT.
func TestValidateTaskQuestionTimeout(t *testing.T) {
	tests := []struct {
		seconds int
		ok      bool
	}{
		{0, true}, {1, true}, {5400, true}, {MaxQuestionTimeoutSeconds, true},
		{-1, false}, {MaxQuestionTimeoutSeconds + 1, false},
	}
	for _, tt := range tests {
		err := ValidateTask(0, TaskSpec{Name: "t", Prompt: "p", Cwd: "/tmp", QuestionTimeoutSeconds: tt.seconds})
		if tt.ok != (err == nil) {
			t.Errorf("questionTimeoutSeconds %d: %v", tt.seconds, err)
		}
		if err != nil && (!errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "questionTimeoutSeconds must be 1 to 604800")) {
			t.Errorf("questionTimeoutSeconds %d: %v, want INVALID_INPUT naming the range", tt.seconds, err)
		}
	}
}
