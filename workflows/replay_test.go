package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
)

// TestReplayRecordedHistories replays histories recorded from the
// end-to-end runs (SUBAGENTS_RECORD_HISTORIES=1 go test ./e2e/) against the
// current workflow code: a change that would break running workflows fails
// here.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 15 {
		t.Fatalf("found %d recorded histories, want the 15 the e2e tests have recorded", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
			r.RegisterWorkflowWithOptions(Delegation, workflow.RegisterOptions{Name: api.DelegationWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
