package profiles

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

func TestParseFields(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want func(p *Profile) bool
	}{
		{"the sessions contract whitelist", "---\nname: scout\ndescription: Fast recon\napproved_tools:\n  - read\n  - bash\n---\nSystem prompt.\n",
			func(p *Profile) bool {
				return p.Name == "scout" && p.Description == "Fast recon" && reflect.DeepEqual(p.Tools, []string{"read", "bash"}) && p.SystemPrompt == "System prompt."
			}},
		{"the sessions contract allowed_tools", "---\nname: a\nallowed_tools: [read]\n---\n", func(p *Profile) bool { return reflect.DeepEqual(p.Tools, []string{"read"}) }},
		{"the sessions contract blacklist", "---\nname: a\ndenied_tools: [bash, write]\n---\n", func(p *Profile) bool {
			return reflect.DeepEqual(p.ExcludeTools, []string{"bash", "write"}) && reflect.DeepEqual(p.GrantedTools(), []string{"read", "edit", "grep", "find", "ls"})
		}},
		{"the delegate contract comma lists", "---\nname: r\ntools: read, bash ,grep\nextensions: /a.ts,/b.ts\nextraArgs: --verbose\n---\n", func(p *Profile) bool {
			return reflect.DeepEqual(p.Tools, []string{"read", "bash", "grep"}) && reflect.DeepEqual(p.Extensions, []string{"/a.ts", "/b.ts"}) && reflect.DeepEqual(p.ExtraArgs, []string{"--verbose"})
		}},
		{"the delegate contract model with provider and thinking", "---\nname: m\nmodel: Anthropic/claude-sonnet-4-5:high\n---\n", func(p *Profile) bool {
			return p.Provider == "anthropic" && p.Model == "claude-sonnet-4-5" && p.Thinking == "high"
		}},
		{"thinkingLevel wins over the suffix", "---\nname: m\nmodel: openai/gpt-5:low\nthinkingLevel: xhigh\n---\n", func(p *Profile) bool { return p.Thinking == "xhigh" }},
		{"provider field", "---\nname: m\nprovider: DashScope\nmodel: qwen3.5-plus\n---\n", func(p *Profile) bool { return p.Provider == "dashscope" && p.Model == "qwen3.5-plus" }},
		{"booleans", "---\nname: b\nnoTools: true\nnoExtensions: true\nnoSkills: true\nnoContextFiles: true\nprimary: true\ninternal: true\n---\n", func(p *Profile) bool {
			return p.NoTools && p.NoExtensions && p.NoSkills && p.NoContextFiles && p.Primary && p.Internal && p.GrantedTools() == nil
		}},
		{"noTools wins over tools and excludeTools", "---\nname: b\nnoTools: true\ntools: read\nexcludeTools: bash\n---\n", func(p *Profile) bool { return p.GrantedTools() == nil }},
		{"ours", "---\nname: o\ntimeout: 120\nmaxFinalizeRetries: 4\nfinalize: false\nreadonly: true\n---\n", func(p *Profile) bool {
			return p.TimeoutSeconds == 120 && *p.MaxFinalizeRetries == 4 && !p.Finalize && p.Readonly
		}},
		{"finalize defaults to on", "---\nname: o\n---\n", func(p *Profile) bool { return p.Finalize && p.MaxFinalizeRetries == nil }},
		{"worktree", "---\nname: w\nworktree: true\n---\n", func(p *Profile) bool { return p.Worktree }},
		{"worktree defaults to off", "---\nname: w\n---\n", func(p *Profile) bool { return !p.Worktree }},
		{"readonly keeps only read-only tools", "---\nname: ro\nreadonly: true\ntools: read, bash, edit, grep\n---\n", func(p *Profile) bool {
			return reflect.DeepEqual(p.GrantedTools(), []string{"read", "grep"})
		}},
		{"readonly default tools", "---\nname: ro\nreadonly: true\n---\n", func(p *Profile) bool { return reflect.DeepEqual(p.GrantedTools(), ReadOnlyTools) }},
		{"never a delegation tool", "---\nname: d\ntools: read, subagent, delegate_to_subagents, task\n---\n", func(p *Profile) bool {
			return reflect.DeepEqual(p.GrantedTools(), []string{"read"})
		}},
		{"skills", "---\nname: s\nsuggestedSkills: [git]\nloadSkills: docs\n---\n", func(p *Profile) bool {
			return reflect.DeepEqual(p.SuggestedSkills, []string{"git"}) && reflect.DeepEqual(p.LoadSkills, []string{"docs"})
		}},
		{"apiKey is kept but never listed", "---\nname: k\napiKey: sk-secret-value\n---\n", func(p *Profile) bool { return p.APIKey == "sk-secret-value" }},
		{"CRLF and BOM", "\ufeff---\r\nname: w\r\n---\r\nBody\r\n", func(p *Profile) bool { return p.Name == "w" && p.SystemPrompt == "Body" }},
		{"extraArgs allowed without tool restriction", "---\nname: x\nextraArgs: [--tools=read]\n---\n", func(p *Profile) bool { return len(p.ExtraArgs) == 1 }},
		{"fallbackModels as a comma string", "---\nname: f\nmodel: openai/gpt-5\nfallbackModels: Anthropic/claude-sonnet-4-5:high, openai/gpt-4o\n---\n", func(p *Profile) bool {
			return reflect.DeepEqual(p.FallbackModels, []string{"anthropic/claude-sonnet-4-5:high", "openai/gpt-4o"})
		}},
		{"fallbackModels as a list", "---\nname: f\nfallbackModels:\n  - openai/gpt-4o:low\n  - google/gemini-2.5-pro\n---\n", func(p *Profile) bool {
			return reflect.DeepEqual(p.FallbackModels, []string{"openai/gpt-4o:low", "google/gemini-2.5-pro"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.src), "x.md", ScopeGlobal)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(p) {
				t.Fatalf("parsed %+v", p)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"no name", "---\ndescription: x\n---\n", "name is required"},
		{"bad name", "---\nname: a b\n---\n", "must be 1 to 128 letters"},
		{"whitelist and blacklist", "---\nname: a\napproved_tools: [read]\ndenied_tools: [bash]\n---\n", "whitelist) and denied_tools (blacklist) are both set"},
		{"tools and excludeTools", "---\nname: a\ntools: read\nexcludeTools: bash\n---\n", `has both "tools" and "excludeTools" set. These are mutually exclusive`},
		{"bad thinking", "---\nname: a\nthinkingLevel: extreme\n---\n", `thinkingLevel "extreme" must be one of off, minimal, low, medium, high, xhigh`},
		{"suggestedSkills with noSkills", "---\nname: a\nsuggestedSkills: [x]\nnoSkills: true\n---\n",
			`Profile "a" has both "suggestedSkills" and "noSkills" set. These are mutually exclusive — --no-skills would override --skill flags.`},
		{"loadSkills with noSkills", "---\nname: a\nloadSkills: [x]\nnoSkills: true\n---\n",
			`Profile "a" has both "loadSkills" and "noSkills" set. These are mutually exclusive — --no-skills disables skill discovery.`},
		{"extraArgs --tools", "---\nname: a\ntools: read\nextraArgs: [--tools, bash]\n---\n", `Refusing extraArg "--tools" which would override profile tool restrictions. Use the dedicated profile fields instead.`},
		{"extraArgs -t=", "---\nname: a\nexcludeTools: bash\nextraArgs: [\"-t=read\"]\n---\n", `Refusing extraArg "-t=read"`},
		{"extraArgs --no-tools", "---\nname: a\nnoTools: true\nextraArgs: --no-tools\n---\n", `Refusing extraArg "--no-tools"`},
		{"extraArgs -nt readonly", "---\nname: a\nreadonly: true\nextraArgs: -nt\n---\n", `Refusing extraArg "-nt"`},
		{"extraArgs shell", "---\nname: a\nextraArgs: [\"; rm -rf /\"]\n---\n", "Refusing extraArg: potentially unsafe argument"},
		{"unknown field", "---\nname: a\nflavour: mint\n---\n", `frontmatter (line 3): unknown field "flavour" (docs/profiles.md lists the fields)`},
		{"misspelt field", "---\nname: a\ndescripton: x\n---\n", `frontmatter (line 3): unknown field "descripton": did you mean "description"?`},
		{"another contract's spelling", "---\nname: a\nthinking_level: high\n---\n", `frontmatter (line 3): unknown field "thinking_level": did you mean "thinkingLevel"?`},
		{"misspelt alias", "---\nname: a\napproved_tool: [read]\n---\n", `frontmatter (line 3): unknown field "approved_tool": did you mean "approved_tools"?`},
		{"unterminated", "---\nname: a\n", "never ends"},
		{"bad yaml", "---\nname: [a\n---\n", "frontmatter"},
		{"bad model", "---\nname: a\nmodel: /x\n---\n", "want <provider>/<model>"},
		{"bad retries", "---\nname: a\nmaxFinalizeRetries: 99\n---\n", "between 0 and 10"},
		{"fallback without a provider", "---\nname: a\nfallbackModels: gpt-4o\n---\n", `fallbackModels: model "gpt-4o": want <provider>/<model>[:<thinking>]`},
		{"fallback with a bad thinking level", "---\nname: a\nfallbackModels: [openai/gpt-4o:extreme]\n---\n", `fallbackModels: thinking "extreme" must be one of`},
		{"fallbacks neither a list nor a string", "---\nname: a\nfallbackModels: {a: b}\n---\n", "want a list or a comma-separated string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "x.md", ScopeGlobal)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			if !errcode.Is(err, errcode.InvalidInput) {
				t.Fatalf("err %v has no INVALID_INPUT code", err)
			}
		})
	}
}

