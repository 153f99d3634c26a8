package workflows

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
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
	// A plan names its steps' sessions after its own ID: replay it under
	// the ID it ran with, which its first step's session starts with
	// (api.PlanStepSessionID: "plan-" and a UUID).
	replayHistories(t, filepath.Join("testdata", "histories", "*.json"), 20, func(events []*historypb.HistoryEvent) string {
		for _, ev := range events {
			if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil && a.GetWorkflowType().GetName() == api.SessionWorkflowName {
				if id := a.GetWorkflowId(); len(id) > len(api.PlanIDPrefix)+36 && id[:len(api.PlanIDPrefix)] == api.PlanIDPrefix {
					return id[:len(api.PlanIDPrefix)+36]
				}
				return ""
			}
		}
		return ""
	})
}

// replayHistories replays each recorded history that glob matches (at
// least min of them) with every workflow of the worker; originalID is the
// workflow ID a history ran under where its children's IDs derive from it
// ("" for any).
func replayHistories(t *testing.T, glob string, min int, originalID func([]*historypb.HistoryEvent) string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < min {
		t.Fatalf("found %d recorded histories in %s, want the %d the e2e tests have recorded", len(files), glob, min)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := replayFile(f, originalID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// replayFile replays one recorded history with every workflow of the
// worker.
func replayFile(f string, originalID func([]*historypb.HistoryEvent) string) error {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: api.SessionWorkflowName})
	r.RegisterWorkflowWithOptions(Delegation, workflow.RegisterOptions{Name: api.DelegationWorkflowName})
	r.RegisterWorkflowWithOptions(Plan, workflow.RegisterOptions{Name: api.PlanWorkflowName})
	r.RegisterWorkflowWithOptions(Scheduled, workflow.RegisterOptions{Name: api.ScheduledWorkflowName})
	r.RegisterWorkflowWithOptions(ScheduledResult, workflow.RegisterOptions{Name: api.ScheduledResultWorkflowName})
	file, err := os.Open(f)
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }()
	hist, err := client.HistoryFromJSON(file, client.HistoryJSONOptions{})
	if err != nil {
		return err
	}
	opts := worker.ReplayWorkflowHistoryOptions{}
	if id := originalID(hist.GetEvents()); id != "" {
		opts.OriginalExecution = workflow.Execution{ID: id}
	}
	if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, opts); err != nil {
		return fmt.Errorf("replay %s: %w", f, err)
	}
	return nil
}
