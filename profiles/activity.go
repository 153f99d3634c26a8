package profiles

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// ResolveRequest asks for the profiles of a delegation's tasks.
type ResolveRequest struct {
	Tasks []ResolveTask `json:"tasks"`
	// Depth is the depth of the tasks' children: with the tasks marked
	// Early, what the worker needs to start their children early.
	Depth int `json:"depth,omitempty"`
	// Knobs are the calling pi's settings of the tasks, over the files'.
	Knobs *api.CallerKnobs `json:"knobs,omitempty"`
}

// ResolveTask is one task's profile and overrides.
type ResolveTask struct {
	// Profile is the task's profile, or "" for none (pi's defaults with the
	// finalize contract).
	Profile        string `json:"profile,omitempty"`
	Cwd            string `json:"cwd"`
	Model          string `json:"model,omitempty"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty"`
	// Tool is the tool family the delegation came through: "subagent"
	// runs read-only profiles unless the settings allow writes.
	Tool string `json:"tool,omitempty"`
	// Depth is the depth of the task's child (ResolveRequest.Depth): a
	// child below the depth limit keeps the delegation tools its profile
	// lists (nesting.go).
	Depth int `json:"depth,omitempty"`
	// Early marks a task that runs as soon as its session starts (within
	// the delegation's concurrency, not a resume): a worker that starts
	// early starts its child now (activities.Config.EarlyStart).
	Early bool `json:"early,omitempty"`
}

// ResolvedTask is a task's child settings, or why it cannot run.
type ResolvedTask struct {
	Child              api.RunPiInput `json:"child"`
	MaxFinalizeRetries *int           `json:"maxFinalizeRetries,omitempty"`
	// QuestionTimeoutSeconds is the profile's (0: none given).
	QuestionTimeoutSeconds int           `json:"questionTimeoutSeconds,omitempty"`
	Error                  *errcode.Info `json:"error,omitempty"`
}

// TextResultTool is the tool family whose children answer in plain text:
// delegate_to_subagents (the delegate contract), whose result is a child's
// last assistant text. A child is offered subagent_finalize there but not
// asked for it, unless its profile says `finalize: true`.
const TextResultTool = "delegate"

// Activities resolve profiles on the worker, where the task's cwd and pi's
// config dir are: a workflow cannot read files.
type Activities struct {
	AgentDir   string
	PromptDirs []string
	// MaxDepth is the deepest child this worker runs (0: the settings'
	// maxDepth, default DefaultMaxDepth); it may only lower the settings'.
	MaxDepth int
	// Getenv reads the worker's SUBAGENTS_* settings variables (nil: none).
	Getenv func(string) string
	// DelegationExtension is the pi extension file that gives a child the
	// delegation tools its profile lists (extension/src/nested.ts); ""
	// (the worker found none): no child delegates.
	DelegationExtension string
	// ServiceEnv is what a child that delegates needs in its environment
	// to reach this worker's service (its address, namespace, task queue,
	// data dir, the subagents command): see Admission.Env.
	ServiceEnv []string
	// NestingKey signs the session of a child that delegates (TokenEnv,
	// connection.SessionToken); "": its child gets no token, and a service
	// that has the key refuses what it delegates.
	NestingKey string
}

// config is the settings for a task in cwd.
func (a *Activities) config(cwd string) (Config, error) {
	return LoadConfig(a.AgentDir, cwd, a.Getenv)
}

// ResolveTasks resolves every task on its own: an unknown or denied profile
// fails that task only (the delegate contract), the others run.
func (a *Activities) ResolveTasks(_ context.Context, req ResolveRequest) ([]ResolvedTask, error) {
	out := make([]ResolvedTask, len(req.Tasks))
	for i, t := range req.Tasks {
		cfg, cfgErr := a.config(t.Cwd)
		t.Depth = cmp.Or(t.Depth, req.Depth)
		r, _, err := a.resolve(cfg, cfgErr, t)
		if err != nil {
			code := errcode.CodeOf(err)
			out[i].Error = errcode.NewInfo(code, err.Error())
			continue
		}
		req.Knobs.Apply(&r.Child)
		out[i] = r
	}
	return out, nil
}

// CheckTask resolves t as ResolveTasks would and says why it would fail,
// or nil: for work refused before anything starts (a schedule's create and
// update), where a fire's failure would come only later and unattended.
func (a *Activities) CheckTask(t ResolveTask) error {
	cfg, cfgErr := a.config(t.Cwd)
	_, _, err := a.resolve(cfg, cfgErr, t)
	return err
}

