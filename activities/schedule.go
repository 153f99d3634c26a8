package activities

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Scheduling is the PrepareScheduled activity: a fire of a schedule
// (docs/schedules.md) prepares its work where the folder is, as `subagents
// start` would at that moment: the folder's settings as they are now, a
// saved plan as its file reads now and only while its project is trusted.
// Profiles are resolved later by the delegation itself, as for any start.
type Scheduling struct {
	// AgentDir is the global pi config dir (settings, global plans);
	// PromptDirs the built-in plans' folders.
	AgentDir   string
	PromptDirs []string
	// Getenv reads the settings variables (nil: none).
	Getenv func(string) string
	// NewID makes session and plan IDs; nil: UUIDv7, as the command's.
	NewID func() string
}

// taskToolConcurrency is the task contract's default for a batch of the
// task tool when the settings name none (client.DefaultTaskToolConcurrency).
const taskToolConcurrency = 3

// PrepareScheduled makes one fire's delegation or plan. A fire that cannot
// start (a saved plan gone or refused, a setting that does not parse)
// answers with Error, which is the run's result; an error return is a
// trouble worth a retry.
func (s *Scheduling) PrepareScheduled(_ context.Context, in api.PrepareScheduledInput) (api.ScheduledPrepared, error) {
	out, err := s.prepare(in)
	if err != nil {
		var coded *errcode.Error
		if !errors.As(err, &coded) {
			return api.ScheduledPrepared{}, err
		}
		return api.ScheduledPrepared{Error: errcode.InfoOf(err)}, nil
	}
	return out, nil
}

func (s *Scheduling) prepare(in api.PrepareScheduledInput) (api.ScheduledPrepared, error) {
	sched := in.Scheduled
	if err := api.ValidateScheduled(sched); err != nil {
		return api.ScheduledPrepared{}, err
	}
	if err := s.checkFolders(sched); err != nil {
		return api.ScheduledPrepared{}, err
	}
	parent := api.ScheduleParentPrefix + sched.ScheduleID
	if sched.Delegation != nil {
		return s.delegation(*sched.Delegation, sched, parent, in.FireID)
	}
	var p api.PlanInput
	if sched.Plan != nil {
		p = *sched.Plan
	} else {
		found, err := s.savedPlan(sched)
		if err != nil {
			return api.ScheduledPrepared{}, err
		}
		p = found
	}
	p.ParentSessionID, p.ParentSessionFile, p.Deliver, p.Depth = parent, "", false, 0
	p.Host, p.Attempt, p.Prior, p.Version = sched.Host, 1, nil, api.PlanVersion
	if err := api.ValidatePlan(p.Plan); err != nil {
		return api.ScheduledPrepared{}, err
	}
	if err := s.checkDirs(sched, stepFolders(p)); err != nil {
		return api.ScheduledPrepared{}, err
	}
	name := p.Plan.Name
	if name == "" {
		name = "plan"
	}
	steps := api.TaskSteps(p.Plan)
	keys := make([]string, len(steps))
	for i, st := range steps {
		keys[i] = st.Key
	}
	return api.ScheduledPrepared{
		Plan: &p, ChildID: api.PlanIDPrefix + s.id(), Name: name,
		Summary: fmt.Sprintf("%s (schedule %s): %d step(s): %s", name, sched.ScheduleID, len(keys), strings.Join(keys, ", ")),
		Details: p.Plan.Description,
	}, nil
}

