package profiles

import (
	"context"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/internal/errcode"
)

// ResolveRequest asks for the profiles of a delegation's tasks.
type ResolveRequest struct {
	Tasks []ResolveTask `json:"tasks"`
}

// ResolveTask is one task's profile and overrides.
type ResolveTask struct {
	// Profile is the task's profile, or "" for none (pi's defaults with the
	// finalize contract).
	Profile        string `json:"profile,omitempty"`
	Cwd            string `json:"cwd"`
	Model          string `json:"model,omitempty"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty"`
}

// ResolvedTask is a task's child settings, or why it cannot run.
type ResolvedTask struct {
	Child              activities.RunPiInput `json:"child"`
	MaxFinalizeRetries *int                  `json:"maxFinalizeRetries,omitempty"`
	Error              *activities.ErrorInfo `json:"error,omitempty"`
}

// Activities resolve profiles on the worker, where the task's cwd and pi's
// config dir are: a workflow cannot read files.
type Activities struct {
	AgentDir   string
	PromptDirs []string
}

// ResolveTasks resolves every task on its own: an unknown or denied profile
// fails that task only (seed 002), the others run.
func (a *Activities) ResolveTasks(_ context.Context, req ResolveRequest) ([]ResolvedTask, error) {
	cfg, cfgErr := LoadConfig(a.AgentDir)
	out := make([]ResolvedTask, len(req.Tasks))
	for i, t := range req.Tasks {
		r, err := a.resolve(cfg, cfgErr, t)
		if err != nil {
			code := errcode.CodeOf(err)
			out[i].Error = &activities.ErrorInfo{Code: code, Message: err.Error(), Category: code.Category()}
			continue
		}
		out[i] = r
	}
	return out, nil
}

func (a *Activities) resolve(cfg Config, cfgErr error, t ResolveTask) (ResolvedTask, error) {
	if cfgErr != nil {
		return ResolvedTask{}, cfgErr
	}
	opts := Options{Cwd: t.Cwd, AgentDir: a.AgentDir, PromptDirs: a.PromptDirs}
	task := TaskOverrides{Model: t.Model, TimeoutSeconds: t.TimeoutSeconds}
	if t.Profile == "" {
		// No profile: pi's defaults, still under the finalize contract.
		p := &Profile{Name: "default", Finalize: true}
		r, err := p.Resolve(opts, cfg, task)
		r.Child.Profile = ""
		return ResolvedTask{Child: r.Child}, err
	}
	set, err := Load(opts)
	if err != nil {
		return ResolvedTask{}, err
	}
	p, err := set.Lookup(t.Profile, cfg.AllowInternalRouting)
	if err != nil {
		return ResolvedTask{}, err
	}
	r, err := p.Resolve(opts, cfg, task)
	if err != nil {
		return ResolvedTask{}, err
	}
	return ResolvedTask{Child: r.Child, MaxFinalizeRetries: r.MaxFinalizeRetries}, nil
}
