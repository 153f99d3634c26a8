package activities

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// A parent's session file as pi 0.87.1 writes one (session-format.md),
// with a delegation in it, a branch it left, a compaction and an edit.
var parentLines = []string{
	`{"type":"session","version":3,"id":"p-session","timestamp":"2026-11-22T10:00:00.000Z","cwd":"/parent"}`,
	`{"type":"model_change","id":"e01","parentId":null,"provider":"anthropic","modelId":"claude-sonnet-4-5"}`,
	`{"type":"thinking_level_change","id":"e02","parentId":"e01","thinkingLevel":"high"}`,
	`{"type":"message","id":"e03","parentId":"e02","message":{"role":"system","content":"","sections":{"preamble":"You are the parent."},"toolsAdded":[{"name":"subagent"}]}}`,
	`{"type":"message","id":"e04","parentId":"e03","message":{"role":"user","content":[{"type":"text","text":"Plan the refactor."}]}}`,
	`{"type":"message","id":"e05","parentId":"e04","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"main.go"}}],"stopReason":"toolUse"}}`,
	`{"type":"message","id":"e06","parentId":"e05","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"package main"}],"isError":false}}`,
	// A branch the parent left: not on the path to the leaf.
	`{"type":"message","id":"x01","parentId":"e06","message":{"role":"user","content":[{"type":"text","text":"an abandoned idea"}]}}`,
	`{"type":"label","id":"e07","parentId":"e06","targetId":"e04","label":"start"}`,
	`{"type":"message","id":"e08","parentId":"e07","message":{"role":"assistant","content":[{"type":"thinking","thinking":"delegate it"},{"type":"text","text":"I will hand the tests to a scout."},{"type":"toolCall","id":"c2","name":"subagent","arguments":{"task":"write tests"}}],"stopReason":"toolUse"}}`,
	`{"type":"message","id":"e09","parentId":"e08","message":{"role":"toolResult","toolCallId":"c2","toolName":"subagent","content":[{"type":"text","text":"started a3f7"}],"isError":false}}`,
	`{"type":"custom_message","id":"e10","parentId":"e09","customType":"subagents-result","content":"a3f7 finished","display":true}`,
	`{"type":"custom_message","id":"e11","parentId":"e10","customType":"notes","content":"keep the API stable","display":false}`,
	`{"type":"message","id":"e12","parentId":"e11","message":{"role":"assistant","content":[{"type":"toolCall","id":"c3","name":"get_subagent_output","arguments":{"id":"a3f7"}}],"stopReason":"toolUse"}}`,
	`{"type":"message","id":"e13","parentId":"e12","message":{"role":"toolResult","toolCallId":"c3","toolName":"get_subagent_output","content":[{"type":"text","text":"tests written"}],"isError":false}}`,
	`{"type":"compaction","id":"e14","parentId":"e13","summary":"The user wants a refactor.","firstKeptEntryId":"e12","tokensBefore":5000,"systemMessage":{"role":"system","content":"You are the parent."}}`,
	`{"type":"context_edit","id":"e15","parentId":"e14","targetId":"e13","replacement":null}`,
	`{"type":"context_edit","id":"e16","parentId":"e15","targetId":"e06","replacement":"package main // edited"}`,
	`{"type":"session_info","id":"e17","parentId":"e16","name":"refactor"}`,
	`{"type":"usage","id":"e18","parentId":"e17","kind":"cache_warm","usage":{"input":0}}`,
	`{"type":"message","id":"e19","parentId":"e18","message":{"role":"user","content":[{"type":"text","text":"Now the rename."}]}}`,
	`{"type":"message","id":"e20","parentId":"e19","message":{"role":"assistant","content":[{"type":"text","text":"Delegating the rename."},{"type":"toolCall","id":"c4","name":"read","arguments":{"path":"a.go"}},{"type":"toolCall","id":"c5","name":"subagent","arguments":{"task":"rename"}}],"stopReason":"toolUse"}}`,
	// Being written as the child starts: cut.
	`{"type":"message","id":"e21","parentId":"e20","mess`,
}

