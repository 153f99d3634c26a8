package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/version"
)

// versionMain prints the release of this build: a line, or with --json
// the object the pi extension compares with its own package's version.
func versionMain(args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		_, err := fmt.Fprintln(stdout, version.String())
		return err
	case len(args) == 1 && args[0] == "--json":
		return json.NewEncoder(stdout).Encode(map[string]string{
			"version": version.Version, "os": runtime.GOOS, "arch": runtime.GOARCH, "go": runtime.Version(),
		})
	}
	return errcode.Errorf(errcode.InvalidInput, "version takes no arguments but --json, not %q", args)
}
