package scriptedmodel

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// streamResult is what a client reassembles from the SSE chunks.
type streamResult struct {
	Status    int
	Body      string
	Text      string
	Reasoning string
	Calls     map[int]*ToolCall
	Finish    string
	Usage     *Usage
	Chunks    int
	Done      bool
}

func post(t *testing.T, s *Server, messages []map[string]any) streamResult {
	t.Helper()
	return postAs(t, s, ModelID, messages)
}

// postAs posts messages as a request for model.
func postAs(t *testing.T, s *Server, model string, messages []map[string]any) streamResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "stream": true, "messages": messages})
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer scripted-model-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	res := streamResult{Status: resp.StatusCode, Calls: map[int]*ToolCall{}}
	if resp.StatusCode != http.StatusOK {
		b := new(strings.Builder)
		_, _ = bufio.NewReader(resp.Body).WriteTo(b)
		res.Body = b.String()
		return res
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			res.Done = true
			continue
		}
		res.Chunks++
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					Reasoning string `json:"reasoning_content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("chunk is not JSON: %q", line)
		}
		if c.Usage != nil {
			res.Usage = &Usage{PromptTokens: c.Usage.Prompt, CompletionTokens: c.Usage.Completion}
		}
		for _, ch := range c.Choices {
			res.Text += ch.Delta.Content
			res.Reasoning += ch.Delta.Reasoning
			for _, tc := range ch.Delta.ToolCalls {
				call := res.Calls[tc.Index]
				if call == nil {
					call = &ToolCall{}
					res.Calls[tc.Index] = call
				}
				if tc.ID != "" {
					call.ID = tc.ID
				}
				call.Name += tc.Function.Name
				call.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				res.Finish = *ch.FinishReason
			}
		}
	}
	return res
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }
func assistant(text string) map[string]any {
	return map[string]any{"role": "assistant", "content": text}
}

func TestScriptedAnswers(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.Script("two-steps",
		Step{Reasoning: "thinking about ünïcode", Text: "first answer, long enough to be split"},
		Step{ToolCalls: []ToolCall{
			{Name: "read", Arguments: `{"path":"a/very/long/path/name.go"}`},
			{ID: "fixed", Name: "bash", Arguments: `{"command":"ls -la"}`},
		}, Usage: &Usage{PromptTokens: 7, CompletionTokens: 3}},
	)
	s.Script("error", Step{Status: 400, Body: `{"message":"bad request from script"}`})
	s.Script("loop", Step{Text: "once"}, Step{ToolCalls: []ToolCall{{Name: "ls", Arguments: `{}`}}, Repeat: true})

	tests := []struct {
		name     string
		messages []map[string]any
		check    func(t *testing.T, r streamResult)
	}{
		{"first step text and reasoning", []map[string]any{user("[[script:two-steps]] go")}, func(t *testing.T, r streamResult) {
			if r.Text != "first answer, long enough to be split" || r.Reasoning != "thinking about ünïcode" {
				t.Fatalf("text %q reasoning %q", r.Text, r.Reasoning)
			}
			if r.Finish != "stop" || !r.Done || r.Chunks < 6 {
				t.Fatalf("finish %q done %v chunks %d", r.Finish, r.Done, r.Chunks)
			}
			if *r.Usage != DefaultUsage {
				t.Fatalf("usage %+v", r.Usage)
			}
		}},
		{"second step by assistant count, tool calls split", []map[string]any{
			user("[[script:two-steps]] go"), assistant("first answer"), user("more"),
		}, func(t *testing.T, r streamResult) {
			if len(r.Calls) != 2 || r.Finish != "tool_calls" {
				t.Fatalf("calls %v finish %q", r.Calls, r.Finish)
			}
			if r.Calls[0].Name != "read" || r.Calls[0].Arguments != `{"path":"a/very/long/path/name.go"}` || r.Calls[0].ID != "call_1_0" {
				t.Fatalf("call 0 = %+v", r.Calls[0])
			}
			if r.Calls[1].ID != "fixed" || r.Calls[1].Arguments != `{"command":"ls -la"}` {
				t.Fatalf("call 1 = %+v", r.Calls[1])
			}
			if r.Usage.PromptTokens != 7 || r.Usage.CompletionTokens != 3 {
				t.Fatalf("usage %+v", r.Usage)
			}
		}},
		{"past the end is a 422", []map[string]any{
			user("[[script:two-steps]]"), assistant("a"), assistant("b"),
		}, func(t *testing.T, r streamResult) {
			if r.Status != 422 || !strings.Contains(r.Body, "has 2 steps") {
				t.Fatalf("status %d body %s", r.Status, r.Body)
			}
		}},
		{"repeat last step", []map[string]any{
			user("[[script:loop]]"), assistant("a"), assistant("b"), assistant("c"),
		}, func(t *testing.T, r streamResult) {
			if len(r.Calls) != 1 || r.Calls[0].Name != "ls" {
				t.Fatalf("calls %v", r.Calls)
			}
		}},
		{"http error with body", []map[string]any{user("[[script:error]]")}, func(t *testing.T, r streamResult) {
			if r.Status != 400 || r.Body != `{"message":"bad request from script"}` {
				t.Fatalf("status %d body %q", r.Status, r.Body)
			}
		}},
		{"inline steps in the latest marked message win", []map[string]any{
			user("[[script:two-steps]]"), assistant("x"),
			{"role": "user", "content": []any{map[string]any{"type": "text", "text": `next [[steps:[{"text":"inline one"}]]]`}}},
		}, func(t *testing.T, r streamResult) {
			if r.Text != "inline one" {
				t.Fatalf("text %q", r.Text)
			}
		}},
		{"no marker", []map[string]any{user("hello")}, func(t *testing.T, r streamResult) {
			if r.Status != 422 || !strings.Contains(r.Body, "no [[script:NAME]]") {
				t.Fatalf("status %d body %s", r.Status, r.Body)
			}
		}},
		{"unknown script", []map[string]any{user("[[script:nope]]")}, func(t *testing.T, r streamResult) {
			if r.Status != 422 || !strings.Contains(r.Body, `no script named \"nope\"`) {
				t.Fatalf("status %d body %s", r.Status, r.Body)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, post(t, s, tt.messages)) })
	}

	reqs := s.RequestsFor("two-steps")
	if len(reqs) < 3 {
		t.Fatalf("logged %d requests for two-steps", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer scripted-model-key" {
		t.Fatalf("header not logged: %q", got)
	}
	if reqs[1].StepIdx != 1 || reqs[0].Parsed.Messages[0].Text() != "[[script:two-steps]] go" {
		t.Fatalf("request log: step %d text %q", reqs[1].StepIdx, reqs[0].Parsed.Messages[0].Text())
	}
}

