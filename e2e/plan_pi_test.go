package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestPlanFromPi: a real parent pi's model runs a plan with one call of
// the task tool, inline and then saved (by name, with an argument); the
// result says the plan's ID and each step's result, as the text pi draws.
func TestPlanFromPi(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	e.model.Script("pi-scout", finalizeStep("found greet.go"))
	e.model.Script("pi-review", finalizeStep("review: fine"))
	e.model.Script("pi-saved", finalizeStep("saved plan ran on api/"))
	dir := filepath.Join(e.agentDir, "plans")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	saved := "description: One scout\nargs:\n  where: {required: true}\nsteps:\n  - key: look\n    agent: scout\n    task: \"[[script:pi-saved]] Look in {args.where}\"\n"
	if err := os.WriteFile(filepath.Join(dir, "look.yaml"), []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := map[string]any{"steps": []any{
		map[string]any{"key": "scout", "agent": "scout", "task": "[[script:pi-scout]] Find the greeting."},
		map[string]any{"key": "review", "agent": "reviewer", "task": "[[script:pi-review]] Review what the scout found: {steps.scout.output}"},
	}}
	e.model.Script("parent-plan",
		call("task", map[string]any{"plan": plan}),
		call("task", map[string]any{"plan": "look", "args": map[string]string{"where": "api/"}}),
		call("task", map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"key": "x", "agent": "scout", "task": "{steps.nope.output}"}}}}),
		call("list_subagent_profiles", map[string]any{}),
		scriptedmodel.Step{Text: "Both plans ran."},
	)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), "[[script:parent-plan]] Run the plans.")
	p.wait(t)

	ends := toolEnds(p, "task")
	if len(ends) != 3 {
		t.Fatalf("%d task calls ended, want 3", len(ends))
	}
	inline := ends[0]
	for _, want := range []string{"[plan_id: plan-", "2/2 steps done", "found greet.go", "review: fine"} {
		if inline.IsError || !strings.Contains(inline.Text, want) {
			t.Fatalf("the inline plan's result lacks %q (isError %v):\n%s", want, inline.IsError, inline.Text)
		}
	}
	if plan, ok := inline.Details["plan"].(map[string]any); !ok || len(plan["steps"].([]any)) != 2 {
		t.Fatalf("details.plan: %v", inline.Details["plan"])
	}
	if r := e.model.RequestsFor("pi-review"); len(r) != 1 || !strings.Contains(userText(r[0]), "found greet.go") {
		t.Fatal("the review step did not get the scout's result")
	}
	if byName := ends[1]; byName.IsError || !strings.Contains(byName.Text, "saved plan ran on api/") || !strings.Contains(userText(e.model.RequestsFor("pi-saved")[0]), "Look in api/") {
		t.Fatalf("the saved plan's result:\n%s", byName.Text)
	}
	if list := toolEnds(p, "list_subagent_profiles"); len(list) != 1 || !strings.Contains(list[0].Text, "Saved plans") || !strings.Contains(list[0].Text, "look") {
		t.Fatalf("the profiles listing does not name the saved plan: %+v", list)
	}
	if bad := ends[2]; !bad.IsError || !strings.Contains(bad.Text, `refers to step "nope"`) || errorCode(bad.Details) != "INVALID_INPUT" {
		t.Fatalf("an invalid plan: isError %v:\n%s\n%v", bad.IsError, bad.Text, bad.Details)
	}
}

// TestPlanDeliveredAfterParentRestart: a plan started in the background
// from pi whose parent is killed while a step runs reaches the restarted
// parent once, and not again after that.
func TestPlanDeliveredAfterParentRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	slow := finalizeStep("second step: 7 files migrated")
	slow.DelayMS = 3000
	e.model.Script("bg-first", finalizeStep("first step: planned"))
	e.model.Script("bg-second", slow)
	plan := map[string]any{"steps": []any{
		map[string]any{"key": "plan", "agent": "scout", "task": "[[script:bg-first]] Plan the migration."},
		map[string]any{"key": "migrate", "agent": "implementer", "task": "[[script:bg-second]] Migrate: {steps.plan.output}"},
	}}
	e.model.Script("parent-bg", call("task", map[string]any{"plan": plan, "async": true}), scriptedmodel.Step{Text: "Started."})
	e.model.Script("parent-bg-2", scriptedmodel.Step{Text: "The plan finished."})
	e.model.Script("parent-bg-3", scriptedmodel.Step{Text: "Nothing new."})
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	first := e.startParent("json", sessionFile, "[[script:parent-bg]] Migrate in the background.")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == "bg-second" }); err != nil {
		t.Fatalf("the second step never started: %v", err)
	}
	if started := toolEnds(first, "task"); len(started) != 1 || !strings.Contains(started[0].Text, "[plan_id: plan-") || !strings.Contains(started[0].Text, "in the background") {
		t.Fatalf("the background start does not give the plan's ID: %+v", started)
	}
	first.kill()
	<-first.done

	deliveries := func(r scriptedmodel.Request) int {
		n := 0
		for _, u := range userTexts(r) {
			n += strings.Count(u, "second step: 7 files migrated")
		}
		return n
	}
	second := e.startParent("json", sessionFile, "[[script:parent-bg-2]] Go on.")
	second.wait(t)
	reqs := e.model.RequestsFor("parent-bg-2")
	if len(reqs) == 0 || deliveries(reqs[len(reqs)-1]) != 1 {
		t.Fatalf("the restarted parent got the plan's result %d times", deliveries(reqs[len(reqs)-1]))
	}
	third := e.startParent("json", sessionFile, "[[script:parent-bg-3]] Anything else?")
	third.wait(t)
	if r := e.model.RequestsFor("parent-bg-3"); len(r) != 1 || deliveries(r[0]) != 1 {
		t.Fatalf("the third start saw the result %d times (once, from the history)", deliveries(r[0]))
	}
	if n := e.openDelegations(sessionIDOf(t, sessionFile)); n != 0 {
		t.Fatalf("%d plans still wait for the ack", n)
	}
	if n := len(e.model.RequestsFor("bg-first")); n != 1 {
		t.Fatalf("the first step ran %d times", n)
	}
}