// resolve resolves one task, and returns the profile it used.
func (a *Activities) resolve(cfg Config, cfgErr error, t ResolveTask) (ResolvedTask, *Profile, error) {
	if cfgErr != nil {
		return ResolvedTask{}, nil, cfgErr
	}
	if err := cfg.Enabled(cmp.Or(t.Profile, "default")); err != nil {
		return ResolvedTask{}, nil, err
	}
	opts := Options{Cwd: t.Cwd, AgentDir: a.AgentDir, PromptDirs: a.PromptDirs, Getenv: a.Getenv}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	task := TaskOverrides{Model: t.Model, TimeoutSeconds: t.TimeoutSeconds}
	p := &Profile{Name: "default", Finalize: true}
	if t.Profile != "" {
		set, err := Load(opts)
		if err != nil {
			return ResolvedTask{}, nil, err
		}
		if p, err = set.Lookup(t.Profile, cfg.AllowInternalRouting); err != nil {
			return ResolvedTask{}, nil, err
		}
	}
	r, err := p.Resolve(opts, cfg, task)
	if err != nil {
		return ResolvedTask{}, nil, err
	}
	if err := newTrustPolicy(cfg, a.AgentDir).checkLoads(t.Cwd, p, r); err != nil {
		return ResolvedTask{}, nil, err
	}
	if t.Profile == "" {
		// No profile: pi's defaults, still under the finalize contract
		// (but see TextResultTool).
		r.Child.Profile = ""
	}
	if t.Tool == TextResultTool && !r.Child.NoFinalize && !p.AsksFinalize {
		r.Child.FinalizeOptional = true
	}
	if t.Tool == "subagent" && !cfg.AllowWrite {
		if w := WriteTools(r.Child.Tools, r.Child.NoTools); len(w) > 0 {
			return ResolvedTask{}, nil, errcode.Errorf(errcode.PermissionDenied,
				"Permission denied: agent %q can write files (%s) and the subagent tool runs read-only agents; set \"allowWrite\": true under \"subagents\" in %s (or SUBAGENTS_ALLOW_WRITE=1) to allow it, or use the task tool",
				p.Name, strings.Join(w, ", "), ConfigFile)
		}
	}
	// The delegate contract's limits from the settings: in the workflow's history from
	// here on, so a running delegation keeps the values it started with.
	r.Child.ExtendDebounceSeconds = cfg.ExtendTimeoutDebounce
	r.Child.LoopingToolCount = cfg.LoopingToolCount
	r.Child.MaxEvents = cfg.TaskMaxEvents
	r.Child.MaxRuntimeSeconds = cfg.MaxRuntime
	if nested := p.NestedTools(t.Depth, DepthLimit(cfg, a.MaxDepth, p)); len(nested) > 0 && a.DelegationExtension != "" {
		// The profile's delegation tools, after its other tools, and this
		// project's extension that registers them in the child's pi.
		r.Child.Tools = append(slices.Clone(r.Child.Tools), nested...)
		r.Child.NoTools = false
		r.Child.Extensions = append(slices.Clone(r.Child.Extensions), a.DelegationExtension)
	}
	return ResolvedTask{Child: r.Child, MaxFinalizeRetries: r.MaxFinalizeRetries, QuestionTimeoutSeconds: p.QuestionTimeoutSeconds}, p, nil
}

// Admission is what Admit gives a run it lets start.
type Admission struct {
	// APIKey is the profile's apiKey, for the child's environment only:
	// read when the run starts, so that a key never travels through a
	// workflow history.
	APIKey string
	// OutputMaxChars caps the run's output in its result (the settings'
	// outputMaxChars, the task contract's OHM_SUBAGENTS_OUTPUT_MAX_CHARS);
	// 0 leaves the worker's cap.
	OutputMaxChars int
	// Env is added to the child's environment: for a child that delegates
	// (Nested), the service's connection and its own session ID as the
	// parent of what it delegates, so that its delegations are listed,
	// cancelled and delivered as its own (docs/pi.md, "Nesting").
	Env []string
	// Context, when not nil, is the context files the run gets in place
	// of pi's own loading: another user owns one of those pi would read
	// (contextfiles.go). Apply it to the run's input before pi starts.
	Context *ContextFiles
}

