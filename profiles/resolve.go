package profiles

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// ParseModelOverride reads the task contract's `<provider>/<model>[:<thinking>]`,
// lowercasing the provider and checking the thinking level.
func ParseModelOverride(s string) (provider, model, thinking string, err error) {
	ref := strings.TrimSpace(s)
	if i := strings.LastIndex(ref, ":"); i > 0 && !strings.Contains(ref[i:], "/") {
		thinking = ref[i+1:]
		ref = ref[:i]
		if !slices.Contains(ThinkingLevels, thinking) {
			return "", "", "", fmt.Errorf("thinking %q must be one of %s", thinking, strings.Join(ThinkingLevels, "|"))
		}
	}
	provider, model, ok := strings.Cut(ref, "/")
	if !ok || provider == "" || model == "" {
		return "", "", "", fmt.Errorf("model %q: want <provider>/<model>[:<thinking>]", s)
	}
	return strings.ToLower(provider), model, thinking, nil
}

// ModelRef writes a model as `provider/id[:thinking]`.
func ModelRef(provider, model, thinking string) string {
	ref := provider + "/" + model
	if thinking != "" {
		ref += ":" + thinking
	}
	return ref
}

// fallbacks are a profile's fallback models for a child that runs model
// first: each provider/id once, never the model itself (a model that
// failed with a rate limit fails again at once).
func fallbacks(list []string, model string) []string {
	seen := map[string]bool{model: true}
	var out []string
	for _, ref := range list {
		// Parse checked them: a reference it did not write is kept whole.
		id := ref
		if provider, name, thinking, err := ParseModelOverride(ref); err == nil {
			id, ref = provider+"/"+name, ModelRef(provider, name, thinking)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, ref)
		}
	}
	return out
}

// Allowed applies the permission policy: PERMISSION_DENIED when the profile
// may not run.
func (c Config) Allowed(name string) error {
	decision := c.DefaultPermission
	if d, ok := c.Permissions[name]; ok {
		decision = d
	}
	if decision == "deny" {
		return errcode.Errorf(errcode.PermissionDenied, "Permission denied: subagent %q is not allowed by the subagents permission policy", name)
	}
	return nil
}

// TaskOverrides are what one task may set over its profile.
type TaskOverrides struct {
	// Model is provider/id[:thinking].
	Model          string
	TimeoutSeconds int
}

// Resolved is a profile turned into how its child runs.
type Resolved struct {
	Child              api.RunPiInput
	MaxFinalizeRetries *int
	// ReadFiles are the skill files whose text is in the child's prompt
	// (loadSkills), for the trust check.
	ReadFiles []string
}

// Resolve turns a profile, the config's model override and the task's
// overrides into the child's pi settings. Precedence of the model: task,
// then config, then profile, then pi's default.
func (p *Profile) Resolve(opts Options, cfg Config, task TaskOverrides) (Resolved, error) {
	if err := cfg.Allowed(p.Name); err != nil {
		return Resolved{}, err
	}
	skills, loaded, read, err := resolveSkills(opts, p)
	if err != nil {
		return Resolved{}, err
	}
	child := api.RunPiInput{
		Profile:             p.Name,
		Thinking:            p.Thinking,
		SystemPrompt:        p.SystemPrompt,
		ReplaceSystemPrompt: p.ReplaceSystemPrompt,
		NoSkills:            p.NoSkills,
		Extensions:          p.Extensions,
		NoContextFiles:      p.NoContextFiles,
		ExtraArgs:           p.ExtraArgs,
		NoFinalize:          !p.Finalize,
		TimeoutSeconds:      p.TimeoutSeconds,
	}
	if p.AppendSystemPrompt != "" {
		child.AppendSystemPrompt = []string{p.AppendSystemPrompt}
	}
	child.AppendSystemPrompt = append(child.AppendSystemPrompt, loaded...)
	child.Skills = skills
	if p.Model != "" {
		child.Model = p.Model
		if p.Provider != "" {
			child.Model = p.Provider + "/" + p.Model
		}
	}
	for _, override := range []string{cfg.Models[p.Name], task.Model} {
		if override == "" {
			continue
		}
		provider, model, thinking, err := ParseModelOverride(override)
		if err != nil {
			return Resolved{}, errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
		child.Model = provider + "/" + model
		if thinking != "" {
			child.Thinking = thinking
		}
	}
	child.FallbackModels = fallbacks(p.FallbackModels, child.Model)
	if tools := p.GrantedTools(); len(tools) == 0 {
		child.NoTools = true
	} else {
		child.Tools = tools
	}
	if task.TimeoutSeconds > 0 {
		child.TimeoutSeconds = task.TimeoutSeconds
	}
	if p.Worktree || (cfg.Worktree && len(WriteTools(child.Tools, child.NoTools)) > 0 && inGitCheckout(opts.Cwd)) {
		child.Worktree = &api.WorktreeSpec{}
	}
	return Resolved{Child: child, MaxFinalizeRetries: p.MaxFinalizeRetries, ReadFiles: read}, nil
}

// inGitCheckout says whether dir is inside a git checkout: where the
// worktree setting isolates writers. A folder outside one has nothing a
// worktree could be made of, and its writers run there as before.
func inGitCheckout(dir string) bool {
	for d := filepath.Clean(dir); d != ""; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return false
		}
		d = parent
	}
	return false
}

