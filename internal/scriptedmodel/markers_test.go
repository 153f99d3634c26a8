package scriptedmodel

import (
	"encoding/json"
	"strings"
	"testing"
)

func msg(role, text string) ChatMessage {
	b, _ := json.Marshal(text)
	return ChatMessage{Role: role, Content: b}
}

// inlineSteps is the [[steps:]] marker of steps, the way a test or a tour
// writes one: the steps as JSON.
func inlineSteps(t *testing.T, steps ...Step) string {
	t.Helper()
	b, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	return "[[steps:" + string(b) + "]]"
}

// TestResolveMarkers: which script and step a conversation is at, with
// markers at any depth: a [[steps:]] marker's JSON holds step prompts
// (tool call arguments) that carry markers of their own, which are the
// child's business, not this conversation's.
func TestResolveMarkers(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.Script("a", Step{Text: "script a"}, Step{Text: "script a, step 2"})
	s.Script("b", Step{Text: "script b"})

	// Three levels: a parent whose one step delegates to a child whose
	// steps delegate to a grandchild with steps of its own.
	grandchild := inlineSteps(t, Step{Text: "grandchild answers"}) + " Answer."
	child := inlineSteps(t,
		Step{ToolCalls: []ToolCall{{Name: "task", Arguments: mustJSON(t, map[string]any{"prompt": grandchild})}}},
		Step{Text: "child passes it on"}) + " Delegate again."
	parentArgs := mustJSON(t, map[string]any{"agent": "scout", "task": child})
	parent := inlineSteps(t,
		Step{ToolCalls: []ToolCall{{Name: "subagent", Arguments: parentArgs}}},
		Step{Text: "parent done"}) + " Delegate."

	tests := []struct {
		name      string
		msgs      []ChatMessage
		script    string
		idx       int
		text      string // the step's text
		callArgs  string // the step's first tool call's arguments, when it has one
		errSubstr string
	}{
		{name: "a script marker", msgs: []ChatMessage{msg("user", "[[script:a]] go")}, script: "a", text: "script a"},
		{name: "inline steps", msgs: []ChatMessage{msg("user", `[[steps:[{"text":"one"}]]] go`)}, script: "inline", text: "one"},
		{name: "inline steps over lines, with spaces", msgs: []ChatMessage{msg("user", "[[steps: [\n  {\"text\": \"one\"}\n] ]] go")}, script: "inline", text: "one"},
		{name: "text after the steps holds ]]", msgs: []ChatMessage{msg("user", `[[steps:[{"text":"one"}]]] then ]] and [x]]`)}, script: "inline", text: "one"},
		{name: "a step prompt carries a script marker", msgs: []ChatMessage{msg("user", `[[steps:[{"tool_calls":[{"name":"subagent","arguments":"{\"task\":\"[[script:b]] look\"}"}]}]]] go`)},
			script: "inline", callArgs: `{"task":"[[script:b]] look"}`},
		{name: "a step's text is a marker, not this conversation's", msgs: []ChatMessage{msg("user", `[[steps:[{"text":"[[script:b]]"}]]]`)}, script: "inline", text: "[[script:b]]"},
		{name: "steps inside steps inside steps: the parent", msgs: []ChatMessage{msg("user", parent)}, script: "inline", callArgs: parentArgs},
		{name: "the parent's second step", msgs: []ChatMessage{msg("user", parent), msg("assistant", ""), msg("tool", "child passes it on")}, script: "inline", idx: 1, text: "parent done"},
		{name: "steps inside steps: the child", msgs: []ChatMessage{msg("user", child)}, script: "inline",
			callArgs: mustJSON(t, map[string]any{"prompt": grandchild})},
		{name: "the grandchild", msgs: []ChatMessage{msg("user", grandchild)}, script: "inline", text: "grandchild answers"},
		{name: "the last marker of the message wins", msgs: []ChatMessage{msg("user", "[[script:a]] or rather [[script:b]]")}, script: "b", text: "script b"},
		{name: "a script after steps wins", msgs: []ChatMessage{msg("user", `[[steps:[{"text":"one"}]]] or rather [[script:b]]`)}, script: "b", text: "script b"},
		{name: "steps after a script win", msgs: []ChatMessage{msg("user", `[[script:b]] or rather [[steps:[{"text":"one"}]]]`)}, script: "inline", text: "one"},
		{name: "the latest marked user message wins", msgs: []ChatMessage{msg("user", "[[script:b]]"), msg("assistant", "x"), msg("user", "[[script:a]]"), msg("assistant", "y"), msg("user", "more")},
			script: "a", idx: 1, text: "script a, step 2"},
		{name: "parts of a message", msgs: []ChatMessage{{Role: "user", Content: json.RawMessage(`[{"type":"text","text":"[[script:a]]"},{"type":"text","text":"[[steps:[{\"text\":\"part two\"}]]]"}]`)}},
			script: "inline", text: "part two"},
		{name: "bad steps JSON", msgs: []ChatMessage{msg("user", `[[steps:[{"text":]]]`)}, script: "inline", idx: -1, errSubstr: "bad [[steps:]] JSON"},
		{name: "steps not closed by ]]", msgs: []ChatMessage{msg("user", `[[steps:[{"text":"one"}] go`)}, script: "inline", idx: -1, errSubstr: "not followed by ]]"},
		{name: "steps that are not a list are no marker", msgs: []ChatMessage{msg("user", `[[script:a]] [[steps:{"text":"one"}]]`)}, script: "a", text: "script a"},
		{name: "[[steps: in prose is no marker", msgs: []ChatMessage{msg("user", "[[script:b]] the [[steps:...]] marker")}, script: "b", text: "script b"},
		{name: "steps whose list is not steps", msgs: []ChatMessage{msg("user", `[[steps:[1,2]]]`)}, script: "inline", idx: -1, errSubstr: "bad [[steps:]] JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, idx, step, err := s.resolve(tt.msgs)
			if tt.errSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errSubstr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.errSubstr)
				}
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			if name != tt.script || idx != tt.idx {
				t.Fatalf("resolved to %q step %d, want %q step %d", name, idx, tt.script, tt.idx)
			}
			if tt.errSubstr != "" {
				return
			}
			if step.Text != tt.text {
				t.Fatalf("step text %q, want %q", step.Text, tt.text)
			}
			var args string
			if len(step.ToolCalls) > 0 {
				args = step.ToolCalls[0].Arguments
			}
			if args != tt.callArgs {
				t.Fatalf("tool call arguments %s, want %s", args, tt.callArgs)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDefaultScript: a conversation with no marker in any user message (a
// child whose task a tour did not mark) gets the default script: the one
// SetDefaultScript names, else the one named "default"; without one, the
// 422 says how to give it one.
func TestDefaultScript(t *testing.T) {
	unmarked := []ChatMessage{msg("user", "How are the tests run?")}
	second := []ChatMessage{msg("user", "How are the tests run?"), msg("assistant", ""), msg("tool", "make test")}
	tests := []struct {
		name      string
		scripts   map[string][]Step
		setDef    string
		msgs      []ChatMessage
		script    string
		text      string
		errSubstr []string
	}{
		{name: "none: the error says how to fix it", scripts: map[string][]Step{"a": {{Text: "a"}}}, msgs: unmarked,
			errSubstr: []string{"no [[script:NAME]]", "--default-script NAME", `a script named "default"`, "docs/scripted-model.md"}},
		{name: "a script named default", scripts: map[string][]Step{"default": {{Text: "by default"}}}, msgs: unmarked, script: "default", text: "by default"},
		{name: "its second step", scripts: map[string][]Step{"default": {{Text: "one"}, {Text: "two"}}}, msgs: second, script: "default", text: "two"},
		{name: "the one SetDefaultScript names", scripts: map[string][]Step{"default": {{Text: "no"}}, "tour": {{Text: "tour"}}}, setDef: "tour", msgs: unmarked, script: "tour", text: "tour"},
		{name: "a marker wins over the default", scripts: map[string][]Step{"default": {{Text: "no"}}, "a": {{Text: "a"}}}, msgs: []ChatMessage{msg("user", "[[script:a]]")}, script: "a", text: "a"},
		{name: "a default that is not there", scripts: map[string][]Step{"a": {{Text: "a"}}}, setDef: "tour", msgs: unmarked,
			errSubstr: []string{`the default script "tour" is not registered`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for name, steps := range tt.scripts {
				s.Script(name, steps...)
			}
			if tt.setDef != "" {
				s.SetDefaultScript(tt.setDef)
			}
			name, _, step, err := s.resolve(tt.msgs)
			if len(tt.errSubstr) > 0 {
				if err == nil {
					t.Fatalf("resolved to %q, want an error", name)
				}
				for _, want := range tt.errSubstr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil || name != tt.script || step.Text != tt.text {
				t.Fatalf("resolved to %q %q (err %v), want %q %q", name, step.Text, err, tt.script, tt.text)
			}
		})
	}
}

// TestEchoToolResult: a step with echo_tool_result answers with its text
// followed by the text of the latest tool result, so what a tool really
// returned (a delegation's answer, or the error of a tool that is not
// there) reaches the user instead of a line written in advance.
func TestEchoToolResult(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var step Step
	if err := json.Unmarshal([]byte(`{"text":"The scout said: ","echo_tool_result":true}`), &step); err != nil || !step.EchoToolResult {
		t.Fatalf("echo_tool_result does not decode: %+v %v", step, err)
	}
	s.Script("echo", Step{ToolCalls: []ToolCall{{Name: "subagent", Arguments: `{}`}}}, step)
	s.Script("bare", Step{EchoToolResult: true})
	s.Script("third", Step{}, Step{}, Step{EchoToolResult: true})
	call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "subagent", "arguments": "{}"}}}}
	tool := func(content any) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": "c1", "content": content}
	}
	tests := []struct {
		name     string
		messages []map[string]any
		status   int
		text     string
		body     string
	}{
		{"the latest tool result after the text", []map[string]any{user("[[script:echo]] go"), call, tool("✓ scout: completed\n\nheartbeat_interval = \"2s\"")},
			200, "The scout said: ✓ scout: completed\n\nheartbeat_interval = \"2s\"", ""},
		{"a result in parts", []map[string]any{user("[[script:echo]] go"), call, tool([]any{map[string]any{"type": "text", "text": "Tool subagent not found"}})},
			200, "The scout said: Tool subagent not found", ""},
		{"the latest of several", []map[string]any{user("[[script:third]] go"), call, tool("first"), call, tool("second")},
			200, "second", ""},
		{"no tool result", []map[string]any{user("[[script:bare]] go")},
			422, "", "echoes the latest tool result, but the conversation has none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, s, tt.messages)
			if r.Status != tt.status || r.Text != tt.text || !strings.Contains(r.Body, tt.body) {
				t.Fatalf("status %d text %q body %s, want %d %q %q", r.Status, r.Text, r.Body, tt.status, tt.text, tt.body)
			}
		})
	}
}
