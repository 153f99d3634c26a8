package profiles

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

func mustParse(t *testing.T, src string) *Profile {
	t.Helper()
	p, err := Parse([]byte(src), "x.md", ScopeGlobal)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolveModelPrecedence(t *testing.T) {
	p := mustParse(t, "---\nname: finder\nmodel: anthropic/claude-sonnet-4-5\nthinkingLevel: low\n---\n")
	tests := []struct {
		name          string
		cfg           Config
		task          TaskOverrides
		model, thinks string
	}{
		{"profile", Config{}, TaskOverrides{}, "anthropic/claude-sonnet-4-5", "low"},
		{"config over profile", Config{Models: map[string]string{"finder": "OpenAI/gpt-4o"}}, TaskOverrides{}, "openai/gpt-4o", "low"},
		{"config thinking", Config{Models: map[string]string{"finder": "openai/gpt-5:high"}}, TaskOverrides{}, "openai/gpt-5", "high"},
		{"task over config", Config{Models: map[string]string{"finder": "openai/gpt-4o"}}, TaskOverrides{Model: "scripted/scripted-1:off"}, "scripted/scripted-1", "off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := p.Resolve(Options{}, tt.cfg, tt.task)
			if err != nil {
				t.Fatal(err)
			}
			if r.Child.Model != tt.model || r.Child.Thinking != tt.thinks || r.Child.Profile != "finder" {
				t.Fatalf("model %q thinking %q", r.Child.Model, r.Child.Thinking)
			}
		})
	}
	if _, err := p.Resolve(Options{}, Config{}, TaskOverrides{Model: "no-provider"}); !errcode.Is(err, errcode.InvalidInput) {
		t.Fatalf("bad task model: %v", err)
	}
}

func TestResolveFallbackModels(t *testing.T) {
	p := mustParse(t, "---\nname: f\nmodel: anthropic/claude-sonnet-4-5\nfallbackModels: openai/gpt-5:high, anthropic/claude-sonnet-4-5:low, openai/gpt-5, google/gemini-2.5-pro\n---\n")
	tests := []struct {
		name string
		task TaskOverrides
		want []string
	}{
		// The model itself, and a model named twice, are tried once.
		{"after the profile's model", TaskOverrides{}, []string{"openai/gpt-5:high", "google/gemini-2.5-pro"}},
		{"after the task's model", TaskOverrides{Model: "openai/gpt-5"}, []string{"anthropic/claude-sonnet-4-5:low", "google/gemini-2.5-pro"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := p.Resolve(Options{}, Config{}, tt.task)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Child.FallbackModels, tt.want) {
				t.Fatalf("fallbacks %q, want %q", r.Child.FallbackModels, tt.want)
			}
		})
	}
	if r, _ := mustParse(t, "---\nname: n\n---\n").Resolve(Options{}, Config{}, TaskOverrides{}); r.Child.FallbackModels != nil {
		t.Fatalf("fallbacks of a profile without any: %q", r.Child.FallbackModels)
	}
}

