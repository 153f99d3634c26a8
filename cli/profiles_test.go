package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/profiles"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, after replacing root (a temp dir)
// with $ROOT; -update rewrites the file.
func golden(t *testing.T, name, root, got string) {
	t.Helper()
	got = strings.ReplaceAll(got, root, "$ROOT")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./client -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestProfilesCommandGolden(t *testing.T) {
	root := t.TempDir()
	agentDir := filepath.Join(root, "agent")
	project := filepath.Join(root, "repo")
	write := func(dir, name, src string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(agentDir, "agent-profiles"), "code-reviewer.md",
		"---\nname: code-reviewer\ndescription: Strict reviews\nmodel: anthropic/claude-sonnet-4-5:high\ntools: read,grep\napiKey: sk-never-listed-0123456789\n---\nYou review.\n")
	write(filepath.Join(project, ".pi", "agents"), "scout.md", "---\nname: scout\ndescription: Project scout\nreadonly: true\nfinalize: false\n---\nLook around.\n")
	write(filepath.Join(project, ".pi", "agents"), "broken.md", "---\nname: broken\napproved_tools: [read]\ndenied_tools: [bash]\n---\n")
	write(filepath.Join(project, ".pi", "agents"), "hidden.md", "---\nname: hidden\ninternal: true\n---\n")
	// A misspelt field: named, with the field it likely is.
	write(filepath.Join(project, ".pi", "agents"), "misspelt.md", "---\nname: misspelt\ndescripton: Reviews\n---\nYou review.\n")
	// Saved plans, listed after the profiles: a global one with arguments,
	// a project one with a gate in a project nobody trusts, a project one
	// the global one shadows, and a broken one.
	write(filepath.Join(agentDir, "plans"), "review.yaml",
		"description: Scout, then review\nargs:\n  target: {description: what to review, required: true}\n  depth: {default: \"2\"}\n  focus: {}\nsteps:\n  - key: scout\n    agent: scout\n    task: Look at {args.target}\n  - key: review\n    agent: reviewer\n    task: Review {steps.scout.output} ({args.depth}, {args.focus})\n")
	write(filepath.Join(project, ".pi", "plans"), "fix.yaml", "description: Fix until the tests pass\nsteps:\n  - {agent: implementer, task: Fix it, gate: {command: go test ./...}}\n")
	write(filepath.Join(project, ".pi", "plans"), "review.yml", "steps:\n  - {agent: task, task: something else}\n")
	write(filepath.Join(project, ".pi", "plans"), "broken.yaml", "steps:\n  - {agent: task, tsak: typo}\n")
	t.Setenv("PI_CODING_AGENT_DIR", agentDir)
	t.Setenv("SUBAGENTS_TRUSTED_PROJECTS", "")

	tests := []struct {
		golden string
		args   []string
	}{
		{"profiles.txt", []string{"--cwd", project}},
		{"profiles.json", []string{"--cwd", project, "--json"}},
		{"profiles-internal.txt", []string{"--cwd", project, "--internal"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := profilesMain(tt.args, &out, &errOut); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.String(), "sk-never-listed") {
				t.Fatal("an apiKey was listed")
			}
			golden(t, tt.golden, root, out.String())
		})
	}
}

// TestProfilesCommandFailures: under --json a failure of `subagents
// profiles` is an envelope with its code, as for every other verb; without
// it, the error alone.
func TestProfilesCommandFailures(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		wantEnvelope bool
	}{
		{"--json", []string{"--json", "--bogus"}, true},
		{"text", []string{"--bogus"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := profilesMain(tt.args, &out, &errOut)
			if err == nil {
				t.Fatal("an unknown flag was accepted")
			}
			envelope := strings.Contains(out.String(), `"code": "INVALID_INPUT"`) && strings.Contains(out.String(), `"op": "profiles"`)
			if envelope != tt.wantEnvelope {
				t.Fatalf("envelope on stdout: %v, want %v:\n%s", envelope, tt.wantEnvelope, out.String())
			}
		})
	}
}

// TestPlanLine: a saved plan's line in the text listing says its scope,
// steps, arguments (required or with their default), gates, and why it
// cannot be used when it cannot.
func TestPlanLine(t *testing.T) {
	tests := []struct {
		name string
		plan profiles.PlanInfo
		want string
	}{
		{"plain", profiles.PlanInfo{Name: "p", Scope: profiles.ScopeGlobal, Steps: 3},
			"p (plan, global) · steps: 3"},
		{"args and a description", profiles.PlanInfo{Name: "p", Scope: profiles.ScopeGlobal, Steps: 2, Description: "Does it",
			Args: map[string]api.PlanArg{"b": {Default: "x"}, "a": {Required: true}, "c": {}}},
			"p (plan, global) · steps: 2 · args: a (required), b=x, c — Does it"},
		{"gates", profiles.PlanInfo{Name: "p", Scope: profiles.ScopeGlobal, Steps: 1, Gates: true},
			"p (plan, global) · steps: 1 · gates"},
		{"gates refused", profiles.PlanInfo{Name: "p", Scope: profiles.ScopeProject, Steps: 1, Gates: true, GatesRefused: true},
			"p (plan, project) · steps: 1 · gates: refused until the project is trusted (/trust in pi, or trustedProjects)"},
		{"shadowed", profiles.PlanInfo{Name: "p", Scope: profiles.ScopeProject, Steps: 1, ShadowedBy: "/a/plans/p.yaml"},
			"p (plan, project) — not used: the global plan /a/plans/p.yaml has its name, and a project plan never replaces a global one"},
		{"broken", profiles.PlanInfo{Name: "p", Scope: profiles.ScopeProject, Error: "plan file x: line 2: unknown field"},
			"p (plan, project) — error: plan file x: line 2: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planLine(tt.plan); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestProfilesWatchesPlans: with --watched the listing depends on the
// plans folders too, so that a new plan file is seen.
func TestProfilesWatchesPlans(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "repo")
	if err := os.MkdirAll(filepath.Join(project, ".pi"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PI_CODING_AGENT_DIR", filepath.Join(root, "agent"))
	var out, errOut bytes.Buffer
	if err := profilesMain([]string{"--cwd", project, "--json", "--watched"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var listing struct {
		Watched []struct {
			Path string `json:"path"`
		} `json:"watched"`
		Plans []any `json:"plans"`
	}
	if err := json.Unmarshal(out.Bytes(), &listing); err != nil {
		t.Fatal(err)
	}
	if listing.Plans == nil {
		t.Error("no plans key: a listing without plans has \"plans\": []")
	}
	want := map[string]bool{filepath.Join(root, "agent", "plans"): false, filepath.Join(project, ".pi", "plans"): false}
	for _, w := range listing.Watched {
		if _, ok := want[w.Path]; ok {
			want[w.Path] = true
		}
	}
	for p, seen := range want {
		if !seen {
			t.Errorf("%s is not watched:\n%s", p, out.String())
		}
	}
}