// delegation is the fire's delegation: new session IDs (a task that
// resumes a session keeps its ID), the settings' concurrency when the
// request named none.
func (s *Scheduling) delegation(d api.DelegationInput, sched api.ScheduledInput, parent, fireID string) (api.ScheduledPrepared, error) {
	d.Tasks = append([]api.TaskSpec(nil), d.Tasks...)
	d.SessionIDs = make([]string, len(d.Tasks))
	for i, t := range d.Tasks {
		d.SessionIDs[i] = t.Resume
		if t.Resume == "" {
			d.SessionIDs[i] = s.id()
		}
	}
	d.ParentSessionID, d.ParentSessionFile, d.Deliver, d.Depth = parent, "", false, 0
	d.Host, d.Version = sched.Host, api.CurrentVersion
	if d.MaxConcurrency == 0 && len(d.Tasks) > 1 {
		cfg, err := profiles.LoadConfig(s.AgentDir, d.Tasks[0].Cwd, s.getenv)
		if err != nil {
			return api.ScheduledPrepared{}, err
		}
		d.MaxConcurrency = cfg.TaskMaxConcurrency
		if d.MaxConcurrency == 0 && d.Tool == "task" {
			d.MaxConcurrency = taskToolConcurrency
		}
	}
	if err := api.ValidateDelegation(d); err != nil {
		return api.ScheduledPrepared{}, err
	}
	names := make([]string, len(d.Tasks))
	var details strings.Builder
	for i, t := range d.Tasks {
		names[i] = t.Name
		agent := api.AgentName(t.ProfileOr(d.Profile))
		fmt.Fprintf(&details, "- **%s** (%s): %s\n", t.Name, agent, api.Summarize(t.Prompt))
	}
	return api.ScheduledPrepared{
		Delegation: &d, ChildID: api.DelegationIDPrefix + api.FireKey(fireID), Name: strings.Join(names, ", "),
		Summary: fmt.Sprintf("delegation of %d task(s) (schedule %s): %s", len(names), sched.ScheduleID, strings.Join(names, ", ")),
		Details: details.String(),
	}, nil
}

// savedPlan reads the schedule's saved plan as it is now, with its
// arguments bound.
func (s *Scheduling) savedPlan(sched api.ScheduledInput) (api.PlanInput, error) {
	p, src, err := profiles.FindPlan(profiles.Options{Cwd: sched.Cwd, AgentDir: s.AgentDir, PromptDirs: s.PromptDirs}, sched.PlanName)
	if err != nil {
		return api.PlanInput{}, err
	}
	bound, err := api.BindPlanArgs(p, sched.PlanArgs)
	if err != nil {
		return api.PlanInput{}, err
	}
	var args map[string]string
	if len(p.Args) > 0 {
		args = map[string]string{}
		for name, a := range p.Args {
			args[name] = a.Default
			if v, ok := sched.PlanArgs[name]; ok {
				args[name] = v
			}
		}
	}
	return api.PlanInput{Plan: bound, Args: args, Source: &src, Cwd: sched.Cwd, Profile: sched.PlanProfile, MaxConcurrency: sched.PlanConcurrency}, nil
}

// checkFolders refuses a fire, with PERMISSION_DENIED, whose folders
// another local user could have written: a schedule runs unattended, and
// a folder deleted and made again by another account (or below a folder
// they may change) would run the user's children among their files and
// their AGENTS.md. Checked at every fire, as the folder may change
// between fires.
func (s *Scheduling) checkFolders(sched api.ScheduledInput) error {
	dirs := []string{sched.Cwd}
	if d := sched.Delegation; d != nil {
		for _, t := range d.Tasks {
			dirs = append(dirs, t.Cwd)
		}
	}
	if sched.Plan != nil {
		dirs = append(dirs, sched.Plan.Cwd)
	}
	return s.checkDirs(sched, dirs)
}

// checkDirs is checkFolders' check of each of dirs.
func (s *Scheduling) checkDirs(sched api.ScheduledInput, dirs []string) error {
	// Only the user's own settings name a trusted group; a malformed file
	// trusts none here.
	cfg, _ := profiles.LoadConfig(s.AgentDir, "", s.getenv)
	seen := map[string]bool{}
	for _, dir := range dirs {
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		if err := profiles.CheckFolder(cfg, s.AgentDir, fmt.Sprintf("schedule %s runs in %s", sched.ScheduleID, dir), dir); err != nil {
			return err
		}
	}
	return nil
}

// stepFolders are the folders p's task steps run in, resolved as the
// plan workflow resolves them (a relative one from the plan's, a step
// that continues another in that one's): a step may name its own folder
// (absolute, or ../elsewhere), which the plan's check does not cover.
func stepFolders(p api.PlanInput) []string {
	var out []string
	for _, st := range api.TaskSteps(p.Plan) {
		switch {
		case st.Cwd == "" || st.Continue != "":
			// The plan's folder, or the continued step's, checked on its own.
		case filepath.IsAbs(st.Cwd):
			out = append(out, filepath.Clean(st.Cwd))
		default:
			out = append(out, filepath.Join(p.Cwd, st.Cwd))
		}
	}
	return out
}

func (s *Scheduling) id() string {
	if s.NewID != nil {
		return s.NewID()
	}
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}

func (s *Scheduling) getenv(k string) string {
	if s.Getenv == nil {
		return ""
	}
	return s.Getenv(k)
}
