package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestDelegationBatchWithUnknownProfile runs three tasks through real pi:
// one with a built-in profile, one with none, one with a profile that does
// not exist. The unknown one fails alone; results come back in input order.
func TestDelegationBatchWithUnknownProfile(t *testing.T) {
	t.Parallel()
	// Version 0 is how delegations started before versions existed run.
	for _, version := range []int{0, api.CurrentVersion} {
		t.Run(fmt.Sprintf("version-%d", version), func(t *testing.T) {
			t.Parallel()
			testDelegationBatch(t, version)
		})
	}
}

func testDelegationBatch(t *testing.T, version int) {
	e := newEnv(t)
	// The first task answers last.
	e.model.Script("scout-task", scriptedmodel.Step{DelayMS: 1500, ToolCalls: finalizeStep("scouted").ToolCalls})
	e.model.Script("plain-task", finalizeStep("plain done"))
	e.startWorker(shared.client)

	in := api.DelegationInput{
		Tasks: []api.TaskSpec{
			{Name: "scout-it", Prompt: "[[script:scout-task]] Find the config.", Profile: "scout", Cwd: e.workDir, Model: scriptedmodel.ModelRef},
			{Name: "missing", Prompt: "never runs", Profile: "code-reviewer", Cwd: e.workDir},
			{Name: "plain", Prompt: "[[script:plain-task]] Do it.", Cwd: e.workDir, Model: scriptedmodel.ModelRef},
		},
		SessionIDs:     []string{uuid.NewString(), uuid.NewString(), uuid.NewString()},
		IdleTTLSeconds: -1,
		Version:        version,
	}
	run, err := shared.client.ExecuteWorkflow(e.ctx(), sdkclient.StartWorkflowOptions{ID: "delegation-" + uuid.NewString(), TaskQueue: e.taskQueue},
		api.DelegationWorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	var st api.DelegationStatus
	if err := run.Get(e.ctx(), &st); err != nil {
		t.Fatal(err)
	}
	if st.TotalCount != 3 || st.AcceptedCount != 2 || st.RejectedCount != 1 || st.BatchStatus != "partial" {
		t.Fatalf("accounting %+v", st)
	}
	scout, missing, plain := st.Tasks[0], st.Tasks[1], st.Tasks[2]
	if scout.Name != "scout-it" || scout.State != api.StateCompleted || scout.Turn.Result.Output != "scouted" {
		t.Fatalf("scout task %+v", scout)
	}
	if missing.State != api.StateFailed || missing.Error.Code != errcode.UnknownAgent ||
		!strings.HasPrefix(missing.Error.Message, `Unknown profile: "code-reviewer". Available profiles: explorer, finder`) {
		t.Fatalf("missing task %+v", missing)
	}
	if plain.State != api.StateCompleted || plain.Turn.Result.Output != "plain done" {
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
	if version == 0 {
		recordHistory(t, shared.client, run.GetID(), "delegation-three-tasks")
	} else {
		recordHistory(t, shared.client, run.GetID(), "delegation-three-tasks-v2")
		recordHistory(t, shared.client, plain.SessionID, "one-turn-v2")
	}
}

func (e *env) delegate(in api.DelegationInput) (api.DelegationStatus, error) {
	e.t.Helper()
	run, err := shared.client.ExecuteWorkflow(e.ctx(), sdkclient.StartWorkflowOptions{ID: "delegation-" + uuid.NewString(), TaskQueue: e.taskQueue},
		api.DelegationWorkflowName, in)
	if err != nil {
		e.t.Fatal(err)
	}
	var st api.DelegationStatus
	err = run.Get(e.ctx(), &st)
	return st, err
}

// TestDelegationResume resumes a session twice: first while it waits for
// input (the next turn runs in the same workflow), then after it completed
// (it runs again under its ID); both times the child sees the earlier turns.
// A session that does not exist fails the whole call.
func TestDelegationResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("r1", finalizeStep("remembered"))
	e.model.Script("r2", finalizeStep("still remember"))
	e.model.Script("r3", finalizeStep("third time"))
	e.startWorker(shared.client)
	task := func(prompt, resume string) api.DelegationInput {
		return api.DelegationInput{
			Tasks:      []api.TaskSpec{{Name: "memory", Prompt: prompt, Profile: "scout", Cwd: e.workDir, Model: scriptedmodel.ModelRef, Resume: resume}},
			SessionIDs: []string{uuid.NewString()}, IdleTTLSeconds: 2,
		}
	}
	first, err := e.delegate(task("[[script:r1]] Remember the word pelican.", ""))
	if err != nil {
		t.Fatal(err)
	}
	id := first.Tasks[0].SessionID

	second, err := e.delegate(task("[[script:r2]] Which word?", id))
	if err != nil {
		t.Fatal(err)
	}
	if second.Tasks[0].SessionID != id || second.Tasks[0].Turn.Result.Output != "still remember" || second.Tasks[0].Turn.Turn != 2 {
		t.Fatalf("resume while waiting: %+v", second.Tasks[0])
	}

	// Wait for the session to complete after its 2 s idle TTL.
	if err := shared.client.GetWorkflow(e.ctx(), id, "").Get(e.ctx(), nil); err != nil {
		t.Fatal(err)
	}
	third, err := e.delegate(task("[[script:r3]] And now?", id))
	if err != nil {
		t.Fatal(err)
	}
	if third.Tasks[0].Turn.Result.Output != "third time" {
		t.Fatalf("resume after completion: %+v", third.Tasks[0])
	}
	var users []string
	for _, m := range e.model.RequestsFor("r3")[0].Parsed.Messages {
		if m.Role == "user" {
			users = append(users, m.Text())
		}
	}
	if len(users) != 3 || !strings.Contains(users[0], "pelican") {
		t.Fatalf("the resumed child saw %q: not the same pi session", users)
	}

	_, err = e.delegate(task("x", "0000aaaa-no-such-session"))
	if err == nil || !strings.Contains(err.Error(), `Cannot resume: session "0000aaaa-no-such-session" not found. The session may have expired or the ID is incorrect.`) {
		t.Fatalf("unknown resume target: %v", err)
	}
}

// TestDelegationCancelKeepsFinishedSiblings cancels a delegation while one
// task still runs: the running child is stopped and recorded as cancelled,
// the finished sibling keeps its result.
func TestDelegationCancelKeepsFinishedSiblings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("quick", finalizeStep("quick done"))
	e.model.Script("slow", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo go > slow-started.txt; sleep 120"}`}}})
	e.startWorker(shared.client)
	in := api.DelegationInput{
		Tasks: []api.TaskSpec{
			{Name: "quick", Prompt: "[[script:quick]] q", Cwd: e.workDir, Model: scriptedmodel.ModelRef},
			{Name: "slow", Prompt: "[[script:slow]] s", Cwd: e.workDir, Model: scriptedmodel.ModelRef},
		},
		SessionIDs: []string{uuid.NewString(), uuid.NewString()}, IdleTTLSeconds: -1,
	}
	run, err := shared.client.ExecuteWorkflow(e.ctx(), sdkclient.StartWorkflowOptions{ID: "delegation-" + uuid.NewString(), TaskQueue: e.taskQueue},
		api.DelegationWorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(e.workDir, "slow-started.txt"))
	if err := shared.client.SignalWorkflow(e.ctx(), run.GetID(), "", api.CancelSignal, api.CancelRequest{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	var st api.DelegationStatus
	if err := run.Get(e.ctx(), &st); err != nil {
		t.Fatal(err)
	}
	quick, slow := st.Tasks[0], st.Tasks[1]
	if quick.State != api.StateCompleted || quick.Turn.Result.Output != "quick done" {
		t.Fatalf("finished sibling changed: %+v", quick)
	}
	if slow.State != api.StateCancelled || slow.Turn == nil || slow.Turn.Error.Code != errcode.Cancelled || len(slow.Turn.Result.ToolRows) != 1 {
		t.Fatalf("cancelled task %+v", slow)
	}
	if st.State != api.StateCancelled {
		t.Fatalf("delegation state %s", st.State)
	}
}
