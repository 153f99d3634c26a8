package client

import (
	"context"
	"io"

	"github.com/durable-pi/subagents/internal/errcode"
)

// Verbs lists the client verbs the command serves so far.
var Verbs = []string{"profiles"}

// Main runs one client verb of the subagents command.
func Main(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errcode.New(errcode.InvalidInput, "no command given")
	}
	switch args[0] {
	case "profiles":
		return profilesMain(args[1:], stdout, stderr)
	}
	return errcode.Errorf(errcode.InvalidInput, "unknown command %q", args[0])
}
