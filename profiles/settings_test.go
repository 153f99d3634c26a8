package profiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// TestSettingsPrecedence: pi's config dir, then the keys a project may set,
// then the environment; what a project may not set is ignored there.
func TestSettingsPrecedence(t *testing.T) {
	tests := []struct {
		name            string
		global, project string
		env             map[string]string
		err             string
		check           func(t *testing.T, c Config)
	}{
		{name: "defaults", check: func(t *testing.T, c Config) {
			if c.Disabled || c.ExtendTimeoutDebounce != nil || c.LoopingToolCount != nil || c.TaskMaxConcurrency != 0 || c.Enabled("x") != nil {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "global", global: `{"subagents":{"extend_timeout_debounce":12,"looping_tool_count":0,"taskMaxConcurrency":6}}`, check: func(t *testing.T, c Config) {
			if *c.ExtendTimeoutDebounce != 12 || *c.LoopingToolCount != 0 || c.TaskMaxConcurrency != 6 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "project beats global", global: `{"subagents":{"looping_tool_count":9}}`, project: `{"subagents":{"looping_tool_count":3}}`, check: func(t *testing.T, c Config) {
			if *c.LoopingToolCount != 3 {
				t.Fatalf("looping_tool_count %d", *c.LoopingToolCount)
			}
		}},
		{name: "environment beats both", global: `{"subagents":{"taskMaxConcurrency":2}}`, project: `{"subagents":{"taskMaxConcurrency":5}}`,
			env: map[string]string{"SUBAGENTS_TASK_MAX_CONCURRENCY": "7", "SUBAGENTS_EXTEND_TIMEOUT_DEBOUNCE": "45"}, check: func(t *testing.T, c Config) {
				if c.TaskMaxConcurrency != 7 || *c.ExtendTimeoutDebounce != 45 {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "max_runtime", project: `{"subagents":{"max_runtime":900}}`, env: map[string]string{}, check: func(t *testing.T, c Config) {
			if c.MaxRuntime == nil || *c.MaxRuntime != 900 {
				t.Fatalf("max_runtime %v", c.MaxRuntime)
			}
		}},
		{name: "max_runtime out of range", global: `{"subagents":{"max_runtime":0}}`, err: "max_runtime must be 1 to 86400, not 0"},
		{name: "the task contract's own variable", global: `{"subagents":{"taskMaxEvents":40}}`, env: map[string]string{"OHM_SUBAGENTS_TASK_MAX_EVENTS": "12"}, check: func(t *testing.T, c Config) {
			if *c.TaskMaxEvents != 12 {
				t.Fatalf("taskMaxEvents %d", *c.TaskMaxEvents)
			}
		}},
		{name: "outputMaxChars: the project's, the task contract's variable over it", global: `{"subagents":{"outputMaxChars":4000}}`,
			project: `{"subagents":{"outputMaxChars":500}}`, env: map[string]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS": "100"}, check: func(t *testing.T, c Config) {
				if c.OutputMaxChars != 100 {
					t.Fatalf("outputMaxChars %d", c.OutputMaxChars)
				}
			}},
		{name: "outputMaxChars: SUBAGENTS_OUTPUT_MAX_CHARS stays the worker's", project: `{"subagents":{"outputMaxChars":500}}`,
			env: map[string]string{"SUBAGENTS_OUTPUT_MAX_CHARS": "100"}, check: func(t *testing.T, c Config) {
				if c.OutputMaxChars != 500 {
					t.Fatalf("outputMaxChars %d", c.OutputMaxChars)
				}
			}},
		{name: "outputMaxChars unset", check: func(t *testing.T, c Config) {
			if c.OutputMaxChars != 0 {
				t.Fatalf("outputMaxChars %d", c.OutputMaxChars)
			}
		}},
		{name: "outputMaxChars out of range", env: map[string]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS": "0"},
			err: "OHM_SUBAGENTS_OUTPUT_MAX_CHARS: outputMaxChars must be 1 to 2147483647, not 0"},
		{name: "outputMaxChars above the bound is the bound", env: map[string]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS": "200000"}, check: func(t *testing.T, c Config) {
			if c.OutputMaxChars != MaxOutputChars {
				t.Fatalf("outputMaxChars %d, want %d", c.OutputMaxChars, MaxOutputChars)
			}
		}},
		{name: "the delegate contract clamps its limits", global: `{"subagents":{"extend_timeout_debounce":900,"looping_tool_count":-4}}`, check: func(t *testing.T, c Config) {
			if *c.ExtendTimeoutDebounce != 300 || *c.LoopingToolCount != 0 {
				t.Fatalf("debounce %d, looping %d", *c.ExtendTimeoutDebounce, *c.LoopingToolCount)
			}
		}},
		{name: "a project cannot widen", global: `{"subagents":{"permissions":{"default":"deny"},"finder":{"disabled":true}}}`,
			project: `{"subagents":{"permissions":{"default":"allow"},"finder":{"model":"openai/gpt-5","disabled":false},"disabled":false}}`, check: func(t *testing.T, c Config) {
				if c.DefaultPermission != "deny" || c.Models["finder"] != "" || !errcode.Is(c.Enabled("finder"), errcode.SubagentDisabled) {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "a project can turn off", project: `{"subagents":{"disabled":true}}`, check: func(t *testing.T, c Config) {
			err := c.Enabled("finder")
			if !errcode.Is(err, errcode.SubagentsDisabled) || !strings.Contains(err.Error(), "SUBAGENTS_DISABLED") {
				t.Fatalf("%v", err)
			}
		}},
		{name: "the environment turns off", env: map[string]string{"SUBAGENTS_DISABLED": "1"}, check: func(t *testing.T, c Config) {
			if !errcode.Is(c.Enabled("x"), errcode.SubagentsDisabled) {
				t.Fatal("SUBAGENTS_DISABLED=1 left it on")
			}
		}},
		{name: "one agent off", global: `{"subagents":{"oracle":{"disabled":true}}}`, check: func(t *testing.T, c Config) {
			err := c.Enabled("oracle")
			if !errcode.Is(err, errcode.SubagentDisabled) || !strings.Contains(err.Error(), "subagents.oracle.disabled") || c.Enabled("finder") != nil {
				t.Fatalf("%v", err)
			}
		}},
		{name: "concurrency out of range", global: `{"subagents":{"taskMaxConcurrency":17}}`, err: "subagents.taskMaxConcurrency: taskMaxConcurrency must be 1 to 16, not 17"},
		{name: "wrong type", project: `{"subagents":{"looping_tool_count":"many"}}`, err: `looping_tool_count must be a whole number, not "many"`},
		{name: "not a switch", global: `{"subagents":{"disabled":"sometimes"}}`, err: `disabled must be true or false, not "sometimes"`},
		{name: "bad variable", env: map[string]string{"SUBAGENTS_TASK_MAX_CONCURRENCY": "0"}, err: "SUBAGENTS_TASK_MAX_CONCURRENCY: taskMaxConcurrency must be 1 to 16, not 0"},
		{name: "not an entry", global: `{"subagents":{"finder":"fast"}}`, err: `unknown setting "finder" in `},
		{name: "trustedProjects: pi's config dir, ~ expanded", global: `{"subagents":{"trustedProjects":["/src/a/","~/b","~"]}}`, check: func(t *testing.T, c Config) {
			home, _ := os.UserHomeDir()
			want := []string{"/src/a", filepath.Join(home, "b"), home}
			if strings.Join(c.TrustedProjects, "|") != strings.Join(want, "|") {
				t.Fatalf("trustedProjects %q, want %q", c.TrustedProjects, want)
			}
		}},
		{name: "trustedProjects: a project cannot trust itself", project: `{"subagents":{"trustedProjects":["/"]}}`, check: func(t *testing.T, c Config) {
			if len(c.TrustedProjects) != 0 || c.TrustsProject("/anything") {
				t.Fatalf("a project's trustedProjects counted: %q", c.TrustedProjects)
			}
		}},
		{name: "trustedProjects: the variable, colon-separated, wins", global: `{"subagents":{"trustedProjects":["/src/a"]}}`,
			env: map[string]string{"SUBAGENTS_TRUSTED_PROJECTS": "/src/b:/src/c"}, check: func(t *testing.T, c Config) {
				if strings.Join(c.TrustedProjects, "|") != "/src/b|/src/c" {
					t.Fatalf("trustedProjects %q", c.TrustedProjects)
				}
			}},
		{name: "trustedProjects: a relative folder", global: `{"subagents":{"trustedProjects":["src/a"]}}`,
			err: `subagents.trustedProjects: trustedProjects: "src/a" is not an absolute folder`},
		{name: "trustedProjects: not a list", global: `{"subagents":{"trustedProjects":true}}`,
			err: `trustedProjects must be a list of absolute folders, not true`},
		{name: "trustedProjects: a relative folder in the variable", env: map[string]string{"SUBAGENTS_TRUSTED_PROJECTS": "/src/a:rel"},
			err: `SUBAGENTS_TRUSTED_PROJECTS: trustedProjects: "rel" is not an absolute folder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent, cwd := t.TempDir(), t.TempDir()
			if tt.global != "" {
				must(t, os.WriteFile(filepath.Join(agent, ConfigFile), []byte(tt.global), 0o600))
			}
			if tt.project != "" {
				must(t, os.MkdirAll(filepath.Join(cwd, ".pi"), 0o755))
				must(t, os.WriteFile(filepath.Join(cwd, ".pi", ConfigFile), []byte(tt.project), 0o600))
			}
			c, err := LoadConfig(agent, cwd, func(k string) string { return tt.env[k] })
			if tt.err != "" {
				if !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want INVALID_INPUT with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// TestResolveAppliesSettings: the resolved child carries the delegate contract's limits
// from the settings, and a disabled agent or feature fails its task alone.
func TestResolveAppliesSettings(t *testing.T) {
	agent, cwd := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(cwd, ".pi", "agents"), 0o755))
	must(t, os.WriteFile(filepath.Join(cwd, ".pi", "agents", "scout.md"), []byte("---\nname: scout\n---\nLook.\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(cwd, ".pi", "agents", "oracle.md"), []byte("---\nname: oracle\n---\nThink.\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(agent, ConfigFile), []byte(`{"subagents":{"looping_tool_count":2,"extend_timeout_debounce":7,"oracle":{"disabled":true}}}`), 0o600))
	piTrusts(t, agent, cwd)
	a := &Activities{AgentDir: agent}
	out, err := a.ResolveTasks(t.Context(), ResolveRequest{Tasks: []ResolveTask{{Profile: "scout", Cwd: cwd}, {Profile: "oracle", Cwd: cwd}}})
	if err != nil {
		t.Fatal(err)
	}
	if c := out[0].Child; out[0].Error != nil || c.LoopingToolCount == nil || *c.LoopingToolCount != 2 || *c.ExtendDebounceSeconds != 7 {
		t.Fatalf("scout: %+v %+v", out[0].Error, c)
	}
	if e := out[1].Error; e == nil || e.Code != errcode.SubagentDisabled || e.Category != errcode.CategoryPermission {
		t.Fatalf("oracle: %+v", e)
	}
	a.Getenv = func(k string) string { return map[string]string{"SUBAGENTS_DISABLED": "true"}[k] }
	out, err = a.ResolveTasks(t.Context(), ResolveRequest{Tasks: []ResolveTask{{Profile: "scout", Cwd: cwd}}})
	if err != nil || out[0].Error == nil || out[0].Error.Code != errcode.SubagentsDisabled {
		t.Fatalf("disabled: %v %+v", err, out[0].Error)
	}
}

// TestAdmitGivesTheTasksOutputCap (issue 31, item 5): Admit, the worker's
// check as a child run starts, gives the run the output cap of its task's
// settings (the project's file, the task contract's variable), none when
// the settings say nothing.
func TestAdmitGivesTheTasksOutputCap(t *testing.T) {
	agent, cwd := t.TempDir(), t.TempDir()
	a := &Activities{AgentDir: agent}
	in := api.RunPiInput{SessionID: "s", Prompt: "p", Cwd: cwd, Depth: 1}
	if got, err := a.Admit(in); err != nil || got.OutputMaxChars != 0 {
		t.Fatalf("no setting: %+v, %v", got, err)
	}
	must(t, os.MkdirAll(filepath.Join(cwd, ".pi"), 0o755))
	must(t, os.WriteFile(filepath.Join(cwd, ".pi", ConfigFile), []byte(`{"subagents":{"outputMaxChars":300}}`), 0o600))
	if got, err := a.Admit(in); err != nil || got.OutputMaxChars != 300 {
		t.Fatalf("the project's file: %+v, %v", got, err)
	}
	a.Getenv = func(k string) string { return map[string]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS": "100"}[k] }
	if got, err := a.Admit(in); err != nil || got.OutputMaxChars != 100 {
		t.Fatalf("OHM_SUBAGENTS_OUTPUT_MAX_CHARS: %+v, %v", got, err)
	}
}

// TestSubagentToolRunsReadOnlyAgents: the SingleResult contract: through the subagent
// tool a profile that can edit or write is refused unless allowWrite is set
// in pi's config dir; the task tool keeps the task contract's writing worker.
func TestSubagentToolRunsReadOnlyAgents(t *testing.T) {
	agent, cwd := t.TempDir(), t.TempDir()
	a := &Activities{AgentDir: agent}
	resolve := func(profile, tool string) *activitiesErr {
		out, err := a.ResolveTasks(t.Context(), ResolveRequest{Tasks: []ResolveTask{{Profile: profile, Cwd: cwd, Tool: tool}}})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Error == nil {
			return nil
		}
		return &activitiesErr{string(out[0].Error.Code), out[0].Error.Message}
	}
	if e := resolve("implementer", "subagent"); e == nil || e.code != "PERMISSION_DENIED" || !strings.Contains(e.msg, `"allowWrite": true`) || !strings.Contains(e.msg, "edit, write") {
		t.Fatalf("implementer through subagent: %+v", e)
	}
	for _, ok := range [][2]string{{"scout", "subagent"}, {"tester", "subagent"}, {"implementer", "task"}, {"task", ""}} {
		if e := resolve(ok[0], ok[1]); e != nil {
			t.Fatalf("%s through %q: %+v", ok[0], ok[1], e)
		}
	}
	// A project cannot allow writes; pi's config dir can.
	must(t, os.MkdirAll(filepath.Join(cwd, ".pi"), 0o755))
	must(t, os.WriteFile(filepath.Join(cwd, ".pi", ConfigFile), []byte(`{"subagents":{"allowWrite":true}}`), 0o600))
	if e := resolve("implementer", "subagent"); e == nil {
		t.Fatal("a project's allowWrite let a writing agent run")
	}
	must(t, os.WriteFile(filepath.Join(agent, ConfigFile), []byte(`{"subagents":{"allowWrite":true}}`), 0o600))
	if e := resolve("implementer", "subagent"); e != nil {
		t.Fatalf("allowWrite set: %+v", e)
	}
	// maxDepth is 1 to MaxSettingsDepth (nesting_test.go: what it does).
	must(t, os.WriteFile(filepath.Join(agent, ConfigFile), []byte(`{"subagents":{"maxDepth":3}}`), 0o600))
	if cfg, err := LoadConfig(agent, "", nil); err != nil || cfg.MaxDepth != 3 {
		t.Fatalf("maxDepth 3: %+v %v", cfg.MaxDepth, err)
	}
	for _, bad := range []string{"0", "6"} {
		must(t, os.WriteFile(filepath.Join(agent, ConfigFile), []byte(`{"subagents":{"maxDepth":`+bad+`}}`), 0o600))
		if _, err := LoadConfig(agent, "", nil); !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "maxDepth") {
			t.Fatalf("maxDepth %s: %v", bad, err)
		}
	}
}

type activitiesErr struct{ code, msg string }

// TestTrustsProject: a project is trusted when its root is a folder the
// settings list or is inside one, also through a link; a neighbour whose
// name merely starts the same is not.
func TestTrustsProject(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	must(t, os.MkdirAll(filepath.Join(real, "repo"), 0o755))
	link := filepath.Join(base, "link")
	must(t, os.Symlink(real, link))
	outside := filepath.Join(base, "outside")
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.Symlink(outside, filepath.Join(real, "escape")))
	tests := []struct {
		name    string
		trusted []string
		root    string
		want    bool
	}{
		{"nothing trusted", nil, "/src/a", false},
		{"the folder itself", []string{"/src/a"}, "/src/a", true},
		{"a project inside a trusted folder", []string{"/src"}, "/src/a", true},
		{"a neighbour with the same start", []string{"/src/a"}, "/src/ab", false},
		{"a folder above the trusted one", []string{"/src/a"}, "/src", false},
		{"trusted through a link", []string{link}, filepath.Join(real, "repo"), true},
		{"a project reached through a link", []string{real}, filepath.Join(link, "repo"), true},
		{"a link inside a trusted folder to one outside", []string{real}, filepath.Join(real, "escape"), false},
		{"a missing project under a linked trusted folder", []string{real}, filepath.Join(link, "repo", "new"), true},
		{"no root", []string{"/"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Config{TrustedProjects: tt.trusted}).TrustsProject(tt.root); got != tt.want {
				t.Fatalf("TrustsProject(%q) with %q = %v, want %v", tt.root, tt.trusted, got, tt.want)
			}
		})
	}
}

// TestAdmitKeepsAProfilesWorktree: a run of a profile that requires a
// worktree (worktree: true) is refused without one: a workflow input
// written by hand cannot drop it.
func TestAdmitKeepsAProfilesWorktree(t *testing.T) {
	agent, cwd := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(agent, "agents"), 0o755))
	must(t, os.WriteFile(filepath.Join(agent, "agents", "isolated.md"), []byte("---\nname: isolated\ndescription: d\nworktree: true\n---\nWrite.\n"), 0o600))
	a := &Activities{AgentDir: agent}
	in := api.RunPiInput{SessionID: "s", Prompt: "p", Cwd: cwd, Depth: 1, Profile: "isolated", Agent: "isolated"}
	if _, err := a.Admit(in); err == nil || errcode.CodeOf(err) != errcode.PermissionDenied || !strings.Contains(err.Error(), "worktree") {
		t.Fatalf("without its worktree: %v", err)
	}
	in.Worktree = &api.WorktreeSpec{}
	if _, err := a.Admit(in); err != nil {
		t.Fatalf("with its worktree: %v", err)
	}
}

// TestSettingsReportUnknownKeys (issue 42): a key of the "subagents"
// object that is no setting, no profile's entry field and no permission
// field is named, with the near one it likely is; a value of the wrong
// kind in a profile's entry or the permissions is named by its key and
// the kind it must be. Each is INVALID_INPUT, and says where, so that the
// doctor places it on its line.
func TestSettingsReportUnknownKeys(t *testing.T) {
	tests := []struct {
		name, global, project string
		// want is the message, FILE standing for the file's path.
		want string
		key  []string
	}{
		{name: "a misspelt setting", global: `{"subagents":{"taskMaxEvnts":5}}`,
			want: `unknown setting "taskMaxEvnts" in FILE: did you mean "taskMaxEvents"?`, key: []string{"taskMaxEvnts"}},
		{name: "snake case for camel case", project: `{"subagents":{"task_max_events":5}}`,
			want: `unknown setting "task_max_events" in FILE: did you mean "taskMaxEvents"?`, key: []string{"task_max_events"}},
		{name: "a misspelt setting whose value is an object", global: `{"subagents":{"permisions":{"default":"deny"}}}`,
			want: `unknown setting "permisions" in FILE: did you mean "permissions"?`, key: []string{"permisions"}},
		{name: "nothing near", global: `{"subagents":{"fast":true}}`,
			want: `unknown setting "fast" in FILE: no setting has that name (docs/settings.md lists them), and a profile's entry is an object {"model": ..., "disabled": ...}`, key: []string{"fast"}},
		{name: "a profile's entry", global: `{"subagents":{"finder":{"modle":"openai/gpt-4o"}}}`,
			want: `unknown setting "finder.modle" in FILE: did you mean "finder.model"?`, key: []string{"finder", "modle"}},
		{name: "a profile's entry in a project", project: `{"subagents":{"finder":{"disabeld":true}}}`,
			want: `unknown setting "finder.disabeld" in FILE: did you mean "finder.disabled"?`, key: []string{"finder", "disabeld"}},
		{name: "a profile's entry, nothing near", global: `{"subagents":{"finder":{"colour":"red"}}}`,
			want: `unknown setting "finder.colour" in FILE: a profile's entry takes "model" and "disabled"`, key: []string{"finder", "colour"}},
		{name: "the permissions", global: `{"subagents":{"permissions":{"defualt":"deny"}}}`,
			want: `unknown setting "permissions.defualt" in FILE: did you mean "permissions.default"?`, key: []string{"permissions", "defualt"}},
		{name: "a model of the wrong kind", global: `{"subagents":{"finder":{"model":5}}}`,
			want: `FILE: subagents.finder.model must be a model "provider/id[:thinking]", not 5`, key: []string{"finder", "model"}},
		{name: "a switch of the wrong kind", global: `{"subagents":{"finder":{"disabled":"sometimes"}}}`,
			want: `FILE: subagents.finder.disabled must be true or false, not "sometimes"`, key: []string{"finder", "disabled"}},
		{name: "a policy of the wrong kind", global: `{"subagents":{"permissions":{"default":5}}}`,
			want: `FILE: subagents.permissions.default must be "allow" or "deny", not 5`, key: []string{"permissions", "default"}},
		{name: "a profile's policy", global: `{"subagents":{"permissions":{"subagents":{"finder":"no"}}}}`,
			want: `FILE: subagents.permissions.subagents.finder must be "allow" or "deny", not "no"`, key: []string{"permissions", "subagents", "finder"}},
		{name: "routing of the wrong kind", global: `{"subagents":{"permissions":{"allowInternalRouting":"yes"}}}`,
			want: `FILE: subagents.permissions.allowInternalRouting must be true or false, not "yes"`, key: []string{"permissions", "allowInternalRouting"}},
		{name: "an entry that is no object", global: `{"subagents":{"finder":"fast"}}`,
			want: `unknown setting "finder" in FILE: no setting has that name (docs/settings.md lists them), and a profile's entry is an object {"model": ..., "disabled": ...}`, key: []string{"finder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent, cwd := t.TempDir(), t.TempDir()
			file := filepath.Join(agent, ConfigFile)
			if tt.global != "" {
				must(t, os.WriteFile(file, []byte(tt.global), 0o600))
			}
			if tt.project != "" {
				file = filepath.Join(cwd, ".pi", ConfigFile)
				must(t, os.MkdirAll(filepath.Dir(file), 0o755))
				must(t, os.WriteFile(file, []byte(tt.project), 0o600))
			}
			_, err := LoadConfig(agent, cwd, nil)
			want := strings.ReplaceAll(tt.want, "FILE", file)
			if !errcode.Is(err, errcode.InvalidInput) || err == nil || err.Error() != want {
				t.Fatalf("err = %v\nwant INVALID_INPUT %s", err, want)
			}
			var se *SettingError
			if !errors.As(err, &se) || se.File != file || strings.Join(se.Key, ".") != strings.Join(tt.key, ".") {
				t.Fatalf("no SettingError at %s %v: %#v", file, tt.key, se)
			}
		})
	}
	// The keys every contract defines are no mistake.
	agent := t.TempDir()
	must(t, os.WriteFile(filepath.Join(agent, ConfigFile), []byte(`{"subagents":{"disabled":false,"extend_timeout_debounce":30,"looping_tool_count":5,
		"taskMaxConcurrency":3,"taskMaxEvents":120,"outputMaxChars":8000,"max_runtime":900,"allowWrite":false,"maxDepth":2,"worktree":false,
		"trustedProjects":[],"finder":{"model":"openai/gpt-4o","disabled":false},
		"permissions":{"default":"allow","subagents":{"finder":"deny"},"allowInternalRouting":false}}}`), 0o600))
	if _, err := LoadConfig(agent, "", nil); err != nil {
		t.Fatal(err)
	}
}