func TestForkLines(t *testing.T) {
	dir := t.TempDir()
	parent := filepath.Join(dir, "parent.jsonl")
	if err := os.WriteFile(parent, []byte(strings.Join(parentLines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	child := filepath.Join(dir, "child.jsonl")
	if err := forkSession(parent, child, "/child"); err != nil {
		t.Fatal(err)
	}
	entries, err := readEntries(child, maxSessionBytes)
	if err != nil {
		t.Fatal(err)
	}
	head := entries[0]
	if head.str("type") != "session" || head.str("cwd") != "/child" || head.str("parentSession") != parent || len(head.str("id")) != 36 ||
		string(head["version"]) != "3" || !strings.HasSuffix(head.str("timestamp"), "Z") {
		t.Fatalf("header %s", mustJSON(head))
	}
	// What is left, in order, each linked to the one before it.
	want := []string{
		"e04 message user",
		"e05 message assistant",
		"e06 message toolResult",
		"e08 message assistant",
		"e11 custom_message ",
		"e14 compaction ",
		"e16 context_edit ",
		"e19 message user",
		"e20 message assistant",
	}
	var got []string
	parentID := "null"
	for _, e := range entries[1:] {
		role := ""
		if m := e.message(); m != nil {
			role = m.Role
		}
		got = append(got, e.str("id")+" "+e.str("type")+" "+role)
		if string(e["parentId"]) != parentID {
			t.Errorf("%s: parentId %s, want %s", e.str("id"), e["parentId"], parentID)
		}
		parentID = string(e["id"])
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	body, _ := os.ReadFile(child)
	for _, gone := range []string{`"subagent"`, "get_subagent_output", "started a3f7", "a3f7 finished", "You are the parent", "abandoned", "cache_warm", "claude-sonnet"} {
		if strings.Contains(string(body), gone) {
			t.Errorf("the fork still holds %s", gone)
		}
	}
	byID := map[string]entry{}
	for _, e := range entries {
		byID[e.str("id")] = e
	}
	// The delegation call's message keeps its text and thinking, and ends
	// its turn; one that kept another call still asks for it.
	if m := byID["e08"]["message"]; !strings.Contains(string(m), `"stopReason":"stop"`) || !strings.Contains(string(m), "I will hand the tests to a scout.") ||
		!strings.Contains(string(m), `"thinking":"delegate it"`) {
		t.Fatalf("e08 %s", m)
	}
	if m := byID["e20"]["message"]; !strings.Contains(string(m), `"stopReason":"toolUse"`) || !strings.Contains(string(m), `"name":"read"`) {
		t.Fatalf("e20 %s", m)
	}
	// The compaction kept from a delegation call left out: from the next
	// entry kept after it, itself; its system checkpoint went.
	if c := byID["e14"]; c.str("firstKeptEntryId") != "e14" || c["systemMessage"] != nil || c.str("summary") != "The user wants a refactor." {
		t.Fatalf("compaction %s", mustJSON(c))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestForkRefusals(t *testing.T) {
	dir := t.TempDir()
	notSession := filepath.Join(dir, "notes.jsonl")
	if err := os.WriteFile(notSession, []byte(`{"type":"message","id":"a"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, parent, want string
	}{
		{"relative", "parent.jsonl", `context fork: the parent's session file "parent.jsonl" is not an absolute path`},
		{"missing", filepath.Join(dir, "gone.jsonl"), "context fork: the parent's session file " + filepath.Join(dir, "gone.jsonl") + " does not exist"},
		{"a folder", dir, "context fork: the parent's session file " + dir + " is not a file"},
		{"not a session", notSession, "context fork: " + notSession + " is not a pi session file (its first line is no session header)"},
		{"empty", empty, "context fork: " + empty + " is not a pi session file (its first line is no session header)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := filepath.Join(dir, tt.name+"-child.jsonl")
			err := forkSession(tt.parent, child, "/child")
			if !errcode.Is(err, errcode.InvalidInput) || err.Error() != tt.want {
				t.Fatalf("err %v, want INVALID_INPUT %q", err, tt.want)
			}
			if _, err := os.Lstat(child); err == nil {
				t.Fatal("a refused fork wrote the child's file")
			}
		})
	}
}

// forkScripts: a parent that reads a file, delegates (its pi has no
// subagent tool: the call fails, as a parent's own would succeed, and both
// are in its session file) and answers; a child that finalizes.
func forkScripts(m *scriptedmodel.Server) {
	m.Script("parent-conv",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "read", Arguments: `{"path":"notes.txt"}`}}},
		scriptedmodel.Step{Text: "I will delegate the tests.", ToolCalls: []scriptedmodel.ToolCall{{Name: "subagent", Arguments: `{"task":"write the tests"}`}}},
		scriptedmodel.Step{Text: "Waiting for the child."},
	)
	m.Script("child", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"the child saw the notes"}`)}})
	m.Script("child-again", scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"second turn"}`)}})
}

