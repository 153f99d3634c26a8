package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// profilesMain is `subagents profiles [--json] [--cwd DIR] [--internal]`.
func profilesMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("subagents profiles", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the contract_version envelope as JSON")
	cwd := fs.String("cwd", "", "folder whose project profiles (.pi/agents, .pi/agent-profiles) count (default: the current folder)")
	internal := fs.Bool("internal", false, "list internal profiles too")
	if err := fs.Parse(args); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	dir := *cwd
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
	}
	dir, _ = filepath.Abs(dir)
	env, err := client.ListProfiles(dir, profiles.DefaultAgentDir(), *internal)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(env)
	}
	for _, p := range env.Profiles {
		_, _ = fmt.Fprintln(stdout, p.Summary)
	}
	return nil
}