// TestModelStatus: a step answers the models its ModelStatus names with
// their HTTP error, every other model with the step itself; Status wins,
// and a status without a body gets a JSON error of the status's text.
func TestModelStatus(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.Script("limited", Step{Text: "answered", ModelStatus: map[string]int{ModelID: 429, SecondModelID: 529}})
	s.Script("both", Step{Status: 503, Text: "never", ModelStatus: map[string]int{ModelID: 429}})
	s.Script("bodied", Step{Body: `{"error":{"message":"slow down"}}`, ModelStatus: map[string]int{ModelID: 429}})
	tests := []struct {
		script, model string
		status        int
		body, text    string
	}{
		{"limited", ModelID, 429, `{"error":{"message":"Too Many Requests","type":"scripted_model_error"}}`, ""},
		{"limited", SecondModelID, 529, `{"error":{"message":"HTTP 529","type":"scripted_model_error"}}`, ""},
		{"limited", ThirdModelID, 200, "", "answered"},
		{"both", ThirdModelID, 503, `{"error":{"message":"Service Unavailable","type":"scripted_model_error"}}`, ""},
		{"bodied", ModelID, 429, `{"error":{"message":"slow down"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.script+"-"+tt.model, func(t *testing.T) {
			r := postAs(t, s, tt.model, []map[string]any{user("[[script:" + tt.script + "]] go")})
			if r.Status != tt.status || r.Body != tt.body || r.Text != tt.text {
				t.Fatalf("status %d body %q text %q, want %d %q %q", r.Status, r.Body, r.Text, tt.status, tt.body, tt.text)
			}
		})
	}
}

// TestTogetherHoldsUntilEveryScriptAsked: a Together step answers only
// once each script it names has a request, however late the last comes.
func TestTogetherHoldsUntilEveryScriptAsked(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Script("a", Step{Together: []string{"a", "b"}, Text: "from a"})
	s.Script("b", Step{Together: []string{"a", "b"}, Text: "from b"})

	// b asks from another goroutine, well after a: a's answer must still
	// wait for it. (Raw HTTP there: post may end the test, which only the
	// test's own goroutine may do.)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.WaitForRequests(ctx, 1, nil); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
		body := `{"stream":true,"messages":[{"role":"user","content":"[[script:b]]"}]}`
		if resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body)); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	if r := post(t, s, []map[string]any{user("[[script:a]]")}); r.Text != "from a" {
		t.Fatalf("a's text %q", r.Text)
	}
	at := time.Now()
	if len(s.RequestsFor("b")) != 1 {
		t.Fatal("a was answered before b asked")
	}
	if b := s.RequestsFor("b")[0].Time; !at.After(b) {
		t.Fatalf("a answered at %v, before b asked at %v", at, b)
	}
}

func TestDelayAndHang(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	s.Script("slow", Step{DelayMS: 150, Text: "late"})
	s.Script("hang", Step{Hang: true})

	start := time.Now()
	if r := post(t, s, []map[string]any{user("[[script:slow]]")}); r.Text != "late" {
		t.Fatalf("text %q", r.Text)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("delay not applied")
	}

	// A hanging request ends when the client gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	body := `{"stream":true,"messages":[{"role":"user","content":"[[script:hang]]"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("hanging request answered")
	}

	// Close releases a request that still hangs.
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitCtx, waitCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer waitCancel()
	if _, err := s.WaitForRequests(waitCtx, 3, nil); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a request hung")
	}
	<-errc
}

func TestWritePiAgentDir(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := filepath.Join(t.TempDir(), "agent")
	if err := s.WritePiAgentDir(dir); err != nil {
		t.Fatal(err)
	}
	var models struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
			API     string `json:"api"`
			Models  []struct {
				ID string `json:"id"`
			} `json:"models"`
		} `json:"providers"`
	}
	readJSON(t, filepath.Join(dir, "models.json"), &models)
	p := models.Providers[ProviderName]
	if p.BaseURL != s.URL() || p.API != "openai-completions" || len(p.Models) != 3 ||
		p.Models[0].ID != ModelID || p.Models[1].ID != SecondModelID || p.Models[2].ID != ThirdModelID {
		t.Fatalf("models.json = %+v", models)
	}
	var settings struct {
		Retry struct {
			Enabled  bool `json:"enabled"`
			Provider struct {
				MaxRetries int `json:"maxRetries"`
			} `json:"provider"`
		} `json:"retry"`
		DefaultModel string `json:"defaultModel"`
	}
	readJSON(t, filepath.Join(dir, "settings.json"), &settings)
	if settings.Retry.Enabled || settings.Retry.Provider.MaxRetries != 0 || settings.DefaultModel != ModelID {
		t.Fatalf("settings.json = %+v", settings)
	}
	if env := fmt.Sprint(PiEnv(dir)); !strings.Contains(env, "PI_CODING_AGENT_DIR="+dir) || !strings.Contains(env, "PI_OFFLINE=1") {
		t.Fatalf("PiEnv = %s", env)
	}
}

func TestSplitKeepsRunes(t *testing.T) {
	tests := []struct {
		in   string
		size int
	}{
		{"", 3}, {"abc", 3}, {"abcdefg", 3}, {"ünïcödé", 3}, {"日本語テキスト", 4}, {"日本", 1},
	}
	for _, tt := range tests {
		parts := split(tt.in, tt.size)
		if strings.Join(parts, "") != tt.in {
			t.Fatalf("split(%q,%d) = %q", tt.in, tt.size, parts)
		}
		for _, p := range parts {
			if !utf8.ValidString(p) {
				t.Fatalf("part %q is not valid text", p)
			}
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestFillMatches(t *testing.T) {
	msgs := []ChatMessage{
		{Role: "tool", Content: json.RawMessage(`"✓ one: completed (session: aaa-111)"`)},
		{Role: "user", Content: json.RawMessage(`"session: not-a-tool-result"`)},
		{Role: "tool", Content: json.RawMessage(`[{"type":"text","text":"✓ two: completed (session: bbb-222)"}]`)},
	}
	tests := []struct {
		args, want string
	}{
		{`{"sessionId":"{{match:session: ([a-z0-9-]+)}}"}`, `{"sessionId":"bbb-222"}`},
		{`{"sessionId":"{{match:one: completed .session: ([a-z0-9-]+)}}"}`, `{"sessionId":"aaa-111"}`},
		{`{"a":"{{match:nothing (here)}}","b":"{{match:([}}"}`, `{"a":"no-match","b":"bad-pattern"}`},
		{`{"plain":true}`, `{"plain":true}`},
	}
	for _, tc := range tests {
		got := fillMatches(Step{ToolCalls: []ToolCall{{Name: "x", Arguments: tc.args}}}, msgs).ToolCalls[0].Arguments
		if got != tc.want {
			t.Errorf("fillMatches(%s) = %s, want %s", tc.args, got, tc.want)
		}
	}
}

// TestWritePiAgentDirMerges: a pi config dir that is written again (the
// scripted model restarted on another port) keeps what pi or the user put
// there: the packages `pi install` added, other settings, other providers;
// only the scripted model's own entries change.
func TestWritePiAgentDirMerges(t *testing.T) {
	tests := []struct {
		name     string
		settings string // settings.json before, "" for none
		models   string // models.json before, "" for none
		check    func(t *testing.T, settings, models map[string]any)
		errWant  string
	}{
		{name: "no files", check: func(t *testing.T, settings, models map[string]any) {
			if settings["defaultModel"] != ModelID || settings["packages"] != nil {
				t.Fatalf("settings.json = %v", settings)
			}
		}},
		{name: "packages and other keys are kept",
			settings: `{"packages":["../extension"],"theme":"light","defaultModel":"gpt-x","retry":{"enabled":true,"baseDelayMs":500}}`,
			models:   `{"providers":{"other":{"baseUrl":"http://x/v1","api":"openai-completions"},"scripted":{"baseUrl":"http://127.0.0.1:1/v1","headers":{"x-a":"b"}}},"note":"mine"}`,
			check: func(t *testing.T, settings, models map[string]any) {
				if fmt.Sprint(settings["packages"]) != "[../extension]" || settings["theme"] != "light" {
					t.Fatalf("settings.json lost the user's keys: %v", settings)
				}
				if settings["defaultModel"] != ModelID || settings["defaultProvider"] != ProviderName {
					t.Fatalf("settings.json does not make the scripted model the default: %v", settings)
				}
				retry, _ := settings["retry"].(map[string]any)
				if retry["enabled"] != false || fmt.Sprint(retry["baseDelayMs"]) != "500" {
					t.Fatalf("retry = %v, want pi's retries off and the user's other retry settings kept", retry)
				}
				providers, _ := models["providers"].(map[string]any)
				if providers["other"] == nil || models["note"] != "mine" {
					t.Fatalf("models.json lost the user's entries: %v", models)
				}
				scripted, _ := providers[ProviderName].(map[string]any)
				if !strings.HasSuffix(fmt.Sprint(scripted["baseUrl"]), "/v1") || strings.Contains(fmt.Sprint(scripted["baseUrl"]), ":1/") || len(scripted["models"].([]any)) != 3 {
					t.Fatalf("the scripted provider is not this server's: %v", scripted)
				}
			}},
		{name: "settings.json that is not JSON is left alone", settings: `{"packages": [`, errWant: "settings.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			dir := t.TempDir()
			for name, text := range map[string]string{"settings.json": tt.settings, "models.json": tt.models} {
				if text != "" {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Twice, as a second run of bin/scripted-model --agent-dir does.
			for range 2 {
				err = s.WritePiAgentDir(dir)
			}
			if tt.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errWant) {
					t.Fatalf("err = %v, want one naming %s", err, tt.errWant)
				}
				if b, _ := os.ReadFile(filepath.Join(dir, "settings.json")); string(b) != tt.settings {
					t.Fatalf("settings.json was overwritten: %s", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var settings, models map[string]any
			readJSON(t, filepath.Join(dir, "settings.json"), &settings)
			readJSON(t, filepath.Join(dir, "models.json"), &models)
			tt.check(t, settings, models)
		})
	}
}
