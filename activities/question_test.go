package activities

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
)

// testdata/question-session.jsonl is what pi 0.87.1 wrote for a child with
// the joined child extension: a progress update, a question refused for
// its empty message, a question (the run ended there), then the run that
// got the answer and finalized.
const questionSession = "testdata/question-session.jsonl"

func TestRunQuestions(t *testing.T) {
	msgs, err := readMessages(questionSession)
	if err != nil {
		t.Fatal(err)
	}
	// The first run: up to the question's tool result.
	firstRun := 0
	for i, m := range msgs {
		if m.Role == "toolResult" && strings.Contains(string(m.Content), "Question recorded") {
			firstRun = i + 1
		}
	}
	update := api.Question{ID: "call_0_0", Reason: api.ReasonProgressUpdate, Message: "Found the config in src/.", State: api.QuestionSent}
	question := api.Question{ID: "call_2_0", Reason: api.ReasonNeedDecision, Message: "Which database: SQLite or PostgreSQL?", State: api.QuestionPending}
	for _, tc := range []struct {
		name  string
		msgs  []SessionMessage
		want  []api.Question
		asked bool
	}{
		{"the run that asked", msgs[:firstRun], []api.Question{update, question}, true},
		{"the run that got the answer", msgs[firstRun:], nil, false},
		{"the whole session: it finalized", msgs, []api.Question{update, question}, false},
		{"only the update", msgs[:4], []api.Question{update}, false},
		{"the question without its tool result (the run died in the tool)", msgs[:firstRun-1], []api.Question{update}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runQuestions(tc.msgs, nil); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("runQuestions = %+v, want %+v", got, tc.want)
			}
			if got := askedQuestion(tc.msgs); got != tc.asked {
				t.Fatalf("askedQuestion = %v, want %v", got, tc.asked)
			}
		})
	}
}

func TestRunQuestionsSanitizedAndCut(t *testing.T) {
	long := "Is the key sk-ant-api03-" + strings.Repeat("x", 40) + " the right one? " + strings.Repeat("y", api.MaxQuestionChars)
	args, _ := json.Marshal(map[string]string{"reason": api.ReasonInterviewRequest, "message": long})
	call, _ := json.Marshal([]map[string]any{{"type": "toolCall", "id": "c1", "name": api.ContactSupervisorToolName, "arguments": json.RawMessage(args)}})
	msgs := []SessionMessage{
		{Role: "assistant", Content: call},
		{Role: "toolResult", ToolCallID: "c1", ToolName: api.ContactSupervisorToolName, Content: json.RawMessage(`"Question recorded."`)},
	}
	got := runQuestions(msgs, NewSanitizer(""))
	if len(got) != 1 {
		t.Fatalf("questions: %+v", got)
	}
	if strings.Contains(got[0].Message, "sk-ant-api03-xxxx") {
		t.Fatalf("the key reached the question: %.80q", got[0].Message)
	}
	if n := len([]rune(got[0].Message)); n != api.MaxQuestionChars {
		t.Fatalf("question of %d characters, want it cut to %d", n, api.MaxQuestionChars)
	}
}

func TestFillQuestionsKeepsTheLatest(t *testing.T) {
	var lines []string
	for i := range api.MaxQuestionsKept + 5 {
		id := fmt.Sprintf("u%d", i)
		args, _ := json.Marshal(map[string]string{"reason": api.ReasonProgressUpdate, "message": id})
		call, _ := json.Marshal(map[string]any{"type": "message", "message": map[string]any{"role": "assistant",
			"content": []map[string]any{{"type": "toolCall", "id": id, "name": api.ContactSupervisorToolName, "arguments": json.RawMessage(args)}}}})
		result, _ := json.Marshal(map[string]any{"type": "message", "message": map[string]any{"role": "toolResult", "toolCallId": id,
			"toolName": api.ContactSupervisorToolName, "content": "Update recorded."}})
		lines = append(lines, string(call), string(result))
	}
	file := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := api.RunPiResult{SessionFile: file}
	(&Activities{sanitizer: NewSanitizer("")}).fillQuestions(&res, []api.ToolRow{{Name: api.ContactSupervisorToolName}})
	if len(res.Questions) != api.MaxQuestionsKept || res.Questions[0].ID != "u5" || res.Questions[len(res.Questions)-1].Message != fmt.Sprintf("u%d", api.MaxQuestionsKept+4) {
		t.Fatalf("kept %d questions, from %+v", len(res.Questions), res.Questions[0])
	}
}

func TestFillQuestions(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.jsonl")
	b, err := os.ReadFile(questionSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Activities{sanitizer: NewSanitizer("")}
	for _, tc := range []struct {
		name   string
		rows   []api.ToolRow
		before int
		want   int
	}{
		{"no contact_supervisor row: the file is not read", []api.ToolRow{{Name: "read"}}, 0, 0},
		{"a run that asked", []api.ToolRow{{Name: api.ContactSupervisorToolName}}, 0, 2},
		{"the answer's run, from its first message", []api.ToolRow{{Name: api.ContactSupervisorToolName}}, 7, 0},
		{"a mark past the file", []api.ToolRow{{Name: api.ContactSupervisorToolName}}, 99, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := api.RunPiResult{SessionFile: file, MessagesBefore: tc.before}
			a.fillQuestions(&res, tc.rows)
			if len(res.Questions) != tc.want {
				t.Fatalf("questions %+v, want %d", res.Questions, tc.want)
			}
		})
	}
}
