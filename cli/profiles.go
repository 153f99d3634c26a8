package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// profilesOptions are `subagents profiles [--json] [--cwd DIR] [--internal] [--watched]`.
type profilesOptions struct {
	asJSON, internal, watched bool
	cwd                       string
}

func (o *profilesOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.asJSON, "json", false, "print the contract_version envelope as JSON")
	fs.StringVar(&o.cwd, "cwd", "", "folder whose project profiles (.pi/agents, .pi/agent-profiles) count (default: the current folder)")
	fs.BoolVar(&o.internal, "internal", false, "list internal profiles too")
	fs.BoolVar(&o.watched, "watched", false, "with --json: add the folders and files the listing depends on, with their modification times (\"watched\")")
}

// profilesMain is `subagents profiles`: it reads files, not Temporal.
func profilesMain(args []string, stdout, stderr io.Writer) error {
	var o profilesOptions
	err := func() error {
		if _, err := ParseFlags("profiles", args, stderr, o.register); err != nil {
			return err
		}
		return o.run(stdout)
	}()
	// Under --json a failure is an envelope too, as for every other verb.
	if err != nil && !errors.Is(err, flag.ErrHelp) && WantsJSON(args) {
		cmd := &command{verb: "profiles", asJSON: true, io: IO{Out: stdout, Err: stderr}}
		return cmd.fail(err)
	}
	return err
}

func (o *profilesOptions) run(stdout io.Writer) error {
	dir := o.cwd
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
	}
	dir, _ = filepath.Abs(dir)
	env, err := client.ListProfiles(dir, profiles.DefaultAgentDir(), o.internal)
	if err != nil {
		return err
	}
	if !o.watched {
		env.Watched = nil
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(env)
	}
	for _, p := range env.Profiles {
		_, _ = fmt.Fprintln(stdout, p.Summary)
	}
	return nil
}
