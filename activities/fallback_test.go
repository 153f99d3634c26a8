package activities

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
)

func TestProviderBusy(t *testing.T) {
	tests := []struct {
		message string
		busy    bool
	}{
		// As pi writes them (its errorMessage), for the scripted provider.
		{`429: {"message":"Rate limit reached for requests","type":"rate_limit_error"}`, true},
		{"429 status code (no body)", true},
		{`503: {"message":"Service Unavailable"}`, true},
		{`529: {"type":"overloaded_error","message":"Overloaded"}`, true},
		{`400: {"message":"model does not support tools"}`, false},
		// A status that is not one decides, whatever the words say.
		{`400: {"message":"rate limit of the request body"}`, false},
		{`500: {"message":"upstream exploded"}`, false},
		{`401: {"message":"invalid api key"}`, false},
		// No status: the words.
		{"Rate limit exceeded, retry later", true},
		{`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`, true},
		{"The server is overloaded", true},
		{"Too Many Requests", true},
		{"fetch failed: connection refused", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := providerBusy(tt.message); got != tt.busy {
			t.Errorf("providerBusy(%q) = %v, want %v", tt.message, got, tt.busy)
		}
	}
}

func TestWithModel(t *testing.T) {
	in := api.RunPiInput{Model: "anthropic/claude-sonnet-4-5", Thinking: "high", FallbackModels: []string{"x/y"}}
	tests := []struct {
		ref, model, thinking string
	}{
		{"OpenAI/gpt-5", "openai/gpt-5", "high"},
		{"openai/gpt-5:low", "openai/gpt-5", "low"},
	}
	for _, tt := range tests {
		got := withModel(in, tt.ref)
		if got.Model != tt.model || got.Thinking != tt.thinking || len(got.FallbackModels) != 1 {
			t.Errorf("withModel(%q) = model %q thinking %q", tt.ref, got.Model, got.Thinking)
		}
	}
}

func TestFallbackAdmission(t *testing.T) {
	a := profiles.Admission{APIKey: "sk-profile", OutputMaxChars: 10}
	tests := []struct {
		first, model, key string
	}{
		{"anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5", "sk-profile"},
		{"anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5", "sk-profile"},
		// Another provider's key comes from the worker's environment.
		{"anthropic/claude-sonnet-4-5", "openai/gpt-5", ""},
		// pi's default model: its provider is not known here.
		{"", "openai/gpt-5", ""},
	}
	for _, tt := range tests {
		got := fallbackAdmission(a, tt.first, tt.model)
		if got.APIKey != tt.key || got.OutputMaxChars != 10 {
			t.Errorf("%s after %s: admission %+v, want key %q", tt.model, tt.first, got, tt.key)
		}
	}
}

// fallbackScripts: a task every model but the third rate-limits (429) or
// overloads (529); one where the first model works, then is rate limited;
// one the first model refuses as a bad request; one all models limit.
func fallbackScripts(m *scriptedmodel.Server) {
	m.Script("limited", scriptedmodel.Step{
		ToolCalls:   []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"answered by the third"}`)},
		ModelStatus: map[string]int{scriptedmodel.ModelID: 429, scriptedmodel.SecondModelID: 529},
	})
	m.Script("limited-midway",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo worked | tee -a work.txt"}`}}},
		scriptedmodel.Step{
			ToolCalls:   []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"finished the work"}`)},
			ModelStatus: map[string]int{scriptedmodel.ModelID: 429},
		})
	m.Script("bad-request", scriptedmodel.Step{
		ToolCalls:   []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"never"}`)},
		ModelStatus: map[string]int{scriptedmodel.ModelID: 400},
	})
	m.Script("all-limited", scriptedmodel.Step{Status: 429})
}

// userTexts are the user messages of a request to the model.
func userTexts(r scriptedmodel.Request) []string {
	var out []string
	for _, m := range r.Parsed.Messages {
		if m.Role == "user" {
			out = append(out, m.Text())
		}
	}
	return out
}

