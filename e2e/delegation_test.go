package e2e

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/workflows"
)

// TestDelegationBatchWithUnknownProfile runs three tasks through real pi:
// one with a built-in profile, one with none, one with a profile that does
// not exist. The unknown one fails alone; results come back in input order.
func TestDelegationBatchWithUnknownProfile(t *testing.T) {
	e := newEnv(t)
	fin := func(result string) scriptedmodel.Step {
		return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "subagent_finalize", Arguments: `{"status":"SUCCESS","result":"` + result + `"}`}}}
	}
	// The first task answers last.
	e.model.Script("scout-task", scriptedmodel.Step{DelayMS: 1500, ToolCalls: fin("scouted").ToolCalls})
	e.model.Script("plain-task", fin("plain done"))
	e.startWorker(shared.client)

	in := workflows.DelegationInput{
		Tasks: []workflows.TaskSpec{
			{Name: "scout-it", Prompt: "[[script:scout-task]] Find the config.", Profile: "scout", Cwd: e.workDir, Model: scriptedmodel.ModelRef},
			{Name: "missing", Prompt: "never runs", Profile: "code-reviewer", Cwd: e.workDir},
			{Name: "plain", Prompt: "[[script:plain-task]] Do it.", Cwd: e.workDir, Model: scriptedmodel.ModelRef},
		},
		SessionIDs:     []string{uuid.NewString(), uuid.NewString(), uuid.NewString()},
		IdleTTLSeconds: -1,
	}
	run, err := shared.client.ExecuteWorkflow(e.ctx(), sdkclient.StartWorkflowOptions{ID: "delegation-" + uuid.NewString(), TaskQueue: e.taskQueue},
		workflows.DelegationWorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.DelegationStatus
	if err := run.Get(e.ctx(), &st); err != nil {
		t.Fatal(err)
	}
	if st.TotalCount != 3 || st.AcceptedCount != 2 || st.RejectedCount != 1 || st.BatchStatus != "partial" {
		t.Fatalf("accounting %+v", st)
	}
	scout, missing, plain := st.Tasks[0], st.Tasks[1], st.Tasks[2]
	if scout.Name != "scout-it" || scout.State != workflows.StateCompleted || scout.Turn.Result.Output != "scouted" {
		t.Fatalf("scout task %+v", scout)
	}
	if missing.State != workflows.StateFailed || missing.Error.Code != errcode.UnknownAgent ||
		!strings.HasPrefix(missing.Error.Message, `Unknown profile: "code-reviewer". Available profiles: explorer, finder`) {
		t.Fatalf("missing task %+v", missing)
	}
	if plain.State != workflows.StateCompleted || plain.Turn.Result.Output != "plain done" {
		t.Fatalf("plain task %+v", plain)
	}
	// The scout child ran with the built-in's read-only tools and its prompt.
	req := e.model.RequestsFor("scout-task")[0]
	var tools []string
	for _, tl := range req.Parsed.Tools {
		tools = append(tools, tl.Function.Name)
	}
	if len(tools) != 5 || req.Parsed.Messages[0].Role != "system" || !strings.Contains(req.Parsed.Messages[0].Text(), "You are a scout") {
		t.Fatalf("scout child tools %v, system prompt %.80q", tools, req.Parsed.Messages[0].Text())
	}
	for _, tl := range tools {
		if tl == "bash" || tl == "write" || tl == "edit" {
			t.Fatalf("read-only scout got %s", tl)
		}
	}
	recordHistory(t, shared.client, run.GetID(), "delegation-three-tasks")
}
