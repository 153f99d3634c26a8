package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// cutSecrets are GitHub-token-shaped secrets (40 characters, as GitHub
// issues them) a child's tool calls carry, each placed across one of the
// cuts the service makes.
var cutSecrets = struct{ args, escaped, result string }{
	// In a tool call's arguments, across the 120-character preview of a
	// tool row (displayItems, status) and of a transcript's tool call.
	args: "ghp_Ar9sQx7LmN2pVt4KcB8dWz1YhJ6fGe3RuTi0",
	// The same, after a line break as JSON writes it ("\n"): no word
	// boundary before the token in the arguments' text.
	escaped: "ghp_Es5cPq8NwM3kLz7HvD2bXy9TgF4jRa6UoSe1",
	// In a tool's result, across the transcript's 500-character preview.
	result: "ghp_Rz4tUy1OpI7uYt5ReW3qAs8DfG2hJk6LlMn0",
}

// tokenPieces are the pieces of a token that must not be seen: every
// six characters past its "ghp_".
func tokenPieces(token string) []string {
	var out []string
	for i := len("ghp_"); i+6 <= len(token); i++ {
		out = append(out, token[i:i+6])
	}
	return out
}

// TestContractsSecretCutByAPreviewIsMasked (issue 31, item 8): a real
// parent pi delegates to a child whose tool calls carry GitHub tokens
// placed across the service's cuts (the 120-character tool-call preview,
// the transcript's tool-call and tool-result previews), one of them after a
// JSON-escaped line break. What the parent's model and the parent's tool
// results get (the subagent tool's displayItems, the task tool's status,
// get_subagent_session's transcript) and every payload of the child's
// workflow history hold no piece of any token: the service sanitizes a
// text whole before it cuts it.
func TestContractsSecretCutByAPreviewIsMasked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	// {"pattern":" is 12 characters: the token starts at 100 and ends at
	// 140, across both 120-character previews.
	grepArgs := `{"pattern":"` + strings.Repeat("p", 87) + " " + cutSecrets.args + `","path":"."}`
	escArgs := `{"pattern":"` + strings.Repeat("q", 86) + `\n` + cutSecrets.escaped + `","path":"."}`
	// The read tool returns the file's text: the token starts at 480 of the
	// result, across the transcript's 500-character preview.
	notes := strings.Repeat("n", 479) + " " + cutSecrets.result + " end\n"
	if err := os.WriteFile(filepath.Join(e.workDir, "notes.txt"), []byte(notes), 0o644); err != nil {
		t.Fatal(err)
	}
	e.model.Script("c-cut",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{
			{Name: "grep", Arguments: grepArgs},
			{Name: "grep", Arguments: escArgs},
		}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "read", Arguments: `{"path":"notes.txt"}`}}},
		finalizeStep("searched the notes"),
	)
	session := "{{match:Session ID:.. .([0-9a-f-]+)}}"
	e.model.Script("parent-cut",
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-cut]] Search the notes."}),
		call("task", map[string]string{"op": "status", "id": session}),
		call("get_subagent_session", map[string]string{"sessionId": session}),
		scriptedmodel.Step{Text: "Done."},
	)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", sessionFile, "[[script:parent-cut]] Search the notes.")
	p.wait(t)
	reqs := e.model.RequestsFor("parent-cut")
	if len(reqs) != 4 {
		t.Fatalf("the parent made %d model requests, want 4", len(reqs))
	}

	// The cuts were made: the rows and the transcript show the masks
	// where the tokens were.
	sub := toolResultDetails(t, p, "subagent")
	if len(sub) != 1 {
		t.Fatalf("%d subagent results", len(sub))
	}
	display, _ := json.Marshal(sub[0]["results"])
	if !strings.Contains(string(display), `"displayItems"`) || !strings.Contains(string(display), "[REDACT") {
		t.Fatalf("displayItems without the masked tool calls: %s", display)
	}
	transcript := toolResultText(t, reqs, 3)
	if !strings.Contains(transcript, "→ grep: ") || !strings.Contains(transcript, "[tool result]: nnn") {
		t.Fatalf("get_subagent_session:\n%s", transcript)
	}
	if status := toolResultText(t, reqs, 2); !strings.Contains(status, "Scout") {
		t.Fatalf("task status:\n%s", status)
	}

	places := e.parentPlaces(p, reqs, sessionFile)
	for _, token := range []string{cutSecrets.args, cutSecrets.escaped, cutSecrets.result} {
		for where, text := range places {
			for _, piece := range tokenPieces(token) {
				if strings.Contains(text, piece) {
					t.Errorf("%s holds %q of %s: %.300s", where, piece, token, text[max(strings.Index(text, piece)-150, 0):])
					break
				}
			}
		}
	}
}
