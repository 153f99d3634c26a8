package workflows

import (
	"errors"

	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
)

// namesCheckedChange marks the runs that refuse an input whose agent,
// profile or session ID is not a valid name (issue 29: such a name became a
// path outside the data dir).
const namesCheckedChange = "names-checked"

// refuses reports whether a run refuses its input for err. A name error
// refuses only runs that record namesCheckedChange: a run recorded before
// names were checked replays as it ran. The marker is written only when a
// name is wrong, so a valid input costs no event.
func refuses(ctx workflow.Context, err error) bool {
	if err == nil {
		return false
	}
	if !errors.Is(err, api.ErrInvalidName) {
		return true
	}
	return workflow.GetVersion(ctx, namesCheckedChange, workflow.DefaultVersion, 1) == 1
}
