package profiles

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// letServiceNest lets the service's own check allow callers below depth
// (serviceMaxDepth) for one test.
func letServiceNest(t *testing.T, depth int) {
	old := serviceMaxDepth
	serviceMaxDepth = depth
	t.Cleanup(func() { serviceMaxDepth = old })
}

func TestDepthLimit(t *testing.T) {
	for _, c := range []struct {
		name             string
		settings, worker int
		profile          int
		want             int
	}{
		{"default", 0, 0, 0, DefaultMaxDepth},
		{"settings raise", 4, 0, 0, 4},
		{"worker lowers", 4, 1, 0, 1},
		{"profile lowers", 0, 0, 1, 1},
		{"profile cannot raise", 0, 0, 5, DefaultMaxDepth},
		{"worker cannot raise", 0, 5, 0, DefaultMaxDepth},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := DepthLimit(Config{MaxDepth: c.settings}, c.worker, &Profile{MaxDepth: c.profile}); got != c.want {
				t.Fatalf("DepthLimit = %d, want %d", got, c.want)
			}
		})
	}
}

func TestNestedTools(t *testing.T) {
	letServiceNest(t, 2)
	lister := &Profile{Name: "lead", Tools: []string{"read", "task", "bash", "task", "list_subagent_profiles"}}
	for _, c := range []struct {
		name         string
		p            *Profile
		depth, limit int
		want         []string
	}{
		{"listed, below the limit", lister, 1, 2, []string{"task"}},
		{"at the limit", lister, 2, 2, nil},
		{"beyond what the service lets delegate", lister, 2, 3, nil},
		{"not a child", lister, 0, 2, nil},
		{"not listed", &Profile{Tools: []string{"read"}}, 1, 2, nil},
		{"a blacklist never grants one", &Profile{ExcludeTools: []string{"bash"}}, 1, 2, nil},
		{"noTools", &Profile{NoTools: true, Tools: []string{"task"}}, 1, 2, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.NestedTools(c.depth, c.limit); !slices.Equal(got, c.want) {
				t.Fatalf("NestedTools = %v, want %v", got, c.want)
			}
		})
	}
}

// TestResolveAndAdmitNesting: a profile that lists task keeps it for a
// child below the depth limit, with its other tools; the worker admits
// that run, refuses the same tool one level deeper, refuses a run beyond
// the limit with SUBAGENT_DEPTH_EXCEEDED, and a profile's maxDepth lowers
// the limit.
func TestResolveAndAdmitNesting(t *testing.T) {
	letServiceNest(t, 2)
	agent, cwd := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(agent, "agents"), 0o755))
	must(t, os.WriteFile(filepath.Join(agent, "agents", "lead.md"), []byte("---\nname: lead\ndescription: d\ntools: read, task\n---\nLead.\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(agent, "agents", "only.md"), []byte("---\nname: only\ndescription: d\ntools: task\nmaxDepth: 1\n---\nOnly.\n"), 0o600))
	a := &Activities{AgentDir: agent, DelegationExtension: "/ext/src/nested.ts", ServiceEnv: []string{"SUBAGENTS_TASK_QUEUE=q"}}
	resolve := func(profile string, depth int) api.RunPiInput {
		t.Helper()
		out, err := a.ResolveTasks(t.Context(), ResolveRequest{Depth: depth, Tasks: []ResolveTask{{Profile: profile, Cwd: cwd}}})
		if err != nil || out[0].Error != nil {
			t.Fatalf("resolve %s at %d: %v %+v", profile, depth, err, out[0].Error)
		}
		return out[0].Child
	}
	child := resolve("lead", 1)
	if !slices.Equal(child.Tools, []string{"read", "task"}) || !Nested(child.Tools) || !slices.Equal(child.Extensions, []string{"/ext/src/nested.ts"}) {
		t.Fatalf("depth 1: tools %v, extensions %v", child.Tools, child.Extensions)
	}
	child.SessionID, child.Prompt, child.Depth = "s", "p", 1
	adm, err := a.Admit(child)
	if want := []string{"SUBAGENTS_TASK_QUEUE=q", NestedEnv + "=1", ParentSessionEnv + "=s"}; err != nil || !slices.Equal(adm.Env, want) {
		t.Fatalf("admit depth 1: %+v %v", adm.Env, err)
	}
	// Without the extension the worker found, no child delegates.
	if out, _ := (&Activities{AgentDir: agent}).ResolveTasks(t.Context(), ResolveRequest{Depth: 1, Tasks: []ResolveTask{{Profile: "lead", Cwd: cwd}}}); Nested(out[0].Child.Tools) {
		t.Fatalf("no extension: tools %v", out[0].Child.Tools)
	}
	if deep := resolve("lead", 2); !slices.Equal(deep.Tools, []string{"read"}) || Nested(deep.Tools) || len(deep.Extensions) > 0 {
		t.Fatalf("depth 2: tools %v", deep.Tools)
	}
	if adm, err := a.Admit(api.RunPiInput{SessionID: "s", Prompt: "p", Cwd: cwd, Depth: 2, Profile: "lead", Agent: "lead", Tools: []string{"read"}}); err != nil || adm.Env != nil {
		t.Fatalf("admit depth 2 without task: %+v %v", adm, err)
	}
	child.Depth = 2
	if _, err := a.Admit(child); errcode.CodeOf(err) != errcode.PermissionDenied || !strings.Contains(err.Error(), "nested.ts") {
		t.Fatalf("admit the extension at depth 2: %v", err)
	}
	child.Extensions = nil
	if _, err := a.Admit(child); errcode.CodeOf(err) != errcode.PermissionDenied || !strings.Contains(err.Error(), `tool "task"`) {
		t.Fatalf("admit task at depth 2: %v", err)
	}
	child.Tools, child.Depth = []string{"read"}, 3
	if _, err := a.Admit(child); errcode.CodeOf(err) != errcode.DepthExceeded {
		t.Fatalf("admit depth 3: %v", err)
	}
	// maxDepth 1 in the profile: its child neither delegates nor runs deeper.
	if only := resolve("only", 1); !only.NoTools || Nested(only.Tools) {
		t.Fatalf("only at depth 1: %+v", only)
	}
	if _, err := a.Admit(api.RunPiInput{SessionID: "s", Prompt: "p", Cwd: cwd, Depth: 2, Profile: "only", Agent: "only", NoTools: true}); errcode.CodeOf(err) != errcode.DepthExceeded {
		t.Fatalf("only at depth 2: %v", err)
	}
}

// TestNoNestingWhileTheServiceRefuses: as long as the service's own check
// refuses every child's delegation, no child gets a delegation tool.
func TestNoNestingWhileTheServiceRefuses(t *testing.T) {
	letServiceNest(t, 1)
	p := &Profile{Tools: []string{"task"}}
	if got := p.NestedTools(1, DefaultMaxDepth); got != nil {
		t.Fatalf("NestedTools = %v", got)
	}
}

// TestAdmitGivesANestedChildItsSessionToken: with the nesting key, a child
// that delegates gets the token of its own session, which the service
// checks; a child that does not delegate gets none (nor its session).
func TestAdmitGivesANestedChildItsSessionToken(t *testing.T) {
	letServiceNest(t, 2)
	agent, cwd := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(agent, "agents"), 0o755))
	must(t, os.WriteFile(filepath.Join(agent, "agents", "lead.md"), []byte("---\nname: lead\ndescription: d\ntools: read, task\n---\nLead.\n"), 0o600))
	a := &Activities{AgentDir: agent, DelegationExtension: "/ext/src/nested.ts", NestingKey: "k"}
	out, err := a.ResolveTasks(t.Context(), ResolveRequest{Depth: 1, Tasks: []ResolveTask{{Profile: "lead", Cwd: cwd}}})
	if err != nil || out[0].Error != nil {
		t.Fatalf("resolve: %v %+v", err, out[0].Error)
	}
	child := out[0].Child
	child.SessionID, child.Prompt, child.Depth, child.Cwd = "s1", "p", 1, cwd
	adm, err := a.Admit(child)
	if want := TokenEnv + "=" + connection.SessionToken("k", "s1"); err != nil || !slices.Contains(adm.Env, want) {
		t.Fatalf("a nested child's env %v (%v), want %s", adm.Env, err, want)
	}
	leaf := api.RunPiInput{SessionID: "s2", Prompt: "p", Cwd: cwd, Depth: 2}
	if adm, err := a.Admit(leaf); err != nil || len(adm.Env) != 0 {
		t.Fatalf("a child that does not delegate: %v %v", adm.Env, err)
	}
}