// TestParseTakesEveryDocumentedField: every field docs/profiles.md says a
// profile of any contract may set, aliases too, reads as a field, never
// as an unknown one (issue 42: a misspelling is named, a field is not).
func TestParseTakesEveryDocumentedField(t *testing.T) {
	for key, value := range map[string]string{
		"name": "a", "description": "x", "approved_tools": "read", "allowed_tools": "read", "denied_tools": "bash",
		"provider": "openai", "model": "openai/gpt-4o", "thinkingLevel": "high", "tools": "read", "excludeTools": "bash",
		"noTools": "true", "noExtensions": "true", "extensions": "x.ts", "noSkills": "true", "suggestedSkills": "x",
		"loadSkills": "x", "noContextFiles": "true", "appendSystemPrompt": "x", "apiKey": "k", "extraArgs": "--verbose",
		"primary": "true", "internal": "true", "timeout": "60", "maxFinalizeRetries": "2", "questionTimeoutSeconds": "60",
		"fallbackModels": "openai/gpt-5", "finalize": "false", "readonly": "true", "worktree": "true", "maxDepth": "1",
	} {
		src := "---\nname: a\n" + key + ": " + value + "\n---\n"
		if key == "name" {
			src = "---\nname: a\n---\n"
		}
		if _, err := Parse([]byte(src), "x.md", ScopeGlobal); err != nil && strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: %v", key, err)
		}
	}
}

