package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareScheduled: each fire prepares its work as a start would at
// that moment: the settings and the saved plan as they are then.
func TestPrepareScheduled(t *testing.T) {
	agentDir, project := t.TempDir(), t.TempDir()
	// The settings say 2 tasks at once; a saved global plan "review" takes
	// an argument; the project has a plan whose gate needs trust.
	writeFile(t, filepath.Join(agentDir, "subagents.json"), `{"subagents": {"taskMaxConcurrency": 2}}`)
	writeFile(t, filepath.Join(agentDir, "plans", "review.yaml"), "description: Review a file\nargs:\n  file: {default: main.go}\nsteps:\n  - task: Review {args.file}\n")
	writeFile(t, filepath.Join(project, ".pi", "plans", "gated.yaml"), "steps:\n  - task: Fix it\n    gate: {command: make test}\n")
	// A folder anyone may change, beside the project: a step naming it
	// (absolute, or ../open from the plan's folder) would run there.
	open := filepath.Join(filepath.Dir(project), "open")
	if err := os.MkdirAll(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(project, ".pi", "plans", "elsewhere.yaml"), "steps:\n  - task: Look\n  - task: Look there\n    cwd: ../open\n")
	task := func(name string) api.TaskSpec {
		return api.TaskSpec{Name: name, Prompt: "look at " + name, Cwd: project}
	}
	n := 0
	s := &Scheduling{AgentDir: agentDir, NewID: func() string { n++; return fmt.Sprintf("00000000-0000-7000-8000-%012d", n) }}
	tests := []struct {
		name  string
		in    api.ScheduledInput
		check func(t *testing.T, p api.ScheduledPrepared)
		code  errcode.Code
	}{
		{name: "tasks: new sessions, the settings' concurrency, the fire's ID",
			in: api.ScheduledInput{Delegation: &api.DelegationInput{Tasks: []api.TaskSpec{task("a"), task("b")}}},
			check: func(t *testing.T, p api.ScheduledPrepared) {
				d := p.Delegation
				if d == nil || len(d.SessionIDs) != 2 || d.SessionIDs[0] == d.SessionIDs[1] || d.MaxConcurrency != 2 {
					t.Fatalf("delegation = %+v", d)
				}
				if p.ChildID != "delegation-nightly-2026-11-26T102531Z" || d.ParentSessionID != "schedule:nightly" || d.Version != api.CurrentVersion || d.Deliver {
					t.Fatalf("child %q, delegation %+v", p.ChildID, d)
				}
			}},
		{name: "a concurrency the request named stays; a resumed session keeps its ID",
			in: api.ScheduledInput{Delegation: &api.DelegationInput{MaxConcurrency: 1, Tasks: []api.TaskSpec{task("a"), {Name: "b", Prompt: "again", Cwd: project, Resume: "standup"}}}},
			check: func(t *testing.T, p api.ScheduledPrepared) {
				if d := p.Delegation; d.MaxConcurrency != 1 || d.SessionIDs[1] != "standup" {
					t.Fatalf("delegation = %+v", d)
				}
			}},
		{name: "a saved plan, read at the fire, its argument bound",
			in: api.ScheduledInput{PlanName: "review", PlanArgs: map[string]string{"file": "cli.go"}},
			check: func(t *testing.T, p api.ScheduledPrepared) {
				pl := p.Plan
				if pl == nil || pl.Source == nil || pl.Source.Scope != "global" || pl.Args["file"] != "cli.go" || pl.Cwd != project {
					t.Fatalf("plan = %+v", pl)
				}
				// The argument is filled in when the step runs, in one pass
				// with the plan's other references (plan version 3).
				task := api.TaskSteps(pl.Plan)[0].Task
				if got := api.ExpandTask(task, 1, pl.Args, nil); task != "Review {args.file}" || got != "Review cli.go" {
					t.Fatalf("step task = %q, filled in %q", task, got)
				}
				if !api.IsPlanID(p.ChildID) || pl.ParentSessionID != "schedule:nightly" || pl.Attempt != 1 {
					t.Fatalf("child %q, plan %+v", p.ChildID, pl)
				}
			}},
		{name: "an inline plan's step in a folder anyone may change",
			in:   api.ScheduledInput{Plan: &api.PlanInput{Cwd: project, Plan: api.Plan{Steps: []api.Step{{Task: "Look"}, {Task: "Look there", Cwd: open}}}}},
			code: errcode.PermissionDenied},
		{name: "a saved plan's step in ../ a folder anyone may change", in: api.ScheduledInput{PlanName: "elsewhere"}, code: errcode.PermissionDenied},
		{name: "a saved plan that is gone", in: api.ScheduledInput{PlanName: "nightly-sweep"}, code: errcode.InvalidInput},
		{name: "a project's plan with a gate, the project not trusted", in: api.ScheduledInput{PlanName: "gated"}, code: errcode.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.ScheduleID, in.Cwd, in.Version = "nightly", project, api.ScheduledVersion
			p, err := s.PrepareScheduled(context.Background(), api.PrepareScheduledInput{Scheduled: in, FireID: "nightly-2026-11-26T10:25:31Z"})
			if err != nil {
				t.Fatal(err)
			}
			if tt.code != "" {
				if p.Error == nil || p.Error.Code != tt.code {
					t.Fatalf("error = %+v, want %s", p.Error, tt.code)
				}
				return
			}
			if p.Error != nil {
				t.Fatalf("error = %+v", p.Error)
			}
			tt.check(t, p)
		})
	}
}
