package workflows

import (
	"path/filepath"
	"strings"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
)

// TestReleaseStepNeedsItsGuard: a later release's changed step (the upgrade
// test's probe) replays the histories this release recorded only behind
// its workflow.GetVersion guard; the same step unguarded breaks them. `make
// test` also replays every recorded history with the probe built in (go
// test -tags upgradeprobe).
func TestReleaseStepNeedsItsGuard(t *testing.T) {
	defer func(kept func(workflow.Context, *api.TurnResult)) { releaseStep = kept }(releaseStep)
	noID := func([]*historypb.HistoryEvent) string { return "" }
	for _, name := range []string{"one-turn.json", "session-v5-reopened.json", "sticky-three-turns.json"} {
		history := filepath.Join("testdata", "histories", name)
		releaseStep = upgradeProbe
		if err := replayFile(history, noID); err != nil {
			t.Errorf("guarded: %v", err)
		}
		releaseStep = func(ctx workflow.Context, turn *api.TurnResult) {
			_ = workflow.UpsertMemo(ctx, map[string]any{UpgradeProbeMemo: string(turn.State)})
		}
		if err := replayFile(history, noID); err == nil || !strings.Contains(err.Error(), "nondeterministic") {
			t.Errorf("unguarded, %s replayed with %v: want a nondeterminism error, else this test proves nothing", name, err)
		}
	}
}