func writeProfile(t *testing.T, dir, name, src string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".md")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadScopesAndLookup(t *testing.T) {
	root := t.TempDir()
	agentDir := filepath.Join(root, "agent")
	project := filepath.Join(root, "repo")
	cwd := filepath.Join(project, "sub", "dir")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	// The user's own project: trusted, so its profiles override by name.
	piTrusts(t, agentDir, project)
	prompts := filepath.Join(root, "ext", "prompts")
	writeProfile(t, prompts, "seed-zero", "---\nname: seed-zero\ndescription: from an extension's prompts folder\napproved_tools: [read]\n---\nBody.")
	writeProfile(t, prompts, "scout", "---\nname: scout\ndescription: prompts scout\n---\n")
	writeProfile(t, filepath.Join(agentDir, "agent-profiles"), "scout", "---\nname: scout\ndescription: global scout\n---\nGlobal body.")
	writeProfile(t, filepath.Join(agentDir, "agents"), "writer", "---\nname: writer\ndescription: global writer\n---\n")
	writeProfile(t, filepath.Join(project, ".pi", "agents"), "writer", "---\nname: writer\ndescription: project writer\n---\n")
	writeProfile(t, filepath.Join(project, ".pi", "agent-profiles"), "broken", "---\nname: broken\ntools: read\nexcludeTools: bash\n---\n")
	writeProfile(t, filepath.Join(project, ".pi", "agents"), "hidden", "---\nname: hidden\ninternal: true\n---\n")

	set, err := Load(Options{Cwd: cwd, AgentDir: agentDir, PromptDirs: []string{prompts}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		scope Scope
		desc  string
	}{
		{"seed-zero", ScopeGlobal, "from an extension's prompts folder"},
		{"scout", ScopeGlobal, "global scout"},
		{"writer", ScopeProject, "project writer"},
		{"reviewer", ScopeBuiltin, ""},
	}
	for _, tt := range tests {
		p, err := set.Lookup(tt.name, false)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if p.Scope != tt.scope || (tt.desc != "" && p.Description != tt.desc) {
			t.Fatalf("%s: scope %s desc %q", tt.name, p.Scope, p.Description)
		}
	}
	if p, _ := set.Lookup("scout", false); !p.ReplaceSystemPrompt || p.SystemPrompt != "Global body." {
		t.Fatal("an agent-profiles body does not replace pi's system prompt")
	}

	// A malformed file is listed, and using it fails with its error.
	var listed bool
	for _, p := range set.List(false) {
		listed = listed || (p.Name == "broken" && p.Err != nil)
	}
	if !listed {
		t.Fatal("the malformed profile is not listed")
	}
	if _, err := set.Lookup("broken", false); err == nil || !strings.Contains(err.Error(), "mutually exclusive") {
		t.Fatalf("lookup of a malformed profile: %v", err)
	}

	// Internal profiles hide unless asked for.
	if _, err := set.Lookup("hidden", false); !errcode.Is(err, errcode.UnknownAgent) {
		t.Fatalf("internal profile visible: %v", err)
	}
	if _, err := set.Lookup("hidden", true); err != nil {
		t.Fatal(err)
	}

	_, err = set.Lookup("code-reviewer", false)
	want := `Unknown profile: "code-reviewer". Available profiles: broken, explorer, finder, implementer, librarian, oracle, painter, planner, researcher, reviewer, scout, seed-zero, task, tester, writer`
	if !errcode.Is(err, errcode.UnknownAgent) || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	empty := &Set{byName: map[string]*Profile{}}
	if _, err := empty.Lookup("x", false); err == nil || err.Error() != `Unknown profile: "x". Available profiles: (none)` {
		t.Fatalf("empty set: %v", err)
	}
}

func TestLoadSeesAChangedFile(t *testing.T) {
	agentDir := t.TempDir()
	dir := filepath.Join(agentDir, "agents")
	p := writeProfile(t, dir, "w", "---\nname: w\ndescription: one\n---\n")
	first, err := Load(Options{AgentDir: agentDir})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Load(Options{AgentDir: agentDir})
	if again != first {
		t.Fatal("an unchanged tree was parsed again")
	}
	if err := os.WriteFile(p, []byte("---\nname: w\ndescription: two, longer\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Now().Add(time.Second), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	changed, _ := Load(Options{AgentDir: agentDir})
	if w, _ := changed.Lookup("w", false); w.Description != "two, longer" {
		t.Fatalf("description %q: the changed file was not seen", w.Description)
	}
}

func TestBuiltins(t *testing.T) {
	want := map[string]struct{ readonly, write, bash bool }{
		"scout": {readonly: true}, "explorer": {readonly: true}, "researcher": {readonly: true},
		"reviewer": {readonly: true}, "planner": {readonly: true}, "librarian": {readonly: true},
		"oracle": {readonly: true}, "finder": {readonly: true},
		"implementer": {write: true, bash: true}, "task": {write: true, bash: true}, "tester": {bash: true},
		// The task contract's scaffolded image helper: it writes image files.
		"painter": {write: true, bash: true},
	}
	list := builtins()
	if len(list) != len(want) {
		t.Fatalf("%d built-ins, want %d", len(list), len(want))
	}
	for _, p := range list {
		w, ok := want[p.Name]
		if !ok || p.Err != nil {
			t.Fatalf("built-in %s: %v", p.Name, p.Err)
		}
		tools := strings.Join(p.GrantedTools(), ",")
		if p.Readonly != w.readonly || strings.Contains(tools, "write") != w.write || strings.Contains(tools, "bash") != w.bash {
			t.Errorf("%s: readonly %v tools %s", p.Name, p.Readonly, tools)
		}
		if p.Description == "" || !strings.Contains(p.SystemPrompt, "subagent_finalize") {
			t.Errorf("%s: no description, or its prompt does not ask for subagent_finalize", p.Name)
		}
	}
	for _, name := range []string{"librarian", "oracle", "finder"} {
		if p, _ := (&Set{byName: map[string]*Profile{name: find(list, name)}}).Lookup(name, false); !p.Primary {
			t.Errorf("%s is not primary", name)
		}
	}
}

func find(list []*Profile, name string) *Profile {
	for _, p := range list {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		"---\nname: scout\napproved_tools:\n  - read\n---\nBody",
		"---\nname: r\ntools: read,bash\nmodel: a/b:high\nextraArgs: [--verbose]\n---\n",
		"---\n---\n", "no frontmatter at all", "---\nname: [\n---\n", "---\nname: a\n", "\ufeff---\r\nname: w\r\n---\r\n",
		"---\nname: a\nextraArgs: [\"\"]\ntools: read\n---\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse(src, "fuzz.md", ScopeGlobal)
		if err != nil {
			if !errcode.Is(err, errcode.InvalidInput) {
				t.Fatalf("uncoded error: %v", err)
			}
			return
		}
		if !api.ValidName(p.Name) {
			t.Fatalf("accepted name %q", p.Name)
		}
		_ = p.GrantedTools()
	})
}

// TestDefaultPromptDirs: the sessions contract's prompts/ folders are the ones named in
// $SUBAGENTS_PROMPT_DIRS, then the extension's prompts/ of the source tree
// the binary runs from.
func TestDefaultPromptDirs(t *testing.T) {
	tree := t.TempDir()
	exe := filepath.Join(tree, "bin", "subagents")
	named := filepath.Join(t.TempDir(), "prompts")
	tests := []struct {
		name      string
		list, exe string
		mkPrompts bool
		want      []string
	}{
		{"nothing", "", "", false, nil},
		{"the variable", named, exe, false, []string{named}},
		{"the tree's extension", "", exe, true, []string{filepath.Join(tree, "extension", "prompts")}},
		{"both, once", named + string(os.PathListSeparator) + filepath.Join(tree, "extension", "prompts"), exe, true, []string{named, filepath.Join(tree, "extension", "prompts")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mkPrompts {
				must(t, os.MkdirAll(filepath.Join(tree, "extension", "prompts"), 0o755))
			}
			if got := promptDirs(tt.list, tt.exe); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWatchedChangesWithWhatLoadReads: the paths Watched gives stay as
// they were while nothing Load reads changes, and any change Load would
// see (a file edited, added or removed, a nearer project folder made)
// shows in one of them.
func TestWatchedChangesWithWhatLoadReads(t *testing.T) {
	later := time.Now().Add(time.Hour)
	tests := []struct {
		name   string
		change func(t *testing.T, agentDir, repo string)
	}{
		{"a file edited", func(t *testing.T, agentDir, _ string) {
			p := filepath.Join(agentDir, "agents", "w.md")
			if err := os.WriteFile(p, []byte("---\nname: w\nprimary: true\n---\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, later, later); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file added", func(t *testing.T, _, repo string) {
			writeProfile(t, filepath.Join(repo, ".pi", "agents"), "new", "---\nname: new\n---\n")
			_ = os.Chtimes(filepath.Join(repo, ".pi", "agents"), later, later)
		}},
		{"a folder of profiles made", func(t *testing.T, agentDir, _ string) {
			writeProfile(t, filepath.Join(agentDir, "agent-profiles"), "r", "---\nname: r\n---\n")
		}},
		{"a nearer project folder made", func(t *testing.T, _, repo string) {
			if err := os.MkdirAll(filepath.Join(repo, "sub", ".pi"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agentDir, repo := t.TempDir(), t.TempDir()
			writeProfile(t, filepath.Join(agentDir, "agents"), "w", "---\nname: w\n---\n")
			writeProfile(t, filepath.Join(repo, ".pi", "agents"), "p", "---\nname: p\n---\n")
			if err := os.MkdirAll(filepath.Join(repo, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			opts := Options{AgentDir: agentDir, Cwd: filepath.Join(repo, "sub")}
			before, err := Watched(opts)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := Watched(opts); !reflect.DeepEqual(again, before) {
				t.Fatalf("nothing changed, yet Watched did:\n%v\n%v", before, again)
			}
			tt.change(t, agentDir, repo)
			if after, _ := Watched(opts); reflect.DeepEqual(after, before) {
				t.Fatalf("Watched did not change:\n%v", after)
			}
		})
	}
}
