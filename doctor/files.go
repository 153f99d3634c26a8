package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// FileError is a mistake in a file, where it is.
type FileError struct {
	File string `json:"file"`
	// Line is 0 when the mistake has no one line (the file cannot be read).
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// String is file:line: message, as editors and compilers say it.
func (e FileError) String() string {
	at := e.File
	if e.Line > 0 {
		at += ":" + strconv.Itoa(e.Line)
	}
	return at + ": " + e.Message
}

// shown is how many mistakes a verdict names; the details hold them all.
const shown = 3

// listErrors is a verdict's list of mistakes: the first few, then how
// many more.
func listErrors(errs []FileError) string {
	var parts []string
	for i, e := range errs {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-shown))
			break
		}
		parts = append(parts, e.String())
	}
	return strings.Join(parts, "; ")
}

// checkProfiles: every profile this folder's delegations can name reads
// and validates; each one that does not is named with its file and line.
func checkProfiles(list []*profiles.Profile, loadErr error, read func(string) ([]byte, error)) Result {
	const fix = "edit the file at that line (docs/profiles.md lists the fields), or remove it"
	if loadErr != nil {
		return fail(CheckProfiles, "the profiles cannot be listed: "+oneLine(loadErr.Error()), "make the folder readable, or remove it")
	}
	var errs []FileError
	var untrusted []string
	for _, p := range list {
		if p.Err == nil {
			continue
		}
		if p.Untrusted {
			untrusted = append(untrusted, p.Path)
			continue
		}
		e := FileError{File: p.Path, Message: oneLine(strings.TrimPrefix(p.Err.Error(), "profile "+p.Path+": "))}
		if p.Path == "" {
			e.File = "built-in profile " + p.Name
		} else if src, err := read(p.Path); err == nil {
			e.Line = profiles.ErrorLine(src, p.Err)
		}
		if e.Line > 0 {
			// The file's line replaces the parser's own, which counts from
			// the frontmatter's first line.
			e.Message = yamlNoise.ReplaceAllString(e.Message, "")
		}
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return fail(CheckProfiles, fmt.Sprintf("%d of %d profiles cannot be used: %s", len(errs), len(list), listErrors(errs)), fix).
			with("errors", errs).with("untrusted", untrusted)
	}
	if len(untrusted) > 0 {
		return warn(CheckProfiles, fmt.Sprintf("%d project profiles add code or power this project is not trusted with, and are refused: %s", len(untrusted), strings.Join(untrusted, ", ")),
			trustFix).with("untrusted", untrusted)
	}
	return ok(CheckProfiles, fmt.Sprintf("%d profiles read and valid", len(list))).with("count", len(list))
}

// trustFix is how a user trusts the folder's project, as pi does.
const trustFix = "if you trust this project, run /trust in pi opened in its folder (docs/settings.md, Project trust)"

// yamlNoise is what yaml.v3 adds to a frontmatter error besides the
// mistake (its own line count and the Go type it decoded into), and the
// line Parse says of an unknown field: the verdict names the line.
var yamlNoise = regexp.MustCompile(`yaml: (?:unmarshal errors: )?line \d+: | in type profiles\.frontmatter| \(line \d+\)`)

// planLine reads ReadPlanFile's "plan file PATH: line N: MESSAGE".
var planLine = regexp.MustCompile(`^plan file (.+?): (?:line (\d+): )?(.*)$`)

// agentLookup says why a run from cwd would refuse a step's agent, or
// nil: as the plan's run resolves it (profiles.ResolveTasks).
type agentLookup func(agent, cwd string) error

