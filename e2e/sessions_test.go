package e2e

import (
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/workflows"
)

// TestForgottenFinalizeGetsFeedback: a child that answers in plain text is
// sent the corrective feedback on the same pi session, and then finalizes.
func TestForgottenFinalizeGetsFeedback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("forgot",
		scriptedmodel.Step{Text: "The answer is 42, I think."},
		finalizeStep("42"),
	)
	e.startWorker(shared.client)
	in := e.sessionInput("[[script:forgot]] What is the answer?")
	var res api.SessionResult
	if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	turn := res.LastTurn
	if turn.State != api.StateCompleted || turn.ChildRuns != 2 || turn.Result.Output != "42" || turn.Usage.Turns != 2 {
		t.Fatalf("turn %+v", turn)
	}
	reqs := e.model.RequestsFor("forgot")
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	msgs := reqs[1].Parsed.Messages
	// The first attempt called no tool: the missing-finalize feedback.
	want := workflows.CorrectiveFeedback(api.RunPiResult{})
	if last := msgs[len(msgs)-1]; last.Role != "user" || last.Text() != want {
		t.Fatalf("the model got %q, want the corrective feedback %q", last.Text(), want)
	}
	if msgs[len(msgs)-2].Role != "assistant" {
		t.Fatal("the feedback did not continue the same session")
	}
	recordHistory(t, shared.client, in.SessionID, "finalize-retry")
}

// TestStickySessionSendsShareContext runs two more turns through send on a
// session that waits for input: each turn sees the ones before.
func TestStickySessionSendsShareContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("sticky-1", finalizeStep("noted 7"))
	e.model.Script("sticky-2", finalizeStep("it was 7"))
	e.model.Script("sticky-3", finalizeStep("7 plus 1 is 8"))
	e.startWorker(shared.client)
	in := e.sessionInput("[[script:sticky-1]] Remember the number 7.")
	in.IdleTTLSeconds = 3 // complete soon after the last turn, for the test
	run := e.startSession(shared.client, in)

	wait := func(turn int) api.SessionStatus {
		t.Helper()
		h, err := shared.client.UpdateWorkflow(e.ctx(), sdkclient.UpdateWorkflowOptions{
			WorkflowID: in.SessionID, UpdateName: api.WaitUpdate,
			Args: []any{api.WaitRequest{Turn: turn}}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
		})
		if err != nil {
			t.Fatal(err)
		}
		var st api.SessionStatus
		if err := h.Get(e.ctx(), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := wait(1); st.State != api.StateCompleted || st.LastTurn.Result.Output != "noted 7" {
		t.Fatalf("after turn 1: %+v", st)
	}
	h, err := shared.client.UpdateWorkflow(e.ctx(), sdkclient.UpdateWorkflowOptions{
		WorkflowID: in.SessionID, UpdateName: api.SendUpdate,
		Args: []any{api.SendRequest{Prompt: "[[script:sticky-2]] Which number was it?"}}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		t.Fatal(err)
	}
	var acc api.SendAccepted
	if err := h.Get(e.ctx(), &acc); err != nil || acc.Turn != 2 {
		t.Fatalf("send accepted %+v %v", acc, err)
	}
	if st := wait(2); st.LastTurn.Result.Output != "it was 7" {
		t.Fatalf("after turn 2: %+v", st)
	}
	if err := shared.client.SignalWorkflow(e.ctx(), in.SessionID, "", api.SendSignal, api.SendRequest{Prompt: "[[script:sticky-3]] Add one."}); err != nil {
		t.Fatal(err)
	}
	var res api.SessionResult
	if err := run.Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Turns != 3 || res.LastTurn.Result.Output != "7 plus 1 is 8" || res.Usage.Turns != 3 || res.State != api.StateCompleted {
		t.Fatalf("result %+v", res)
	}
	// Turn 3's request carries both earlier turns: the same pi session.
	msgs := e.model.RequestsFor("sticky-3")[0].Parsed.Messages
	var users []string
	for _, m := range msgs {
		if m.Role == "user" {
			users = append(users, m.Text())
		}
	}
	if len(users) != 3 || users[0] != in.Prompt {
		t.Fatalf("turn 3 saw user messages %q", users)
	}
	sessionFiles, _ := filepath.Glob(filepath.Join(e.dataDir, "sessions", "*", "smoke_"+in.SessionID+".jsonl"))
	if len(sessionFiles) != 1 {
		t.Fatalf("session files %v: the turns did not share one pi session", sessionFiles)
	}
	recordHistory(t, shared.client, in.SessionID, "sticky-three-turns")
}

// recordHistory writes a finished workflow's history into the workflows
// package's replay test data when SUBAGENTS_RECORD_HISTORIES=1, so a change
// that breaks determinism fails `make test`.
func recordHistory(t *testing.T, c sdkclient.Client, workflowID, name string) {
	t.Helper()
	if os.Getenv("SUBAGENTS_RECORD_HISTORIES") != "1" {
		return
	}
	hist := historypb.History{Events: historyOf(t, c, workflowID)}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&hist)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "workflows", "testdata", "histories", name+".json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