func TestResolveChildSettings(t *testing.T) {
	p := mustParse(t, "---\nname: w\ntools: read,bash\nnoSkills: true\nnoContextFiles: true\nappendSystemPrompt: Be brief.\nextensions: /x.ts\nextraArgs: --verbose\ntimeout: 90\nmaxFinalizeRetries: 1\nfinalize: false\n---\nYou write.")
	p.ReplaceSystemPrompt = true
	r, err := p.Resolve(Options{}, Config{}, TaskOverrides{TimeoutSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Child
	if !reflect.DeepEqual(c.Tools, []string{"read", "bash"}) || c.NoTools || !c.NoSkills || !c.NoContextFiles || !c.NoFinalize {
		t.Fatalf("child %+v", c)
	}
	if c.SystemPrompt != "You write." || !c.ReplaceSystemPrompt || !reflect.DeepEqual(c.AppendSystemPrompt, []string{"Be brief."}) {
		t.Fatalf("prompts %+v", c)
	}
	if c.TimeoutSeconds != 30 || *r.MaxFinalizeRetries != 1 || !reflect.DeepEqual(c.Extensions, []string{"/x.ts"}) || !reflect.DeepEqual(c.ExtraArgs, []string{"--verbose"}) {
		t.Fatalf("limits %+v", c)
	}
	none := mustParse(t, "---\nname: n\nnoTools: true\n---\n")
	if r, _ := none.Resolve(Options{}, Config{}, TaskOverrides{}); !r.Child.NoTools || r.Child.Tools != nil {
		t.Fatalf("noTools child %+v", r.Child)
	}
}

// TestResolveWorktree: a profile's worktree isolates every task of it, a
// task's worktree isolates its own child, neither's false turns the other's
// off, and a baseRef counts only with a worktree.
func TestResolveWorktree(t *testing.T) {
	plain := mustParse(t, "---\nname: p\n---\n")
	isolated := mustParse(t, "---\nname: w\nworktree: true\n---\n")
	tests := []struct {
		name     string
		profile  *Profile
		worktree bool
		baseRef  string
		want     *api.WorktreeSpec
	}{
		{"neither", plain, false, "", nil},
		{"a baseRef alone isolates nothing", plain, false, "main", nil},
		{"the task asks", plain, true, "", &api.WorktreeSpec{}},
		{"the task asks from a ref", plain, true, "v1", &api.WorktreeSpec{BaseRef: "v1"}},
		{"the profile requires it", isolated, false, "", &api.WorktreeSpec{}},
		{"the task's baseRef picks the profile's base", isolated, false, "release", &api.WorktreeSpec{BaseRef: "release"}},
		{"both", isolated, true, "", &api.WorktreeSpec{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.profile.Resolve(Options{}, Config{}, TaskOverrides{})
			if err != nil {
				t.Fatal(err)
			}
			shared := r.Child
			child := r.Child
			Isolate(&child, tt.worktree, tt.baseRef)
			if !reflect.DeepEqual(child.Worktree, tt.want) {
				t.Fatalf("worktree %+v, want %+v", child.Worktree, tt.want)
			}
			if shared.Worktree != nil && shared.Worktree.BaseRef != "" {
				t.Fatal("Isolate changed the resolved child it was given a copy of")
			}
		})
	}
}

func TestConfigFile(t *testing.T) {
	tests := []struct {
		name, json, err string
		check           func(t *testing.T, c Config)
	}{
		{"missing file", "", "", func(t *testing.T, c Config) {
			if c.Allowed("anything") != nil {
				t.Fatal("default policy is not allow")
			}
		}},
		{"overrides and policy", `{"subagents":{"finder":{"model":"openai/gpt-4o"},"librarian":{"model":"OpenAI/gpt-5:high"},
			"permissions":{"default":"allow","subagents":{"finder":"deny"},"allowInternalRouting":true}}}`, "", func(t *testing.T, c Config) {
			if c.Models["librarian"] != "OpenAI/gpt-5:high" || !c.AllowInternalRouting {
				t.Fatalf("config %+v", c)
			}
			err := c.Allowed("finder")
			if !errcode.Is(err, errcode.PermissionDenied) || !strings.Contains(err.Error(), `"finder"`) {
				t.Fatalf("finder: %v", err)
			}
			if c.Allowed("oracle") != nil {
				t.Fatal("oracle denied")
			}
		}},
		{"default deny", `{"subagents":{"permissions":{"default":"deny","subagents":{"oracle":"allow"}}}}`, "", func(t *testing.T, c Config) {
			if c.Allowed("oracle") != nil || c.Allowed("finder") == nil {
				t.Fatal("default deny not applied")
			}
		}},
		{"bad thinking", `{"subagents":{"finder":{"model":"openai/gpt-4o:extreme"}}}`, `thinking "extreme" must be one of`, nil},
		{"no provider", `{"subagents":{"finder":{"model":"gpt-4o"}}}`, "want <provider>/<model>[:<thinking>]", nil},
		{"bad policy", `{"subagents":{"permissions":{"default":"maybe"}}}`, `subagents.permissions.default must be "allow" or "deny", not "maybe"`, nil},
		{"not json", `{`, "subagents.json", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.json != "" {
				must(t, os.WriteFile(filepath.Join(dir, ConfigFile), []byte(tt.json), 0o600))
			}
			c, err := LoadConfig(dir, "", nil)
			if tt.err != "" {
				if !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
	// A denied profile does not resolve.
	p := mustParse(t, "---\nname: finder\n---\n")
	if _, err := p.Resolve(Options{}, Config{DefaultPermission: "deny"}, TaskOverrides{}); !errcode.Is(err, errcode.PermissionDenied) {
		t.Fatalf("denied profile resolved: %v", err)
	}
}

func TestResolveSkills(t *testing.T) {
	agentDir := t.TempDir()
	skills := filepath.Join(agentDir, "skills")
	must(t, os.MkdirAll(filepath.Join(skills, "git"), 0o755))
	must(t, os.WriteFile(filepath.Join(skills, "git", "SKILL.md"), []byte("Use git well."), 0o644))
	must(t, os.WriteFile(filepath.Join(skills, "docs.md"), []byte("  Write docs.  "), 0o644))
	opts := Options{AgentDir: agentDir}

	p := mustParse(t, "---\nname: s\nsuggestedSkills: git\nloadSkills: docs\n---\n")
	r, err := p.Resolve(opts, Config{}, TaskOverrides{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Child.Skills, []string{filepath.Join(skills, "git", "SKILL.md")}) || !reflect.DeepEqual(r.Child.AppendSystemPrompt, []string{"Write docs."}) {
		t.Fatalf("skills %v prompt %q", r.Child.Skills, r.Child.AppendSystemPrompt)
	}
	bad := mustParse(t, "---\nname: s\nsuggestedSkills: [bad-name]\n---\n")
	_, err = bad.Resolve(opts, Config{}, TaskOverrides{})
	if err == nil || err.Error() != `Unknown skills: "bad-name". Available skills: docs, git` {
		t.Fatalf("err = %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWorktreeSetting: the worktree setting isolates the tasks of profiles
// that can edit or write files, in a git checkout (a subfolder of one
// too); a read-only profile, or a folder outside a checkout, runs as
// before.
func TestWorktreeSetting(t *testing.T) {
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(repo, "pkg")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writer := mustParse(t, "---\nname: writer\ntools: read, edit, write\n---\n")
	defaults := mustParse(t, "---\nname: defaults\n---\n") // pi's default tools write
	reader := mustParse(t, "---\nname: reader\ntools: read, grep\n---\n")
	tests := []struct {
		name    string
		profile *Profile
		cwd     string
		setting bool
		want    bool
	}{
		{"off", writer, repo, false, false},
		{"a writer in a checkout", writer, repo, true, true},
		{"a writer in a subfolder of a checkout", writer, sub, true, true},
		{"pi's default tools write", defaults, repo, true, true},
		{"a reader stays in place", reader, repo, true, false},
		{"outside a checkout", writer, t.TempDir(), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.profile.Resolve(Options{Cwd: tt.cwd}, Config{Worktree: tt.setting}, TaskOverrides{})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Child.Worktree != nil; got != tt.want {
				t.Fatalf("isolated %v, want %v", got, tt.want)
			}
		})
	}
	// A project's settings may turn it on, and not off where pi's own
	// settings turned it on.
	for _, tt := range []struct {
		global, project string
		want            bool
	}{
		{"", `{"subagents":{"worktree":true}}`, true},
		{`{"subagents":{"worktree":true}}`, `{"subagents":{"worktree":false}}`, true},
		{`{"subagents":{"worktree":false}}`, "", false},
	} {
		agent, project := t.TempDir(), t.TempDir()
		if tt.global != "" {
			must(t, os.WriteFile(filepath.Join(agent, ConfigFile), []byte(tt.global), 0o600))
		}
		if tt.project != "" {
			must(t, os.MkdirAll(filepath.Join(project, ".pi"), 0o755))
			must(t, os.WriteFile(filepath.Join(project, ".pi", ConfigFile), []byte(tt.project), 0o600))
		}
		cfg, err := LoadConfig(agent, project, nil)
		if err != nil || cfg.Worktree != tt.want {
			t.Fatalf("global %s, project %s: worktree %v (%v), want %v", tt.global, tt.project, cfg.Worktree, err, tt.want)
		}
	}
}