// parentSession runs the parent's conversation and returns its session file.
func (h *harness) parentSession(id string) string {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.cwd, "notes.txt"), []byte("the notes say 42\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
	in := h.input("[[script:parent-conv]] Plan the work.")
	in.SessionID, in.NoFinalize = id, true
	r := h.mustRun(in)
	if r.Output != "Waiting for the child." {
		h.t.Fatalf("parent run %+v", r)
	}
	return r.SessionFile
}

// checkForked checks what the forked child's model was sent: the parent's
// conversation without its delegation, then the child's prompt, with the
// child's own tools.
func checkForked(t *testing.T, h *harness, r api.RunPiResult) {
	t.Helper()
	if r.Error != nil || r.Output != "the child saw the notes" {
		t.Fatalf("child run: error %+v output %q", r.Error, r.Output)
	}
	// The parent's five messages: its prompt, the read and its result,
	// the answer without its delegation call, its last answer.
	if r.MessagesBefore != 5 {
		t.Fatalf("messages before the child's run: %d", r.MessagesBefore)
	}
	req := h.model.RequestsFor("child")[0]
	var got []string
	for _, m := range req.Parsed.Messages {
		line := m.Role + ": " + m.Text()
		for _, c := range m.ToolCalls {
			line += " → " + c.Function.Name
		}
		got = append(got, line)
	}
	want := []string{
		"user: [[script:parent-conv]] Plan the work.",
		"assistant:  → read",
		"tool: the notes say 42\n",
		"assistant: I will delegate the tests.",
		"assistant: Waiting for the child.",
		"user: [[script:child]] Now write the tests.",
	}
	if len(got) != len(want)+1 || got[0][:len("system: ")] != "system: " || strings.Join(got[1:], "\n") != strings.Join(want, "\n") {
		t.Fatalf("the child's model was sent:\n%s", strings.Join(got, "\n"))
	}
	var tools []string
	for _, tl := range req.Parsed.Tools {
		tools = append(tools, tl.Function.Name)
	}
	if strings.Join(tools, ",") != "read,bash,edit,write,subagent_finalize" {
		t.Fatalf("the child's tools %v", tools)
	}
}

func (h *harness) forkInput(parent string) api.RunPiInput {
	in := h.input("[[script:child]] Now write the tests.")
	in.SessionID, in.ForkFrom = "forked", parent
	return in
}

func TestRunPiFork(t *testing.T) {
	h := newHarness(t, nil)
	forkScripts(h.model)
	parent := h.parentSession("parent")
	before, err := os.ReadFile(parent)
	if err != nil {
		t.Fatal(err)
	}
	in := h.forkInput(parent)
	r := h.mustRun(in)
	checkForked(t, h, r)
	if after, _ := os.ReadFile(parent); string(after) != string(before) {
		t.Fatal("the fork changed the parent's session file")
	}
	// The session's next turn goes on in its own file: no second fork.
	in.Turn, in.Prompt = 2, "[[script:child-again]] And the docs."
	r2 := h.mustRun(in)
	if r2.Error != nil || r2.Output != "second turn" || r2.SessionFile != r.SessionFile || r2.MessagesBefore != 8 {
		t.Fatalf("second turn: error %+v output %q messages before %d", r2.Error, r2.Output, r2.MessagesBefore)
	}

	t.Run("a parent file that is not there", func(t *testing.T) {
		in := h.forkInput(filepath.Join(h.cwd, "no-such-session.jsonl"))
		in.SessionID = "orphan"
		sent := len(h.model.Requests())
		r := h.mustRun(in)
		if errCode(r) != errcode.InvalidInput || r.Error.Message != "context fork: the parent's session file "+in.ForkFrom+" does not exist" {
			t.Fatalf("error %+v", r.Error)
		}
		if len(h.model.Requests()) != sent {
			t.Fatal("the model was asked")
		}
		if _, err := os.Lstat(r.SessionFile); err == nil {
			t.Fatal("a session file was written")
		}
	})
}

// TestRunPiForkWarm: a warm child of the pool runs on the forked file.
func TestRunPiForkWarm(t *testing.T) {
	// The parent runs elsewhere: the pool here knows the child's kind only.
	ph := newHarness(t, nil)
	forkScripts(ph.model)
	parent := ph.parentSession("parent")
	h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 2 })
	t.Cleanup(h.acts.Close)
	forkScripts(h.model)
	h.warmUp()
	r := h.mustRun(h.forkInput(parent))
	if !r.Warm {
		t.Fatalf("ran cold: %+v", h.acts.PoolStats())
	}
	checkForked(t, h, r)
}
