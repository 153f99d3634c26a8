package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
	fs.StringVar(&o.cwd, "cwd", "", "folder whose project profiles and plans (.pi/agents, .pi/agent-profiles, .pi/plans) count (default: the current folder)")
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
	agentDir := profiles.DefaultAgentDir()
	env, err := client.ListProfiles(dir, agentDir, o.internal)
	if err != nil {
		return err
	}
	opts := profiles.Options{Cwd: dir, AgentDir: agentDir}
	plans, err := profiles.ListPlans(opts)
	if err != nil {
		return err
	}
	if !o.watched {
		env.Watched = nil
	} else {
		w, err := profiles.PlansWatched(opts)
		if err != nil {
			return err
		}
		env.Watched = append(env.Watched, w...)
	}
	listing := profilesListing{ProfilesEnvelope: env, Plans: []planSummary{}}
	for _, p := range plans {
		listing.Plans = append(listing.Plans, planSummary{PlanInfo: p, Summary: planLine(p)})
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(listing)
	}
	for _, p := range env.Profiles {
		_, _ = fmt.Fprintln(stdout, p.Summary)
	}
	// The saved plans after the profiles, set apart by a blank line.
	if len(listing.Plans) > 0 {
		_, _ = fmt.Fprintln(stdout)
	}
	for _, p := range listing.Plans {
		_, _ = fmt.Fprintln(stdout, p.Summary)
	}
	return nil
}

// profilesListing is the --json answer of `subagents profiles`: the
// profiles' envelope, and the saved plans (always present, [] for none).
type profilesListing struct {
	client.ProfilesEnvelope
	Plans []planSummary `json:"plans"`
}

// planSummary is one saved plan with the line the text listing prints,
// as a profile has its summary.
type planSummary struct {
	profiles.PlanInfo
	Summary string `json:"summary"`
}

// planLine is a saved plan's one line: name, "plan" and scope, its steps,
// its arguments (required, or with their default), whether it has gates,
// and its description; or why it is not used.
func planLine(p profiles.PlanInfo) string {
	head := fmt.Sprintf("%s (plan, %s)", p.Name, p.Scope)
	switch {
	case p.Error != "":
		return head + " — error: " + p.Error
	case p.ShadowedBy != "":
		return fmt.Sprintf("%s — not used: the global plan %s has its name, and a project plan never replaces a global one", head, p.ShadowedBy)
	}
	parts := []string{head, fmt.Sprintf("steps: %d", p.Steps)}
	if len(p.Args) > 0 {
		names := make([]string, 0, len(p.Args))
		for n := range p.Args {
			names = append(names, n)
		}
		sort.Strings(names)
		for i, n := range names {
			switch a := p.Args[n]; {
			case a.Required:
				names[i] = n + " (required)"
			case a.Default != "":
				names[i] = n + "=" + a.Default
			}
		}
		parts = append(parts, "args: "+strings.Join(names, ", "))
	}
	switch {
	case p.GatesRefused:
		parts = append(parts, "gates: refused until the project is trusted (/trust in pi, or trustedProjects)")
	case p.Gates:
		parts = append(parts, "gates")
	}
	line := strings.Join(parts, " · ")
	if p.Description != "" {
		line += " — " + p.Description
	}
	return line
}
