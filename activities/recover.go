package activities

import (
	"fmt"

	"go.temporal.io/sdk/activity"
)

// replayRun folds the messages a run wrote to its session file into a
// Stream, as if they had been read from pi's stdout: a retried attempt
// learns from it what the interrupted ones did and spent. z sanitizes its
// tool rows as a live run's.
func replayRun(msgs []SessionMessage, z *Sanitizer) Stream {
	s := Stream{Sanitizer: z}
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
			s.assistantEnded(&message{Role: m.Role, Content: m.Content, StopReason: m.StopReason, ErrorMessage: m.ErrorMessage, Usage: m.Usage,
				Provider: m.Provider, Model: m.Model})
			for _, b := range contentBlocks(m.Content) {
				if b.Type == "toolCall" {
					s.toolStarted(b.ID, b.Name, b.Arguments)
				}
			}
		case "toolResult":
			s.toolEnded(m.ToolCallID, m.ToolName, m.IsError, &message{Content: m.Content})
		}
	}
	s.Settled = len(msgs) > 0 && msgs[len(msgs)-1].Role == "assistant"
	return s
}

// runEnded reports whether what a run wrote already holds its result: a
// valid subagent_finalize, or (a profile without finalize) a last assistant
// message that ended the run. The worker died after that and before it could
// report it; running pi again would spend another model call on a task that
// is done.
func runEnded(s Stream, noFinalize bool) bool {
	if noFinalize {
		return s.Settled && s.StopReason == "stop"
	}
	return s.Finalize != nil
}

// runKey names one RunPi activity across its attempts.
func runKey(info activity.Info) string {
	return fmt.Sprintf("%s/%s/%s", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID)
}