// checkPlans: every saved plan in scope reads and validates, and every
// step's agent is a profile a run from cwd would take; a project plan
// whose gates this project is not trusted to run is a warning.
func checkPlans(plans []profiles.PlanInfo, listErr error, agentDir, cwd string, lookup agentLookup) Result {
	if listErr != nil {
		return fail(CheckPlans, "the saved plans cannot be listed: "+oneLine(listErr.Error()), "make the folder readable, or remove it")
	}
	var errs []FileError
	var refused, shadowed []string
	bad, agents := 0, false
	for _, p := range plans {
		switch {
		case p.Error != "":
			e := FileError{File: p.File, Message: oneLine(p.Error)}
			if m := planLine.FindStringSubmatch(e.Message); m != nil && m[1] == p.File {
				e.Line, _ = strconv.Atoi(m[2])
				e.Message = m[3]
			}
			errs = append(errs, e)
			bad++
		default:
			if stepErrs := planAgentErrors(p.File, cwd, lookup); len(stepErrs) > 0 {
				errs = append(errs, stepErrs...)
				bad++
				agents = true
				continue
			}
			if p.GatesRefused {
				refused = append(refused, p.File)
			}
		}
		if p.ShadowedBy != "" {
			shadowed = append(shadowed, p.File)
		}
	}
	switch {
	case len(errs) > 0:
		fix := "edit the file at that line (docs/plans.md gives a plan's fields), or remove it"
		if agents {
			fix += "; a step's agent must be a profile `subagents profiles` lists for that folder: name one, or add the profile (docs/profiles.md)"
		}
		return fail(CheckPlans, fmt.Sprintf("%d of %d saved plans cannot be used: %s", bad, len(plans), listErrors(errs)), fix).
			with("errors", errs).with("shadowed", shadowed)
	case len(refused) > 0:
		return warn(CheckPlans, fmt.Sprintf("%d saved plans have gate commands this project is not trusted to run: %s", len(refused), strings.Join(refused, ", ")),
			fmt.Sprintf("%s, or add its folder to \"trustedProjects\" under \"subagents\" in %s/%s (docs/settings.md, Project trust)", trustFix, agentDir, profiles.ConfigFile)).
			with("gates_refused", refused).with("shadowed", shadowed)
	}
	return ok(CheckPlans, fmt.Sprintf("%d saved plans read and valid", len(plans))).with("count", len(plans)).with("shadowed", shadowed)
}

// planAgentErrors are the steps of the plan file whose agent a run from
// cwd would refuse (UNKNOWN_AGENT, a disabled or malformed profile), each
// at the line of its agent. A step that continues another runs as that
// one's agent; a step with none runs as the call's profile, which only
// the call knows.
func planAgentErrors(file, cwd string, lookup agentLookup) []FileError {
	plan, err := profiles.ReadPlanFile(file)
	if err != nil {
		// Listed as valid a moment ago: changed since; the next run says.
		return nil
	}
	src, _ := os.ReadFile(file)
	lines := profiles.PlanStepLines(src)
	steps := api.TaskSteps(plan)
	var errs []FileError
	for i, s := range steps {
		if s.Continue != "" || s.Agent == "" {
			continue
		}
		// A step's folder is relative to the plan's (the call's).
		dir := cwd
		switch {
		case filepath.IsAbs(s.Cwd):
			dir = s.Cwd
		case s.Cwd != "":
			dir = filepath.Join(cwd, s.Cwd)
		}
		err := lookup(s.Agent, dir)
		if err == nil {
			continue
		}
		e := FileError{File: file, Message: fmt.Sprintf("step %q: %s (%s: a run refuses the plan)", s.Key, oneLine(err.Error()), errcode.CodeOf(err))}
		if len(lines) == len(steps) {
			e.Line = lines[i]
		}
		errs = append(errs, e)
	}
	return errs
}

// profileLookup resolves agents as a run does: the folder's settings may
// disable one or allow internal ones, and its profiles are those in scope
// there. Each folder's are read once.
func profileLookup(opts profiles.Options, getenv func(string) string) agentLookup {
	type scope struct {
		cfg    profiles.Config
		cfgErr error
		set    *profiles.Set
		setErr error
	}
	seen := map[string]*scope{}
	return func(agent, cwd string) error {
		sc := seen[cwd]
		if sc == nil {
			sc = &scope{}
			sc.cfg, sc.cfgErr = profiles.LoadConfig(opts.AgentDir, cwd, getenv)
			o := opts
			o.Cwd = cwd
			sc.set, sc.setErr = profiles.Load(o)
			seen[cwd] = sc
		}
		if sc.cfgErr != nil || sc.setErr != nil {
			// The settings and profiles checks name these.
			return nil
		}
		if err := sc.cfg.Enabled(agent); err != nil {
			return err
		}
		_, err := sc.set.Lookup(agent, sc.cfg.AllowInternalRouting)
		if err != nil && !errcode.Is(err, errcode.UnknownAgent) {
			return errcode.Wrap(errcode.CodeOf(err), err, fmt.Sprintf("profile %q cannot be used (see profiles): %s", agent, oneLine(err.Error())))
		}
		return err
	}
}