var fallbackCases = []struct {
	name   string
	script string
	check  func(t *testing.T, h *harness, r api.RunPiResult)
}{
	{"to the third model", "limited", func(t *testing.T, h *harness, r api.RunPiResult) {
		if r.Error != nil || r.Output != "answered by the third" || r.Model != scriptedmodel.ThirdModelRef {
			t.Fatalf("result: error %+v output %q model %q", r.Error, r.Output, r.Model)
		}
		if len(r.Fallbacks) != 2 || r.Fallbacks[0].Model != scriptedmodel.ModelRef || !strings.HasPrefix(r.Fallbacks[0].Error, "429: ") ||
			r.Fallbacks[1].Model != scriptedmodel.SecondModelRef || !strings.HasPrefix(r.Fallbacks[1].Error, "529: ") {
			t.Fatalf("fallbacks %+v", r.Fallbacks)
		}
		reqs := h.model.RequestsFor("limited")
		if len(reqs) != 3 || reqs[0].Parsed.Model != scriptedmodel.ModelID || reqs[1].Parsed.Model != scriptedmodel.SecondModelID ||
			reqs[2].Parsed.Model != scriptedmodel.ThirdModelID {
			t.Fatalf("%d requests", len(reqs))
		}
		// The task once, then the fallback's prompt: no task sent twice.
		if users := userTexts(reqs[2]); len(users) != 2 || !strings.Contains(users[0], "[[script:limited]]") || users[1] != FallbackPrompt {
			t.Fatalf("the third model was sent %q", users)
		}
	}},
	{"after tool work", "limited-midway", func(t *testing.T, h *harness, r api.RunPiResult) {
		if r.Error != nil || r.Output != "finished the work" || r.Model != scriptedmodel.SecondModelRef || len(r.Fallbacks) != 1 {
			t.Fatalf("result: error %+v output %q model %q fallbacks %+v", r.Error, r.Output, r.Model, r.Fallbacks)
		}
		if r.ToolCalls != 2 || r.ToolRows[0].Name != "bash" || r.Usage.Input != 200 {
			t.Fatalf("calls %d rows %+v usage %+v", r.ToolCalls, r.ToolRows, r.Usage)
		}
		// The second model goes on from the first's tool result.
		reqs := h.model.RequestsFor("limited-midway")
		last := reqs[len(reqs)-1]
		if len(reqs) != 3 || last.Parsed.Model != scriptedmodel.SecondModelID || strings.TrimSpace(lastToolText(last)) != "worked" ||
			len(userTexts(last)) != 2 || userTexts(last)[1] != FallbackPrompt {
			t.Fatalf("%d requests; the last %q, its tool result %q", len(reqs), userTexts(last), lastToolText(last))
		}
		// The work was done once.
		if b, err := os.ReadFile(filepath.Join(h.cwd, "work.txt")); err != nil || string(b) != "worked\n" {
			t.Fatalf("work.txt %q, %v", b, err)
		}
	}},
	{"a bad request does not fall back", "bad-request", func(t *testing.T, h *harness, r api.RunPiResult) {
		if errCode(r) != errcode.Failed || !strings.HasPrefix(r.Error.Message, "400: ") || len(r.Fallbacks) != 0 || r.Model != scriptedmodel.ModelRef {
			t.Fatalf("error %+v fallbacks %+v model %q", r.Error, r.Fallbacks, r.Model)
		}
		if n := len(h.model.RequestsFor("bad-request")); n != 1 {
			t.Fatalf("%d requests", n)
		}
	}},
	{"every model limited", "all-limited", func(t *testing.T, h *harness, r api.RunPiResult) {
		if errCode(r) != errcode.Failed || r.Error.Message != `429: {"message":"Too Many Requests","type":"scripted_model_error"}` {
			t.Fatalf("error %+v", r.Error)
		}
		if len(r.Fallbacks) != 2 || r.Model != scriptedmodel.ThirdModelRef {
			t.Fatalf("fallbacks %+v model %q", r.Fallbacks, r.Model)
		}
	}},
}

