package doctor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/profiles"
)

// write puts files (path relative to root: content) under root.
func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// piTrusts saves root as trusted in agentDir's trust.json, as pi's /trust
// does: the folder is the user's own project.
func piTrusts(t *testing.T, agentDir, root string) {
	t.Helper()
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]bool{real: true})
	if err := os.WriteFile(filepath.Join(agentDir, profiles.PiTrustFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A project profile that adds power in a folder the user has not
// trusted is refused: a warning saying how to trust it, not a broken file.
func TestCheckProfilesUntrusted(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{".pi/agents/mine.md": "---\nname: mine\ndescription: x\n---\nDo it.\n"})
	set, err := profiles.Load(profiles.Options{Cwd: root, AgentDir: filepath.Join(root, "agent"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	r := checkProfiles(set.List(true), nil, os.ReadFile)
	if r.Status != Warn || !strings.Contains(r.Verdict, "1 project profiles add code or power") || !strings.Contains(r.Verdict, filepath.Join(root, ".pi", "agents", "mine.md")) ||
		!strings.Contains(r.Fix, "/trust") {
		t.Fatalf("%+v", r)
	}
}

func TestCheckProfiles(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		status Status
		has    []string
	}{
		{"the built-ins", nil, OK, []string{"profiles read and valid"}},
		{"a good one", map[string]string{".pi/agents/mine.md": "---\nname: mine\ndescription: x\n---\nDo it.\n"}, OK, []string{"profiles read and valid"}},
		{"an unknown field", map[string]string{".pi/agents/bad.md": "---\nname: bad\n\ncolour: red\n---\nx\n"}, Fail,
			[]string{"1 of", "profiles cannot be used", ".pi/agents/bad.md:4: frontmatter: unknown field \"colour\" (docs/profiles.md lists the fields)"}},
		{"a misspelt field", map[string]string{".pi/agents/bad.md": "---\nname: bad\ndescripton: reviews\n---\nx\n"}, Fail,
			[]string{".pi/agents/bad.md:3: frontmatter: unknown field \"descripton\": did you mean \"description\"?"}},
		{"two bad", map[string]string{
			".pi/agents/a.md": "---\nname: a\nthinkingLevel: loud\n---\n",
			".pi/agents/b.md": "---\ndescription: no name\n---\n",
		}, Fail, []string{"2 of", "a.md:3: thinkingLevel", "b.md:1: name is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tt.files)
			piTrusts(t, filepath.Join(root, "agent"), root)
			set, err := profiles.Load(profiles.Options{Cwd: root, AgentDir: filepath.Join(root, "agent")})
			if err != nil {
				t.Fatal(err)
			}
			r := checkProfiles(set.List(true), nil, os.ReadFile)
			if r.Status != tt.status {
				t.Fatalf("%+v", r)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Verdict, h) {
					t.Errorf("verdict %q lacks %q", r.Verdict, h)
				}
			}
			if r.Status == Fail {
				errs := r.Details["errors"].([]FileError)
				if len(errs) == 0 || errs[0].Line == 0 || !strings.Contains(r.Fix, "docs/profiles.md") {
					t.Fatalf("%+v", r)
				}
			}
		})
	}
}

func TestCheckPlans(t *testing.T) {
	const good = "steps:\n  - key: a\n    agent: scout\n    task: look\n"
	tests := []struct {
		name   string
		files  map[string]string
		status Status
		has    string
		lines  []int
	}{
		{"none", nil, OK, "0 saved plans", nil},
		{"a good one", map[string]string{".pi/plans/look.yaml": good}, OK, "1 saved plans read and valid", nil},
		{"an unknown field", map[string]string{".pi/plans/bad.yaml": good + "    colour: red\n"}, Fail, "bad.yaml:5: unknown field \"colour\"", []int{5}},
		{"bad YAML", map[string]string{".pi/plans/torn.yaml": "steps:\n  - key: a\n    agent: scout\n    task: look\n      extra: x\n"}, Fail, "torn.yaml:5: mapping values are not allowed", []int{5}},
		{"gates in an untrusted project", map[string]string{".pi/plans/gated.yaml": good + "    gate: {command: make test}\n"}, Warn, "not trusted to run", nil},
		// A run refuses a step whose agent is no profile (UNKNOWN_AGENT):
		// the step is named at its agent's line, in a group too.
		{"an unknown agent", map[string]string{".pi/plans/typo.yaml": "steps:\n  - key: a\n    agent: scout\n    task: look\n" +
			"  - parallel:\n      - key: b\n        task: check\n        agent: nosuchagent\n"}, Fail,
			`typo.yaml:8: step "b": Unknown profile: "nosuchagent". Available profiles: `, []int{8}},
		{"an unknown agent in JSON", map[string]string{".pi/plans/j.json": "{\"steps\": [\n  {\"key\": \"a\", \"task\": \"x\",\n   \"agent\": \"ghost\"}\n]}\n"}, Fail,
			`j.json:3: step "a": Unknown profile: "ghost"`, []int{3}},
		{"the folder's own profile", map[string]string{".pi/plans/mine.yaml": "steps:\n  - {key: a, agent: mine, task: x}\n",
			".pi/agents/mine.md": "---\nname: mine\ndescription: x\n---\nDo it.\n"}, OK, "1 saved plans read and valid", nil},
		{"a step in another folder", map[string]string{".pi/plans/sub.yaml": "steps:\n  - {key: a, agent: mine, task: x, cwd: sub}\n",
			"sub/.pi/agents/mine.md": "---\nname: mine\ndescription: x\n---\nDo it.\n"}, OK, "1 saved plans read and valid", nil},
		{"a disabled agent", map[string]string{".pi/plans/off.yaml": "steps:\n  - key: a\n    agent: scout\n    task: x\n",
			".pi/subagents.json": `{"subagents": {"scout": {"disabled": true}}}`}, Fail, `off.yaml:3: step "a": Subagent "scout" is disabled`, []int{3}},
		{"a continued step runs as its agent", map[string]string{".pi/plans/more.yaml": good + "  - {key: b, continue: a, task: more}\n"}, OK, "1 saved plans", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tt.files)
			agent := filepath.Join(root, "agent")
			for f := range tt.files {
				if strings.Contains(f, ".pi/agents/") {
					// A folder with profiles of its own here is the user's
					// own project, trusted: the plan's steps use them.
					piTrusts(t, agent, root)
				}
			}
			opts := profiles.Options{Cwd: root, AgentDir: agent}
			plans, err := profiles.ListPlans(opts)
			r := checkPlans(plans, err, agent, root, profileLookup(opts, func(string) string { return "" }))
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) {
				t.Fatalf("%+v", r)
			}
			if r.Status == Warn && !strings.Contains(r.Fix, "trustedProjects") {
				t.Fatalf("fix %q", r.Fix)
			}
			if r.Status == Fail {
				var lines []int
				for _, e := range r.Details["errors"].([]FileError) {
					lines = append(lines, e.Line)
				}
				if !slices.Equal(lines, tt.lines) {
					t.Fatalf("lines %v, want %v", lines, tt.lines)
				}
			}
		})
	}
}