// Admit is the worker's check of one child run before pi starts
// (activities.Config.Admit). A workflow input may have been written by hand,
// so the run's profile is resolved again here, from the files this worker
// reads, and the run may ask for nothing that profile does not grant: no
// other extension, skill or extra argument, no tool beyond its allowlist, no
// skills or context files it turns off, and no depth beyond MaxDepth. The
// permission policy is applied again too. It returns the profile's apiKey
// and the output cap of the task's settings.
func (a *Activities) Admit(in api.RunPiInput) (Admission, error) {
	cfg, cfgErr := a.config(in.Cwd)
	r, p, err := a.resolve(cfg, cfgErr, ResolveTask{Profile: in.Profile, Cwd: in.Cwd, Depth: in.Depth})
	if err != nil {
		return Admission{}, err
	}
	if maxDepth := DepthLimit(cfg, a.MaxDepth, p); in.Depth > maxDepth {
		return Admission{}, errcode.Errorf(errcode.DepthExceeded,
			"Subagent depth %d is beyond the limit of %d: a subagent cannot delegate further", in.Depth, maxDepth)
	}
	if err := grants(r.Child, in); err != nil {
		return Admission{}, err
	}
	adm := Admission{APIKey: p.APIKey, OutputMaxChars: cfg.OutputMaxChars}
	if !in.NoContextFiles {
		adm.Context = ForeignContext(cfg, a.AgentDir, in.Cwd)
	}
	if in.OutputMaxChars > 0 {
		// The calling pi's cap (CallerKnobs), bounded as the settings' is:
		// a workflow input may have been written by hand.
		adm.OutputMaxChars = min(in.OutputMaxChars, MaxOutputChars)
	}
	if Nested(in.Tools) {
		adm.Env = append(slices.Clone(a.ServiceEnv), NestedEnv+"=1", ParentSessionEnv+"="+in.SessionID)
		if a.NestingKey != "" {
			adm.Env = append(adm.Env, TokenEnv+"="+connection.SessionToken(a.NestingKey, in.SessionID))
		}
	}
	return adm, nil
}

// WriteTools are the tools of a child that write files: those of tools,
// or pi's defaults when a run names none.
func WriteTools(tools []string, none bool) []string {
	if none {
		return nil
	}
	if len(tools) == 0 {
		tools = api.DefaultTools
	}
	var w []string
	for _, t := range tools {
		if t == "edit" || t == "write" {
			w = append(w, t)
		}
	}
	return w
}

// grants checks that run asks for nothing beyond what the resolved profile
// gives its children.
func grants(profile, run api.RunPiInput) error {
	name := cmp.Or(profile.Profile, "default")
	deny := func(what string) error {
		return errcode.Errorf(errcode.PermissionDenied,
			"Permission denied: the run asks for %s, which profile %q does not grant; if the profile changed since the task started, start the task again", what, name)
	}
	for _, e := range run.Extensions {
		if !slices.Contains(profile.Extensions, e) {
			return deny(fmt.Sprintf("extension %q", e))
		}
	}
	for _, s := range run.Skills {
		if !slices.Contains(profile.Skills, s) {
			return deny(fmt.Sprintf("skill %q", s))
		}
	}
	if !slices.Equal(run.ExtraArgs, profile.ExtraArgs) {
		return deny(fmt.Sprintf("extra arguments %q", run.ExtraArgs))
	}
	allowed := grantedTools(profile)
	for _, t := range grantedTools(run) {
		if !slices.Contains(allowed, t) {
			return deny(fmt.Sprintf("tool %q", t))
		}
	}
	if profile.NoSkills && !run.NoSkills {
		return deny("skill discovery")
	}
	if profile.Worktree != nil && run.Worktree == nil {
		// The profile's writer works only in a worktree of its own: a hand-
		// made input may not drop it.
		return deny("running outside the git worktree the profile requires (worktree: true)")
	}
	if profile.NoContextFiles && !run.NoContextFiles {
		return deny("context files")
	}
	return nil
}

// grantedTools is the tool allowlist pi gets for in (the finalize tool
// aside, which every run may have).
func grantedTools(in api.RunPiInput) []string {
	switch {
	case in.NoTools:
		return nil
	case len(in.Tools) == 0:
		return api.DefaultTools
	default:
		return in.Tools
	}
}
