package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestContextForkFromTheParent: a real parent pi reads a file and delegates
// to a scout through our extension; a session started with its session
// file as ForkFrom (a plan step's context: fork, started through Temporal
// as the plan workflow starts it) runs its child on a copy of that
// conversation: the child's model is sent the parent's messages, without
// the delegation (the subagent call, its result, the scout's answer), then
// the child's task, with the child's own tools and prompt. The parent's
// file is left as it was; a parent file that is not there fails the turn
// with INVALID_INPUT naming it. Before: ForkFrom was not read, and the
// child started from nothing.
func TestContextForkFromTheParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	if err := os.WriteFile(filepath.Join(e.workDir, "notes.txt"), []byte("the API is frozen until May\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.model.Script("fork-scout", finalizeStep("the config is in config/app.yaml"))
	e.model.Script("fork-parent",
		call("read", map[string]string{"path": "notes.txt"}),
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:fork-scout]] Find the config."}),
		scriptedmodel.Step{Text: "The plan: keep the API, move the config."},
	)
	e.model.Script("fork-child", finalizeStep("tests planned around the frozen API"))
	parentFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", parentFile, "[[script:fork-parent]] Plan the refactor.")
	p.wait(t)
	if ends := toolEnds(p, "subagent"); len(ends) != 1 || !strings.Contains(ends[0].Text, "config/app.yaml") {
		t.Fatalf("the parent's delegation: %+v", ends)
	}
	before, err := os.ReadFile(parentFile)
	if err != nil {
		t.Fatal(err)
	}

	in := e.sessionInput("[[script:fork-child]] Plan the tests.")
	in.Child.ForkFrom = parentFile
	var res api.SessionResult
	if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
		t.Fatalf("session: %v", err)
	}
	turn := res.LastTurn
	if turn.State != api.StateCompleted || turn.Result.Output != "tests planned around the frozen API" {
		t.Fatalf("turn %s: %+v %q", turn.State, turn.Error, turn.Result.Output)
	}
	req := e.model.RequestsFor("fork-child")[0]
	var got []string
	for _, m := range req.Parsed.Messages[1:] {
		line := m.Role + ": " + m.Text()
		for _, c := range m.ToolCalls {
			line += " → " + c.Function.Name
		}
		got = append(got, line)
	}
	want := []string{
		"user: [[script:fork-parent]] Plan the refactor.",
		"assistant:  → read",
		"tool: the API is frozen until May\n",
		"assistant: The plan: keep the API, move the config.",
		"user: [[script:fork-child]] Plan the tests.",
	}
	if req.Parsed.Messages[0].Role != "system" || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the forked child's model was sent:\n%s", strings.Join(got, "\n"))
	}
	var tools []string
	for _, tl := range req.Parsed.Tools {
		tools = append(tools, tl.Function.Name)
	}
	if strings.Join(tools, ",") != "read,bash,edit,write,subagent_finalize" {
		t.Fatalf("the child's tools: %v", tools)
	}
	if after, _ := os.ReadFile(parentFile); string(after) != string(before) {
		t.Fatal("the fork changed the parent's session file")
	}
	child, err := os.ReadFile(turn.Result.SessionFile)
	if err != nil || !strings.Contains(string(child), `"parentSession":"`+parentFile+`"`) {
		t.Fatalf("the child's session file does not name its parent: %v", err)
	}

	t.Run("a parent file that is not there", func(t *testing.T) {
		in := e.sessionInput("[[script:fork-child]] Plan the tests.")
		in.Child.ForkFrom = filepath.Join(e.workDir, "gone.jsonl")
		var res api.SessionResult
		if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
			t.Fatalf("session: %v", err)
		}
		turn := res.LastTurn
		if turn.State != api.StateFailed || turn.Error == nil || turn.Error.Code != errcode.InvalidInput ||
			turn.Error.Message != "context fork: the parent's session file "+in.Child.ForkFrom+" does not exist" || turn.ChildRuns != 1 {
			t.Fatalf("turn %s, error %+v, child runs %d", turn.State, turn.Error, turn.ChildRuns)
		}
	})
}
