package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"
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
	if len(files) < 20 {
		t.Fatalf("found %d recorded histories, want the 20 the e2e tests have recorded", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
			r.RegisterWorkflowWithOptions(Delegation, workflow.RegisterOptions{Name: api.DelegationWorkflowName})
			r.RegisterWorkflowWithOptions(Plan, workflow.RegisterOptions{Name: api.PlanWorkflowName})
			file, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = file.Close() }()
			hist, err := client.HistoryFromJSON(file, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A plan names its steps' sessions after its own ID: replay it
			// under the ID it ran with, which its first step's session
			// starts with (api.PlanStepSessionID: "plan-" and a UUID).
			opts := worker.ReplayWorkflowHistoryOptions{}
			for _, ev := range hist.GetEvents() {
				if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil && a.GetWorkflowType().GetName() == api.SessionWorkflowName {
					if id := a.GetWorkflowId(); len(id) > len(api.PlanIDPrefix)+36 && id[:len(api.PlanIDPrefix)] == api.PlanIDPrefix {
						opts.OriginalExecution = workflow.Execution{ID: id[:len(api.PlanIDPrefix)+36]}
					}
					break
				}
			}
			if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, opts); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