// skillDirs are where skills live: pi's global skills folder, then the
// project's.
func skillDirs(opts Options) []string {
	var dirs []string
	if opts.AgentDir != "" {
		dirs = append(dirs, filepath.Join(opts.AgentDir, "skills"))
	}
	if root := projectRoot(opts.Cwd); root != "" {
		dirs = append(dirs, filepath.Join(root, ".pi", "skills"))
	}
	return dirs
}

// discoverSkills maps skill names to their files: <dir>/<name>/SKILL.md or
// <dir>/<name>.md; a project skill overrides a global one.
func discoverSkills(opts Options) map[string]string {
	found := map[string]string{}
	for _, dir := range skillDirs(opts) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			switch {
			case e.IsDir():
				if f := filepath.Join(dir, e.Name(), "SKILL.md"); fileExists(f) {
					found[e.Name()] = f
				}
			case strings.HasSuffix(e.Name(), ".md"):
				found[strings.TrimSuffix(e.Name(), ".md")] = filepath.Join(dir, e.Name())
			}
		}
	}
	return found
}

func fileExists(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir()
}

// resolveSkills turns suggestedSkills into --skill paths and loadSkills into
// system prompt text (read from the files read); an unknown name fails the
// task with the delegate contract's message.
func resolveSkills(opts Options, p *Profile) (paths, loaded, read []string, err error) {
	if len(p.SuggestedSkills) == 0 && len(p.LoadSkills) == 0 {
		return nil, nil, nil, nil
	}
	found := discoverSkills(opts)
	var unknown []string
	for _, name := range append(slices.Clone(p.SuggestedSkills), p.LoadSkills...) {
		if _, ok := found[name]; !ok {
			unknown = append(unknown, fmt.Sprintf("%q", name))
		}
	}
	if len(unknown) > 0 {
		avail := make([]string, 0, len(found))
		for name := range found {
			avail = append(avail, name)
		}
		slices.Sort(avail)
		list := strings.Join(avail, ", ")
		if list == "" {
			list = "(none)"
		}
		return nil, nil, nil, errcode.New(errcode.InvalidInput, fmt.Sprintf("Unknown skills: %s. Available skills: %s", strings.Join(unknown, ", "), list))
	}
	for _, name := range p.SuggestedSkills {
		paths = append(paths, found[name])
	}
	for _, name := range p.LoadSkills {
		data, err := os.ReadFile(found[name])
		if err != nil {
			return nil, nil, nil, errcode.Errorf(errcode.InvalidInput, "skill %s: %v", name, err)
		}
		loaded = append(loaded, strings.TrimSpace(string(data)))
		read = append(read, found[name])
	}
	return paths, loaded, read, nil
}

// Isolate applies a task's worktree and baseRef to its resolved child: the
// task's worktree: true isolates a child its profile does not, and its
// baseRef picks the base of either's worktree. A task cannot turn off a
// profile's worktree (false is a task's default, not a choice), and a
// baseRef without a worktree has nothing to pick.
func Isolate(child *api.RunPiInput, worktree bool, baseRef string) {
	if worktree && child.Worktree == nil {
		child.Worktree = &api.WorktreeSpec{}
	}
	if child.Worktree != nil && baseRef != "" {
		// A copy: the resolved child may be shared by several tasks.
		child.Worktree = &api.WorktreeSpec{BaseRef: baseRef}
	}
}
