package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/version"
)

// releaseStep is a step that a later release's workflow code runs after
// each turn; nil in this build. It exists for the upgrade test of
// [install]: a build with the tag upgradeprobe (release_probe.go) stands
// for release N+1 and sets it to a changed workflow step, guarded with
// workflow.GetVersion as every change between releases must be. A real
// release changes the code itself and keeps its guard the same way
// (docs/release.md).
var releaseStep func(ctx workflow.Context, turn *api.TurnResult)

// UpgradeProbeChange is the change ID of upgradeProbe's step: a history
// that holds its marker ran the step; one recorded by the release before
// it replays without it.
const UpgradeProbeChange = "upgrade-probe"

// UpgradeProbeMemo is the memo upgradeProbe writes: the release that ran
// it and the turn's state.
const UpgradeProbeMemo = "upgrade_probe"

// upgradeProbe is the upgrade test's changed workflow step: after a turn
// it records which release ran it, a command the release before never
// gave. Unguarded, a turn that ended under N and replays under N+1 would
// meet a command its history lacks (TestReleaseStepNeedsItsGuard);
// guarded, that replay takes DefaultVersion and gives none.
func upgradeProbe(ctx workflow.Context, turn *api.TurnResult) {
	if workflow.GetVersion(ctx, UpgradeProbeChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{UpgradeProbeMemo: version.Version + " " + string(turn.State)}); err != nil {
		workflow.GetLogger(ctx).Warn("upgrade probe: memo", "error", err)
	}
}
