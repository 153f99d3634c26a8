package cli

import (
	"context"
	"io"

	"github.com/durable-pi/subagents/internal/errcode"
)

// doctorMain is `subagents doctor` (docs/doctor.md).
func doctorMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errcode.New(errcode.InvalidInput, "subagents doctor is being built (issue [schedules and fleet])")
}
