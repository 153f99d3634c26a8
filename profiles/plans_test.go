package profiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// writePlan writes a plan file (and its folders) and returns its path.
func writePlan(t *testing.T, dir, name, src string) string {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, name)
	must(t, os.WriteFile(p, []byte(src), 0o644))
	return p
}

const (
	reviewYAML = `# scout, then review
description: Scout then review
args:
  target: {description: what to look at, required: true}
  depth: {default: "2"}
steps:
  - key: scout
    agent: scout
    task: Look at {args.target}, {args.depth} levels deep
  - key: review
    agent: reviewer
    task: "Review: {steps.scout.output}"
`
	gatedYAML = `steps:
  - key: write
    agent: implementer
    task: Write it
    gate: {command: "go test ./..."}
`
)

// TestReadPlanFile: a plan file is YAML (or JSON for .json) with the JSON
// field names of a plan and no others, named by its file, and checked
// whole; an error names the file and, where the parser knows it, the
// line.
func TestReadPlanFile(t *testing.T) {
	tests := []struct {
		name, file, src string
		want            []string // in the error; none: it reads
		check           func(t *testing.T, p api.Plan)
	}{
		{name: "YAML", file: "review.yaml", src: reviewYAML, check: func(t *testing.T, p api.Plan) {
			if p.Name != "review" || p.Description != "Scout then review" || len(p.Steps) != 2 || p.Steps[1].Task != "Review: {steps.scout.output}" {
				t.Fatalf("%+v", p)
			}
			if a := p.Args["target"]; !a.Required || a.Description != "what to look at" || p.Args["depth"].Default != "2" {
				t.Fatalf("args %+v", p.Args)
			}
		}},
		{name: ".yml with its own name", file: "fix.yml", src: "name: fix\nsteps:\n  - {agent: task, task: Fix it}\n", check: func(t *testing.T, p api.Plan) {
			if p.Name != "fix" || p.Steps[0].Agent != "task" {
				t.Fatalf("%+v", p)
			}
		}},
		{name: "JSON", file: "fix.json", src: `{"steps": [{"agent": "task", "task": "Fix it", "gate": {"command": "make test", "timeout": 60}}]}`, check: func(t *testing.T, p api.Plan) {
			if p.Name != "fix" || p.Steps[0].Gate == nil || p.Steps[0].Gate.Timeout != 60 {
				t.Fatalf("%+v", p)
			}
		}},
		{name: "a loop", file: "loop.yaml", src: "steps:\n  - key: fixes\n    loop: {max: 3, until: {step: check, verdict: clean}}\n    steps:\n      - {key: check, agent: reviewer, task: Review, verdicts: [clean, changes]}\n", check: func(t *testing.T, p api.Plan) {
			if l := p.Steps[0].Loop; l == nil || l.Max != 3 || l.Until.Verdict != "clean" {
				t.Fatalf("%+v", p.Steps[0])
			}
		}},
		{name: "an unknown field, with its line", file: "typo.yaml", src: "steps:\n  - key: lanes\n    paralel:\n      - {agent: task, task: a}\n",
			want: []string{"typo.yaml: line 3: unknown field \"paralel\""}},
		{name: "a value of the wrong type, with its line", file: "types.yaml", src: "steps:\n  - agent: task\n    task: a\n    timeout: 60\n  - agent: task\n    task: b\n    timeout: soon\n",
			want: []string{"types.yaml: line 7: steps.timeout must be a whole number, not text"}},
		{name: "a list where a mapping goes", file: "gate.json", src: "{\"steps\": [\n  {\"agent\": \"task\", \"task\": \"a\",\n   \"gate\": [\"make\"]}]}\n",
			want: []string{"gate.json: line 3: steps.gate must be a mapping, not a list"}},
		{name: "a YAML spelling of a field is not a field", file: "snake.yaml", src: "steps:\n  - {agent: task, task: a, gate: {command: x, time_out: 5}}\n",
			want: []string{"line 2: unknown field \"time_out\""}},
		{name: "bad YAML, with its line", file: "bad.yaml", src: "description: x\nsteps:\n  - agent: task\n    task: a: b\n",
			want: []string{"bad.yaml: line 4: mapping values are not allowed in this context"}},
		{name: "a key twice", file: "twice.yaml", src: "steps:\n  - agent: task\n    task: a\n    task: b\n",
			want: []string{"line 4: mapping key \"task\" already defined at line 3"}},
		{name: "a name that is not the file's", file: "review.yaml", src: "description: x\nname: other\nsteps:\n  - {agent: task, task: a}\n",
			want: []string{"review.yaml: line 2: name \"other\" is not the file's name \"review\""}},
		{name: "a step that fails the plan's checks, with its line", file: "check.yaml", src: "steps:\n  - {key: a, agent: task, task: x}\n  - key: b\n    agent: task\n    task: \"{steps.c.output}\"\n",
			want: []string{"check.yaml: line 3: step \"b\": refers to step \"c\", which the plan does not have"}},
		{name: "no steps", file: "empty-steps.yaml", src: "description: nothing\n", want: []string{"empty-steps.yaml: steps must hold at least one step"}},
		{name: "an empty file", file: "empty.yaml", src: "", want: []string{"empty.yaml: the file is empty"}},
		{name: "not a mapping", file: "list.yaml", src: "- agent: task\n  task: a\n", want: []string{"line 1: a plan is a mapping", "not a list"}},
		{name: "two documents", file: "two.yaml", src: "steps:\n  - {agent: task, task: a}\n---\nsteps: []\n", want: []string{"line 3: a plan file holds one YAML document; this is a second"}},
		{name: "bad JSON, with its line", file: "bad.json", src: "{\"steps\": [\n  {\"agent\": \"task\",}\n]}\n", want: []string{"bad.json: line 2: invalid character '}'"}},
		{name: "an unknown JSON field, with its line", file: "typo.json", src: "{\"steps\": [\n  {\"agent\": \"task\", \"task\": \"a\"}\n],\n\"budjet\": {}}\n",
			want: []string{"typo.json: line 4: unknown field \"budjet\""}},
		{name: "too large", file: "big.yaml", src: "description: " + strings.Repeat("x", api.MaxPlanBytes) + "\nsteps: []\n", want: []string{"a plan is at most 64 KiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writePlan(t, t.TempDir(), tt.file, tt.src)
			p, err := ReadPlanFile(path)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, p)
				return
			}
			if !errcode.Is(err, errcode.InvalidInput) {
				t.Fatalf("err = %v, want INVALID_INPUT", err)
			}
			if !strings.HasPrefix(err.Error(), "plan file "+path+": ") {
				t.Errorf("the error does not name the file first: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
}

// planTree is a pi config dir and a project with plan files.
type planTree struct {
	agentDir, project string
}

func newPlanTree(t *testing.T) planTree {
	t.Helper()
	// FindPlan reads the service's environment: none of the tester's.
	t.Setenv("SUBAGENTS_TRUSTED_PROJECTS", "")
	t.Setenv("SUBAGENTS_TRUST_GROUP", "")
	root := t.TempDir()
	tr := planTree{agentDir: filepath.Join(root, "agent"), project: filepath.Join(root, "repo")}
	must(t, os.MkdirAll(filepath.Join(tr.project, "src"), 0o755))
	must(t, os.MkdirAll(filepath.Join(tr.project, ".pi"), 0o755))
	must(t, os.MkdirAll(tr.agentDir, 0o755))
	return tr
}

func (tr planTree) global(t *testing.T, file, src string) string {
	return writePlan(t, filepath.Join(tr.agentDir, PlansDir), file, src)
}

func (tr planTree) local(t *testing.T, file, src string) string {
	return writePlan(t, filepath.Join(tr.project, ".pi", PlansDir), file, src)
}

func (tr planTree) settings(t *testing.T, src string) {
	must(t, os.WriteFile(filepath.Join(tr.agentDir, ConfigFile), []byte(src), 0o600))
}

func (tr planTree) opts() Options {
	// From a folder below the project's root, as a task's cwd often is.
	return Options{Cwd: filepath.Join(tr.project, "src"), AgentDir: tr.agentDir}
}

// TestFindPlan: a saved plan is found by name in pi's config dir, else in
// the project's; a project file never replaces a global one; a project
// plan's gates run only in a project the user's global settings or
// environment trust; a file another user could change is refused.
func TestFindPlan(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, tr planTree)
		plan  string
		code  errcode.Code // "": found
		want  []string     // in the error
		scope Scope        // of the plan found
		check func(t *testing.T, tr planTree, p api.Plan, src api.PlanSource)
	}{
		{name: "global", plan: "review", scope: ScopeGlobal, setup: func(t *testing.T, tr planTree) {
			tr.global(t, "review.yaml", reviewYAML)
		}, check: func(t *testing.T, tr planTree, p api.Plan, src api.PlanSource) {
			if p.Name != "review" || src.Name != "review" || src.File != filepath.Join(tr.agentDir, "plans", "review.yaml") {
				t.Fatalf("%+v %+v", p, src)
			}
		}},
		{name: "project", plan: "review", scope: ScopeProject, setup: func(t *testing.T, tr planTree) {
			tr.local(t, "review.json", `{"steps": [{"agent": "task", "task": "a"}]}`)
		}, check: func(t *testing.T, tr planTree, p api.Plan, src api.PlanSource) {
			if src.File != filepath.Join(tr.project, ".pi", "plans", "review.json") {
				t.Fatalf("%+v", src)
			}
		}},
		{name: "a project plan does not replace a global one", plan: "review", scope: ScopeGlobal, setup: func(t *testing.T, tr planTree) {
			tr.global(t, "review.yaml", reviewYAML)
			tr.local(t, "review.yaml", "description: the project's\nsteps:\n  - {agent: task, task: rm -rf it}\n")
		}, check: func(t *testing.T, tr planTree, p api.Plan, src api.PlanSource) {
			if p.Description != "Scout then review" {
				t.Fatalf("the project's plan ran: %+v", p)
			}
		}},
		{name: "unknown", plan: "reveiw", code: errcode.InvalidInput, setup: func(t *testing.T, tr planTree) {
			tr.global(t, "review.yaml", reviewYAML)
			tr.local(t, "review.yaml", reviewYAML)
			tr.local(t, "fix.yaml", gatedYAML)
		}, want: []string{`Unknown plan: "reveiw". Available plans: fix, review (saved plans are NAME.yaml, .yml or .json in `, "$AGENT/plans and $PROJECT/.pi/plans)"}},
		{name: "none at all", plan: "x", code: errcode.InvalidInput, setup: func(t *testing.T, tr planTree) {}, want: []string{"Available plans: (none)"}},
		{name: "not a name", plan: "../x", code: errcode.InvalidInput, setup: func(t *testing.T, tr planTree) {}, want: []string{`plan "../x" is not valid`}},
		{name: "two files of one name", plan: "fix", code: errcode.InvalidInput, setup: func(t *testing.T, tr planTree) {
			tr.global(t, "fix.yaml", gatedYAML)
			tr.global(t, "fix.json", `{"steps": [{"agent": "task", "task": "a"}]}`)
		}, want: []string{`plan "fix": fix.yaml and fix.json are all plan files of that name`, "keep one"}},
		{name: "a malformed file", plan: "fix", code: errcode.InvalidInput, setup: func(t *testing.T, tr planTree) {
			tr.local(t, "fix.yaml", "stepz: []\n")
		}, want: []string{"fix.yaml: line 1: unknown field \"stepz\""}},
		{name: "a project's gates in a project nobody trusts", plan: "fix", code: errcode.PermissionDenied, setup: func(t *testing.T, tr planTree) {
			tr.local(t, "fix.yaml", gatedYAML)
		}, want: []string{`Permission denied: plan "fix" is the project's`, `step "write" runs a gate command (go test ./...)`,
			`"trustedProjects" under "subagents" in $AGENT/subagents.json`, `{"subagents": {"trustedProjects": ["$PROJECT"]}}`, "SUBAGENTS_TRUSTED_PROJECTS"}},
		{name: "a project's settings cannot trust the project", plan: "fix", code: errcode.PermissionDenied, setup: func(t *testing.T, tr planTree) {
			tr.local(t, "fix.yaml", gatedYAML)
			must(t, os.WriteFile(filepath.Join(tr.project, ".pi", ConfigFile), []byte(`{"subagents":{"trustedProjects":["`+tr.project+`"]}}`), 0o600))
		}, want: []string{"trustedProjects"}},
		{name: "another project is trusted, not this one", plan: "fix", code: errcode.PermissionDenied, setup: func(t *testing.T, tr planTree) {
			tr.local(t, "fix.yaml", gatedYAML)
			tr.settings(t, `{"subagents":{"trustedProjects":["`+tr.project+`-other"]}}`)
		}, want: []string{"is not trusted"}},
		{name: "a project's gates in a project the settings trust", plan: "fix", scope: ScopeProject, setup: func(t *testing.T, tr planTree) {
			tr.local(t, "fix.yaml", gatedYAML)
			tr.settings(t, `{"subagents":{"trustedProjects":["`+tr.project+`"]}}`)
		}, check: func(t *testing.T, tr planTree, p api.Plan, _ api.PlanSource) {
			if p.Steps[0].Gate == nil || p.Steps[0].Gate.Command != "go test ./..." {
				t.Fatalf("%+v", p.Steps[0])
			}
		}},
		{name: "a project's gates in a project the environment trusts", plan: "fix", scope: ScopeProject, setup: func(t *testing.T, tr planTree) {
			tr.local(t, "fix.yaml", gatedYAML)
			t.Setenv("SUBAGENTS_TRUSTED_PROJECTS", "/elsewhere:"+filepath.Dir(tr.project))
		}},
		{name: "a project plan without gates needs no trust", plan: "review", scope: ScopeProject, setup: func(t *testing.T, tr planTree) {
			tr.local(t, "review.yaml", reviewYAML)
		}},
		{name: "a global plan's gates are the user's own", plan: "fix", scope: ScopeGlobal, setup: func(t *testing.T, tr planTree) {
			tr.global(t, "fix.yaml", gatedYAML)
		}},
		{name: "a plan file any user may change", plan: "review", code: errcode.PermissionDenied, setup: func(t *testing.T, tr planTree) {
			chmodT(t, tr.local(t, "review.yaml", reviewYAML), 0o666)
		}, want: []string{`Permission denied: plan "review": `, "review.yaml can be changed by any user (mode 0666)", "chmod o-w"}},
		{name: "a plans folder any user may change", plan: "review", code: errcode.PermissionDenied, setup: func(t *testing.T, tr planTree) {
			chmodT(t, filepath.Dir(tr.global(t, "review.yaml", reviewYAML)), 0o777)
		}, want: []string{"$AGENT/plans can be changed by any user"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newPlanTree(t)
			tt.setup(t, tr)
			p, src, err := FindPlan(tr.opts(), tt.plan)
			if tt.code != "" {
				if !errcode.Is(err, tt.code) {
					t.Fatalf("err = %v, want %s", err, tt.code)
				}
				msg := strings.ReplaceAll(strings.ReplaceAll(err.Error(), tr.agentDir, "$AGENT"), tr.project, "$PROJECT")
				for _, w := range tt.want {
					if !strings.Contains(msg, w) {
						t.Errorf("the error does not say %q: %v", w, msg)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.Scope != string(tt.scope) || src.Name != tt.plan || p.Name != tt.plan {
				t.Fatalf("found %+v (%s), want scope %s", src, p.Name, tt.scope)
			}
			if tt.check != nil {
				tt.check(t, tr, p, src)
			}
		})
	}
}

// TestFindPlanRefusesAGroupWritableFile: a plan file a group may change is
// refused as a profile file is, unless that group is trusted (the user's
// private group, or trustGroup).
func TestFindPlanRefusesAGroupWritableFile(t *testing.T) {
	tr := newPlanTree(t)
	path := tr.global(t, "review.yaml", reviewYAML)
	chmodT(t, path, 0o664)
	policy := newTrustPolicy(Config{}, tr.agentDir)
	// No group trusted: the tester's own private group would be.
	policy.groups = map[uint32]string{}
	_, _, err := findPlan(tr.opts(), Config{}, policy, "review")
	if !errcode.Is(err, errcode.PermissionDenied) {
		t.Fatalf("err = %v, want PERMISSION_DENIED", err)
	}
	for _, w := range []string{`plan "review": `, "review.yaml can be changed by group", "(mode 0664)", "chmod g-w", `"trustGroup"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
	policy.groups = map[uint32]string{groupOf(t, path): "team"}
	if _, _, err := findPlan(tr.opts(), Config{}, policy, "review"); err != nil {
		t.Fatalf("a file of the trusted group was refused: %v", err)
	}
}

// TestListPlans: every plan file is listed by name, the global one before
// a project one of the same name (which is marked shadowed), a broken one
// with its error, and a project plan's gates as refused until the project
// is trusted.
func TestListPlans(t *testing.T) {
	tr := newPlanTree(t)
	tr.global(t, "review.yaml", reviewYAML)
	tr.local(t, "review.yml", reviewYAML)
	tr.local(t, "fix.yaml", gatedYAML)
	tr.local(t, "broken.json", `{"steps": 3}`)
	tr.local(t, "notes.txt", "not a plan")
	got, err := ListPlans(tr.opts())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name   string
		scope  Scope
		shadow bool
		gates  bool
		refuse bool
		err    string
	}
	want := []row{
		{name: "broken", scope: ScopeProject, err: "broken.json: line 1: steps must be a list, not a number"},
		{name: "fix", scope: ScopeProject, gates: true, refuse: true},
		{name: "review", scope: ScopeGlobal},
		{name: "review", scope: ScopeProject, shadow: true},
	}
	if len(got) != len(want) {
		t.Fatalf("listed %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Scope != w.scope || (g.ShadowedBy != "") != w.shadow || g.Gates != w.gates || g.GatesRefused != w.refuse ||
			(w.err == "") != (g.Error == "") || !strings.Contains(g.Error, w.err) {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	if r := got[2]; r.Description != "Scout then review" || r.Steps != 2 || !r.Args["target"].Required || r.File != filepath.Join(tr.agentDir, "plans", "review.yaml") {
		t.Errorf("review: %+v", r)
	}
	if got[3].ShadowedBy != got[2].File {
		t.Errorf("shadowed by %q, want %q", got[3].ShadowedBy, got[2].File)
	}

	tr.settings(t, `{"subagents":{"trustedProjects":["`+tr.project+`"]}}`)
	if got, err = ListPlans(tr.opts()); err != nil || got[1].GatesRefused {
		t.Fatalf("a trusted project's gates: %+v, %v", got[1], err)
	}

	// Settings that do not read hide no plan from the listing; FindPlan
	// says what is wrong with them.
	tr.settings(t, `{"subagents":{"trustedProjects":"relative"}}`)
	if got, err = ListPlans(tr.opts()); err != nil || len(got) != 4 || !got[1].GatesRefused {
		t.Fatalf("with broken settings: %+v, %v", got, err)
	}
	if _, _, err := FindPlan(tr.opts(), "review"); !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), ConfigFile+": subagents.trustedProjects") {
		t.Fatalf("FindPlan with broken settings: %v", err)
	}

	watched, err := PlansWatched(tr.opts())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, w := range watched {
		paths = append(paths, w.Path)
	}
	for _, p := range []string{filepath.Join(tr.agentDir, "plans"), filepath.Join(tr.project, ".pi", "plans", "fix.yaml")} {
		if !strings.Contains(strings.Join(paths, "\n"), p) {
			t.Errorf("%s is not watched: %q", p, paths)
		}
	}
}