// TestCallerKnobsApplyToTheirTasks: the calling pi's knobs are checked as
// the settings' are, set on its tasks' runs over the files', and the
// worker's own environment never supplies them.
func TestCallerKnobsApplyToTheirTasks(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if k, err := CallerKnobs(env(nil)); k != nil || err != nil {
		t.Fatalf("none set: %+v %v", k, err)
	}
	k, err := CallerKnobs(env(map[string]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS": "500000", "OHM_SUBAGENTS_TASK_MAX_EVENTS": "3"}))
	if err != nil || k.OutputMaxChars != MaxOutputChars || k.TaskMaxEvents == nil || *k.TaskMaxEvents != 3 {
		t.Fatalf("knobs: %+v %v", k, err)
	}
	if _, err := CallerKnobs(env(map[string]string{"OHM_SUBAGENTS_TASK_MAX_EVENTS": "many"})); errcode.CodeOf(err) != errcode.InvalidInput || !strings.Contains(err.Error(), "OHM_SUBAGENTS_TASK_MAX_EVENTS") {
		t.Fatalf("a bad knob: %v", err)
	}
	if got := WithoutCallerKnobs(env(map[string]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS": "9", "SUBAGENTS_MAX_DEPTH": "1"})); got("OHM_SUBAGENTS_OUTPUT_MAX_CHARS") != "" || got("SUBAGENTS_MAX_DEPTH") != "1" {
		t.Fatal("the worker's view of its environment")
	}

	cwd := t.TempDir()
	a := &Activities{AgentDir: t.TempDir()}
	out, err := a.ResolveTasks(t.Context(), ResolveRequest{Depth: 1, Knobs: k, Tasks: []ResolveTask{{Cwd: cwd}}})
	if err != nil || out[0].Error != nil || out[0].Child.OutputMaxChars != MaxOutputChars || *out[0].Child.MaxEvents != 3 {
		t.Fatalf("resolved with knobs: %+v %v", out[0], err)
	}
	in := api.RunPiInput{SessionID: "s", Prompt: "p", Cwd: cwd, Depth: 1, OutputMaxChars: 7 * MaxOutputChars}
	if adm, err := a.Admit(in); err != nil || adm.OutputMaxChars != MaxOutputChars {
		t.Fatalf("a run's own cap is bounded: %+v %v", adm, err)
	}
}
