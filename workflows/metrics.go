package workflows

import "go.temporal.io/sdk/workflow"

// Series the workflows emit through the SDK's metrics handler, which stays
// quiet during replay, so a turn is counted once however often it replays.
const (
	// TasksStartedMetric counts turns started, by agent.
	TasksStartedMetric = "subagents_tasks_started_total"
	// TasksFinishedMetric counts turns ended, by agent and status.
	TasksFinishedMetric = "subagents_tasks_finished_total"
	// FinalizeRetriesMetric counts corrective-feedback runs, by agent.
	FinalizeRetriesMetric = "subagents_finalize_retries_total"
)

func countTurn(ctx workflow.Context, name string, tags map[string]string) {
	workflow.GetMetricsHandler(ctx).WithTags(tags).Counter(name).Inc(1)
}
