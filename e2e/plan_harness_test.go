package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
)

// examplePlan reads a plan of docs/plans (the examples users read), binds
// args (as the defaults of its arguments), and puts each task step's script marker before its task
// ([[script:PREFIX-KEY]]), so that the scripted model answers each step by
// its key. It writes the result as a plan file in the work dir and returns
// its path.
func (e *env) examplePlan(name, prefix string, args map[string]string) string {
	e.t.Helper()
	p, err := profiles.ReadPlanFile(filepath.Join("..", "docs", "plans", name+".yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	if p, err = api.BindPlanArgs(p, args); err != nil {
		e.t.Fatal(err)
	}
	// The tasks keep their {args.NAME} until they run: the values go with
	// the file, as its arguments' defaults.
	for name, a := range p.Args {
		if v, ok := args[name]; ok {
			a.Default, a.Required = v, false
			p.Args[name] = a
		}
	}
	markSteps(p.Steps, prefix)
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(e.workDir, "..", name+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// markSteps prefixes every task with its step's script marker.
func markSteps(steps []api.Step, prefix string) {
	for i := range steps {
		s := &steps[i]
		if s.IsTask() {
			s.Task = "[[script:" + prefix + "-" + s.Key + "]] " + s.Task
		}
		markSteps(s.Steps, prefix)
		markSteps(s.Parallel, prefix)
	}
}

// runPlan runs `subagents run --plan FILE --json` to the plan's end and
// checks its exit code.
func (e *env) runPlan(wantCode int, file string, args ...string) client.Envelope {
	e.t.Helper()
	env, _ := e.cli().json(wantCode, "", "run", append([]string{"--plan", file}, args...)...)
	return env
}

// planItem is the plan's item (step result) with key.
func planItem(t *testing.T, env client.Envelope, key string) client.Item {
	t.Helper()
	for _, it := range env.Items {
		if it.Name == key {
			return it
		}
	}
	t.Fatalf("the plan has no step %q: %+v", key, env.Items)
	return client.Item{}
}

// planStep is the plan view's state of step key.
func planStep(t *testing.T, env client.Envelope, key string) api.StepState {
	t.Helper()
	if env.Plan == nil {
		t.Fatalf("the envelope has no plan view: %+v", env)
	}
	for _, s := range env.Plan.Steps {
		if s.Key == key {
			return s
		}
	}
	t.Fatalf("the plan view has no step %q", key)
	return api.StepState{}
}

// userText is the text of every user message of a request, joined.
func userText(r scriptedmodel.Request) string {
	var b strings.Builder
	for _, m := range r.Parsed.Messages {
		if m.Role == "user" {
			b.WriteString(m.Text())
			b.WriteString("\n")
		}
	}
	return b.String()
}

// calls counts the model requests of each script.
func (e *env) calls(scripts ...string) map[string]int {
	out := map[string]int{}
	for _, s := range scripts {
		out[s] = len(e.model.RequestsFor(s))
	}
	return out
}

// finalizeWith is a finalize step with a verdict, or an ERROR one when
// status is "ERROR" (result is then the error).
func finalizeWith(status, result, verdict string) scriptedmodel.Step {
	args := map[string]string{"status": status}
	if status == "ERROR" {
		args["error"] = result
	} else {
		args["result"] = result
	}
	if verdict != "" {
		args["verdict"] = verdict
	}
	b, _ := json.Marshal(args)
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "subagent_finalize", Arguments: string(b)}}}
}

// bashStep is a step that runs one bash command.
func bashStep(command string) scriptedmodel.Step {
	b, _ := json.Marshal(map[string]string{"command": command})
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: string(b)}}}
}