func (h *harness) fallbackInput(script string) api.RunPiInput {
	in := h.input(fmt.Sprintf("[[script:%s]] Do the task.", script))
	in.SessionID = script
	in.FallbackModels = []string{scriptedmodel.SecondModelRef, scriptedmodel.ThirdModelRef}
	return in
}

func TestRunPiFallback(t *testing.T) {
	waitsMostly(t)
	h := newHarness(t, nil)
	fallbackScripts(h.model)
	for _, c := range fallbackCases {
		t.Run(c.name, func(t *testing.T) { c.check(t, h, h.mustRun(h.fallbackInput(c.script))) })
	}
}

// TestRunPiFallbackWarm: the first model's run on a warm child of the pool
// falls back as a cold one does.
func TestRunPiFallbackWarm(t *testing.T) {
	waitsMostly(t)
	for _, c := range fallbackCases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 2 })
			t.Cleanup(h.acts.Close)
			fallbackScripts(h.model)
			h.warmUp()
			hits := h.acts.PoolStats().Hits
			c.check(t, h, h.mustRun(h.fallbackInput(c.script)))
			if h.acts.PoolStats().Hits != hits+1 {
				t.Fatalf("the first model did not run on a warm child: %+v", h.acts.PoolStats())
			}
		})
	}
}

func TestHideFallbackPrompt(t *testing.T) {
	user := func(id, parent, text string) string {
		return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"message":{"role":"user","content":[{"type":"text","text":%q}]}}`, id, parent, text)
	}
	failed := func(id, parent string) string {
		return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429: busy"}}`, id, parent)
	}
	answered := `{"type":"message","id":"b5","parentId":"b4","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}`
	model := `{"type":"model_change","id":"b9","parentId":"b4","provider":"scripted","modelId":"scripted-3"}`
	tests := []struct {
		name   string
		lines  []string
		target string // "" when nothing is appended
		parent string
	}{
		{"the first fallback: the task's prompt stays", []string{lineSession, user("b1", "", "Do it."), failed("b2", "b1")}, "", ""},
		{"a fallback that failed in its turn", []string{lineSession, user("b1", "", "Do it."), failed("b2", "b1"), user("b3", "b2", FallbackPrompt), failed("b4", "b3")}, "b3", "b4"},
		{"other entries after it", []string{lineSession, user("b1", "", "Do it."), user("b3", "b1", FallbackPromptNoFinalize), failed("b4", "b3"), model}, "b3", "b9"},
		{"a fallback that answered", []string{lineSession, user("b3", "", FallbackPrompt), failed("b4", "b3"), answered}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "s.jsonl")
			body := strings.Join(tt.lines, "\n") + "\n"
			if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := hideFallbackPrompt(file); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			added := strings.TrimPrefix(string(b), body)
			if tt.target == "" {
				if added != "" {
					t.Fatalf("appended %q", added)
				}
				return
			}
			var edit struct {
				Type        string           `json:"type"`
				ID          string           `json:"id"`
				ParentID    string           `json:"parentId"`
				TargetID    string           `json:"targetId"`
				Replacement *json.RawMessage `json:"replacement"`
				Timestamp   string           `json:"timestamp"`
			}
			if err := json.Unmarshal([]byte(added), &edit); err != nil || !strings.HasSuffix(added, "\n") {
				t.Fatalf("appended %q: %v", added, err)
			}
			if edit.Type != "context_edit" || edit.TargetID != tt.target || edit.ParentID != tt.parent || len(edit.ID) != 8 ||
				edit.Replacement != nil || !strings.HasSuffix(edit.Timestamp, "Z") || !strings.Contains(added, `"replacement":null`) {
				t.Fatalf("appended %q", added)
			}
		})
	}
}
