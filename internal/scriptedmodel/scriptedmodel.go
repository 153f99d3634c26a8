// Package scriptedmodel is an OpenAI-compatible chat completions server whose
// answers are scripted, so tests and the demo can drive real pi runs without a
// model API key.
//
// A conversation picks its script with a marker in a user message:
//
//	[[script:NAME]]            a script registered with Server.Script
//	[[steps:[{...},{...}]]]    an inline JSON array of steps
//
// The last marker of the latest user message that carries one selects the
// script; the number of assistant messages after that message selects the
// step. A [[steps:]] marker's JSON may hold prompts (a step's tool call
// arguments) with markers of their own, at any depth: they select the
// child's script, in the child's conversation. docs/scripted-model.md
// describes the format. That makes the
// server stateless per conversation: many child runs can be driven at once,
// and a pi session that is resumed (or retried after a crash) replays its
// messages and lands on the right step again.
package scriptedmodel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ProviderName and ModelID are what the pi config written by WritePiAgentDir
// calls this server; pass ModelRef to pi's --model.
const (
	ProviderName = "scripted"
	ModelID      = "scripted-1"
	ModelRef     = ProviderName + "/" + ModelID
)

// SecondModelID and ThirdModelID are the same server under other model
// names: a run that falls back from one model to another (a profile's
// fallbackModels) stays on the script, and Step.ModelStatus can fail one
// of them alone.
const (
	SecondModelID  = "scripted-2"
	SecondModelRef = ProviderName + "/" + SecondModelID
	ThirdModelID   = "scripted-3"
	ThirdModelRef  = ProviderName + "/" + ThirdModelID
)

// modelIDs are the models WritePiAgentDir declares.
var modelIDs = []string{ModelID, SecondModelID, ThirdModelID}

// ToolCall is one tool call the model makes.
type ToolCall struct {
	// ID defaults to a deterministic call_<step>_<n> when empty.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments; it is streamed in pieces of
	// Step.ChunkSize bytes, as real providers do.
	Arguments string `json:"arguments"`
}

// Usage is the token usage reported in the final chunk.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens,omitempty"`
}

// Step is one scripted answer.
type Step struct {
	Text      string     `json:"text,omitempty"`
	Reasoning string     `json:"reasoning,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Usage defaults to a small fixed usage so that sums can be asserted.
	Usage *Usage `json:"usage,omitempty"`
	// FinishReason defaults to "tool_calls" when there are tool calls, else "stop".
	FinishReason string `json:"finish_reason,omitempty"`
	// Status, when non-zero, answers with this HTTP status and Body instead
	// (an empty Body: a JSON error whose message is the status's text).
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	// ModelStatus answers a request for one of its model IDs (the request's
	// "model", e.g. SecondModelID) with that HTTP status and Body instead:
	// a provider error only some models have, such as a rate limit (429) or
	// an overload (529), so that a run which then falls back to another
	// model gets the step's own answer. Status, when set, wins.
	ModelStatus map[string]int `json:"model_status,omitempty"`
	// DelayMS waits before answering (headers included).
	DelayMS int `json:"delay_ms,omitempty"`
	// Together holds the answer until every script it names has received a
	// request (this one's own included), so that steps said to run side by
	// side are shown to, whatever the machine's load, where a delay only
	// makes that likely. After TogetherTimeout it answers anyway: the
	// test's own check of the times then fails, instead of the test hanging.
	Together []string `json:"together,omitempty"`
	// Hang never answers; the request ends only when the client goes away
	// or the server closes.
	Hang bool `json:"hang,omitempty"`
	// ChunkSize splits text, reasoning and arguments into chunks of this many
	// bytes (default 7, so that every value crosses chunk boundaries).
	ChunkSize int `json:"chunk_size,omitempty"`
	// Repeat, on the last step of a script, answers every later request of
	// the conversation with this step too (loops, long-running children).
	Repeat bool `json:"repeat,omitempty"`
	// EchoToolResult answers with Text followed by the text of the latest
	// tool result of the conversation, so what a tool really returned (a
	// delegation's answer, or the error of a tool pi does not have) is what
	// the user reads, not a line written in advance. A conversation with no
	// tool result gets a 422.
	EchoToolResult bool `json:"echo_tool_result,omitempty"`
}

// DefaultUsage is the usage of a step that names none.
var DefaultUsage = Usage{PromptTokens: 100, CompletionTokens: 20}

// Request is one request the server received, kept for assertions.
type Request struct {
	Time    time.Time
	Method  string
	Path    string
	Header  http.Header
	Body    []byte
	Parsed  ChatRequest
	Script  string // the script the request resolved to ("inline" for [[steps:]])
	StepIdx int    // the step index it resolved to, -1 when none
}

// ChatRequest is the part of an OpenAI chat completions request the server reads.
type ChatRequest struct {
	Model    string        `json:"model"`
	Stream   bool          `json:"stream"`
	Messages []ChatMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// ChatMessage is one message of a request. Content is a string or an array
// of parts; Text flattens either.
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls,omitempty"`
}

// Text returns the message's text content, parts joined by newlines.
func (m ChatMessage) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Server is a running scripted model.
type Server struct {
	listener net.Listener
	http     *http.Server
	done     chan struct{} // closed by Close: releases hanging requests

	mu       sync.Mutex
	scripts  map[string][]Step
	dflt     string // the script of a conversation with no marker
	requests []Request
	notify   chan struct{} // closed and replaced on every request
}

// Start listens on a free port of 127.0.0.1 and serves until Close.
func Start() (*Server, error) {
	return StartOn("127.0.0.1:0")
}

// StartOn listens on addr and serves until Close.
func StartOn(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("scripted model: listen on %s: %w", addr, err)
	}
	s := &Server{
		listener: ln,
		done:     make(chan struct{}),
		scripts:  map[string][]Step{},
		dflt:     DefaultScript,
		notify:   make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	// ReadHeaderTimeout bounds a client that connects and sends nothing; the
	// write side is unbounded on purpose, since Hang and DelayMS hold it open.
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

// URL is the server's base URL, ending in /v1 as pi's baseUrl expects.
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() + "/v1" }

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Close stops the server and ends hanging requests.
func (s *Server) Close() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	close(s.done)
	// Hanging handlers only return once done is closed, so a short grace is
	// enough for them; a client still holding a connection is cut.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		return s.http.Close()
	}
	return nil
}

// Script registers (or replaces) the steps of a named script.
func (s *Server) Script(name string, steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[name] = steps
}

// DefaultScript is the name of the script a conversation with no marker
// gets, unless SetDefaultScript names another.
const DefaultScript = "default"

// SetDefaultScript names the script that answers a conversation with no
// marker in any user message (DefaultScript when never called): a child
// whose task was written without one, as a tour's or a real user's are.
func (s *Server) SetDefaultScript(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dflt = name
}

// Requests returns a copy of every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestsFor returns the requests that resolved to the named script.
func (s *Server) RequestsFor(script string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Script == script {
			out = append(out, r)
		}
	}
	return out
}

// WaitForRequests blocks until the server has received at least n requests
// that match (all requests when match is nil), or ctx ends.
func (s *Server) WaitForRequests(ctx context.Context, n int, match func(Request) bool) ([]Request, error) {
	for {
		s.mu.Lock()
		var got []Request
		for _, r := range s.requests {
			if match == nil || match(r) {
				got = append(got, r)
			}
		}
		wake := s.notify
		s.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return got, fmt.Errorf("scripted model: %d of %d requests: %w", len(got), n, ctx.Err())
		}
	}
}

// TogetherTimeout bounds a Together step's wait: far longer than any
// cold start of the children that should meet (seconds under load), short
// enough that a plan which never ran them side by side fails in the test's
// own time.
const TogetherTimeout = 60 * time.Second

// scriptMarker is a [[script:NAME]] marker at the start of the text.
var scriptMarker = regexp.MustCompile(`^\[\[script:([A-Za-z0-9_.\-]+)\]\]`)

const stepsOpen = "[[steps:"

// marker is the marker a user message's text ends up selecting.
type marker struct {
	script string // the named script; "" for inline steps
	steps  []Step // the inline steps
}

// lastMarker finds the last marker of text, ok false when it has none.
//
// The text is read from left to right. A [[steps:]] marker's JSON is read
// by a JSON decoder to the end of its balanced value, so the strings inside
// it (a step's tool call arguments: a child's prompt) may carry markers of
// their own, [[steps:]] ones too, at any depth: they are skipped here and
// are found when that prompt is a user message of its own (the child's).
// A regexp cannot do that: it would stop at the first "]]" of a nested
// marker, or take a nested marker for this conversation's.
func lastMarker(text string) (m marker, ok bool, err error) {
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], "[[")
		if j < 0 {
			break
		}
		i += j
		rest := text[i:]
		if sm := scriptMarker.FindStringSubmatch(rest); sm != nil {
			m, ok = marker{script: sm[1]}, true
			i += len(sm[0])
			continue
		}
		body, isSteps := strings.CutPrefix(rest, stepsOpen)
		// Only a list opens steps: "[[steps:" in prose is not a marker.
		if !isSteps || !strings.HasPrefix(strings.TrimLeft(body, " \t\r\n"), "[") {
			i++
			continue
		}
		dec := json.NewDecoder(strings.NewReader(body))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return marker{}, false, fmt.Errorf("bad [[steps:]] JSON at %q: %w", abbreviate(rest), err)
		}
		var steps []Step
		if err := json.Unmarshal(raw, &steps); err != nil {
			return marker{}, false, fmt.Errorf("bad [[steps:]] JSON (a list of steps: [{\"text\":\"...\"}, ...]): %w", err)
		}
		end := int(dec.InputOffset())
		after := strings.TrimLeft(body[end:], " \t\r\n")
		if !strings.HasPrefix(after, "]]") {
			return marker{}, false, fmt.Errorf("bad [[steps:]] marker: its JSON list of steps is not followed by ]] (at %q)", abbreviate(body[end:]))
		}
		m, ok = marker{steps: steps}, true
		i += len(rest) - len(after) + len("]]")
	}
	return m, ok, nil
}

// abbreviate shortens s for an error message.
func abbreviate(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	n := max
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return s[:n] + "…"
}

// resolve finds the script and step a conversation is at: the last marker
// of the latest user message that has one selects the script, the number
// of assistant messages after that message the step.
func (s *Server) resolve(msgs []ChatMessage) (name string, idx int, step Step, err error) {
	markerAt := -1
	var steps []Step
	for i := len(msgs) - 1; i >= 0 && markerAt < 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		m, ok, err := lastMarker(msgs[i].Text())
		switch {
		case err != nil:
			return "inline", -1, Step{}, err
		case !ok:
			continue
		case m.script == "":
			steps, name, markerAt = m.steps, "inline", i
		default:
			s.mu.Lock()
			var found bool
			steps, found = s.scripts[m.script]
			s.mu.Unlock()
			if !found {
				return m.script, -1, Step{}, fmt.Errorf("no script named %q is registered", m.script)
			}
			name, markerAt = m.script, i
		}
	}
	if markerAt < 0 {
		// No marker anywhere: the default script, from the conversation's
		// start (every assistant message counts).
		s.mu.Lock()
		dflt := s.dflt
		var found bool
		steps, found = s.scripts[dflt]
		s.mu.Unlock()
		switch {
		case !found && dflt != DefaultScript:
			return dflt, -1, Step{}, fmt.Errorf("no [[script:NAME]] or [[steps:[...]]] marker in any user message, and the default script %q is not registered: "+
				"start the server with --scripts holding a script %q (or another --default-script); docs/scripted-model.md", dflt, dflt)
		case !found:
			return "", -1, Step{}, errors.New("no [[script:NAME]] or [[steps:[...]]] marker in any user message, and no default script: " +
				"start the prompt with [[script:NAME]] (NAME a script of the server's --scripts), " +
				"or start the server with --default-script NAME (or a script named \"default\") to answer unmarked conversations; docs/scripted-model.md")
		}
		name = dflt
	}
	for _, m := range msgs[markerAt+1:] {
		if m.Role == "assistant" {
			idx++
		}
	}
	switch {
	case len(steps) == 0:
		return name, idx, Step{}, fmt.Errorf("script %q has no steps", name)
	case idx < len(steps):
		return name, idx, steps[idx], nil
	case steps[len(steps)-1].Repeat:
		return name, idx, steps[len(steps)-1], nil
	default:
		return name, idx, Step{}, fmt.Errorf("script %q has %d steps; the conversation asks for step %d", name, len(steps), idx+1)
	}
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	close(s.notify)
	s.notify = make(chan struct{})
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, ModelID)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	// Prompts with large file context stay far below this; it bounds a
	// runaway client, not a test.
	const maxBody = 64 << 20
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, StepIdx: -1}
	if err != nil {
		s.record(rec)
		writeError(w, http.StatusBadRequest, "cannot read request body: "+err.Error())
		return
	}
	if err := json.Unmarshal(body, &rec.Parsed); err != nil {
		s.record(rec)
		writeError(w, http.StatusBadRequest, "request body is not JSON: "+err.Error())
		return
	}
	name, idx, step, err := s.resolve(rec.Parsed.Messages)
	rec.Script, rec.StepIdx = name, idx
	s.record(rec)
	if err != nil {
		// 422, not 400: tests that script a 400 on purpose must not be
		// confused with a script that is wrong.
		writeError(w, http.StatusUnprocessableEntity, "scripted model: "+err.Error())
		return
	}

	if len(step.Together) > 0 {
		// A timeout answers anyway (see Together).
		ctx, cancel := context.WithTimeout(r.Context(), TogetherTimeout)
		for _, name := range step.Together {
			if _, err := s.WaitForRequests(ctx, 1, func(q Request) bool { return q.Script == name }); err != nil {
				break
			}
		}
		cancel()
		if r.Context().Err() != nil {
			return
		}
	}
	if step.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(step.DelayMS) * time.Millisecond):
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	if step.Hang {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	status := step.Status
	if status == 0 {
		status = step.ModelStatus[rec.Parsed.Model]
	}
	if status != 0 {
		if step.Body == "" {
			// 529 (an overload, as one provider says it) has no text of
			// its own in net/http.
			writeError(w, status, cmp.Or(http.StatusText(status), fmt.Sprintf("HTTP %d", status)))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(step.Body))
		return
	}
	if !rec.Parsed.Stream {
		writeError(w, http.StatusBadRequest, "scripted model: only stream: true is served")
		return
	}
	if step.EchoToolResult {
		result, ok := latestToolResult(rec.Parsed.Messages)
		if !ok {
			writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("scripted model: step %d of script %q echoes the latest tool result, but the conversation has none: "+
				"give it a step with a tool call before it, or drop echo_tool_result", idx+1, name))
			return
		}
		step.Text += result
	}
	s.stream(w, idx, fillMatches(step, rec.Parsed.Messages))
}

// latestToolResult is the text of the conversation's latest tool result.
func latestToolResult(msgs []ChatMessage) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "tool" {
			return msgs[i].Text(), true
		}
	}
	return "", false
}

// matchPattern is a placeholder in tool call arguments: {{match:REGEX}}
// becomes the first group of REGEX in the latest tool result it matches
// (else the latest user message), so a script can pass on an ID a tool
// returned earlier (a session ID).
var matchPattern = regexp.MustCompile(`\{\{match:(.+?)\}\}`)

func fillMatches(step Step, msgs []ChatMessage) Step {
	calls := make([]ToolCall, len(step.ToolCalls))
	for i, tc := range step.ToolCalls {
		tc.Arguments = matchPattern.ReplaceAllStringFunc(tc.Arguments, func(ph string) string {
			re, err := regexp.Compile(matchPattern.FindStringSubmatch(ph)[1])
			if err != nil {
				return "bad-pattern"
			}
			// Tool results first; then what came as a user message (an
			// extension's message to the model, e.g. a child's question).
			for _, role := range []string{"tool", "user"} {
				for j := len(msgs) - 1; j >= 0; j-- {
					if msgs[j].Role != role {
						continue
					}
					if m := re.FindStringSubmatch(msgs[j].Text()); len(m) > 1 {
						return m[1]
					}
				}
			}
			return "no-match"
		})
		calls[i] = tc
	}
	step.ToolCalls = calls
	return step
}

// stream writes step as server-sent chat completion chunks.
func (s *Server) stream(w http.ResponseWriter, idx int, step Step) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	id := fmt.Sprintf("chatcmpl-scripted-%d", idx)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "model": ModelID,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	size := step.ChunkSize
	if size <= 0 {
		size = 7
	}

	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, part := range split(step.Reasoning, size) {
		send(chunk(map[string]any{"reasoning_content": part}, nil))
	}
	for _, part := range split(step.Text, size) {
		send(chunk(map[string]any{"content": part}, nil))
	}
	for n, tc := range step.ToolCalls {
		callID := tc.ID
		if callID == "" {
			callID = fmt.Sprintf("call_%d_%d", idx, n)
		}
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": n, "id": callID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}, nil))
		for _, part := range split(tc.Arguments, size) {
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": n, "function": map[string]any{"arguments": part},
			}}}, nil))
		}
	}
	finish := step.FinishReason
	if finish == "" {
		finish = "stop"
		if len(step.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	send(chunk(map[string]any{}, finish))
	usage := DefaultUsage
	if step.Usage != nil {
		usage = *step.Usage
	}
	send(map[string]any{
		"id": id, "object": "chat.completion.chunk", "model": ModelID, "choices": []any{},
		"usage": map[string]any{
			"prompt_tokens":         usage.PromptTokens,
			"completion_tokens":     usage.CompletionTokens,
			"total_tokens":          usage.PromptTokens + usage.CompletionTokens,
			"prompt_tokens_details": map[string]any{"cached_tokens": usage.CachedTokens},
		},
	})
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// split cuts s into pieces of about size bytes, never inside a UTF-8
// sequence (a piece grows to the end of the rune it would cut).
func split(s string, size int) []string {
	var out []string
	for len(s) > size {
		n := size
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func writeError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "scripted_model_error"}})
	_, _ = w.Write(b)
}

// WritePiAgentDir writes a pi config dir (for PI_CODING_AGENT_DIR) into dir:
// models.json with an openai-completions provider at this server's address,
// and settings.json that makes it the default and turns pi's own retries off,
// so a scripted provider error reaches the caller instead of being retried.
//
// Files that are there already are merged into, not replaced: a dir is
// written again each time the server starts (on a new port), and in between
// pi wrote its own keys there (`pi install` adds the extension to
// settings.json's packages), which a rewrite must keep. A file that is not
// JSON is left as it is, with an error.
func (s *Server) WritePiAgentDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("scripted model: pi agent dir: %w", err)
	}
	declared := make([]any, 0, len(modelIDs))
	for i, id := range modelIDs {
		name := "Scripted test model"
		if i > 0 {
			name = fmt.Sprintf("Scripted test model %d", i+1)
		}
		declared = append(declared, map[string]any{
			"id":            id,
			"name":          name,
			"reasoning":     false,
			"input":         []string{"text"},
			"contextWindow": 128000,
			"maxTokens":     16384,
			"cost":          map[string]any{"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
		})
	}
	models := map[string]any{
		"providers": map[string]any{
			ProviderName: map[string]any{
				"baseUrl": s.URL(),
				"api":     "openai-completions",
				"apiKey":  "scripted-model-key",
				"models":  declared,
			},
		},
	}
	settings := map[string]any{
		"defaultProvider":        ProviderName,
		"defaultModel":           ModelID,
		"defaultThinkingLevel":   "off",
		"enableInstallTelemetry": false,
		"retry":                  map[string]any{"enabled": false, "provider": map[string]any{"maxRetries": 0}},
	}
	files := []struct {
		name string
		ours map[string]any
		out  []byte
	}{{name: "models.json", ours: models}, {name: "settings.json", ours: settings}}
	// Both read and merged before either is written: a file that cannot
	// be merged leaves the dir as it was.
	for i, f := range files {
		merged, err := readJSONObject(filepath.Join(dir, f.name))
		if err != nil {
			return err
		}
		mergeInto(merged, f.ours)
		if files[i].out, err = json.MarshalIndent(merged, "", "  "); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := writeFileAtomic(filepath.Join(dir, f.name), append(f.out, '\n')); err != nil {
			return fmt.Errorf("scripted model: write %s: %w", f.name, err)
		}
	}
	return nil
}

// readJSONObject reads the JSON object of path: empty when the file is
// missing or blank, an error when it holds anything but an object.
func readJSONObject(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("scripted model: read %s: %w", path, err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return map[string]any{}, nil
	}
	// UseNumber: the user's numbers are written back as they were, not
	// through a float64.
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var obj map[string]any
	err = dec.Decode(&obj)
	if err == nil && obj == nil {
		err = errors.New("it is null")
	}
	if err != nil {
		return nil, fmt.Errorf("scripted model: %s is not a JSON object, so the scripted model's entries cannot be merged into it (fix or remove it, then start the scripted model again): %w", path, err)
	}
	return obj, nil
}

// mergeInto sets src's keys in dst: an object into an object key by key
// (so the user's other keys of "retry" or "providers" stay), any other
// value in place of dst's.
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		sub, isObj := v.(map[string]any)
		have, hasObj := dst[k].(map[string]any)
		if isObj && hasObj {
			mergeInto(have, sub)
			continue
		}
		dst[k] = v
	}
}

// writeFileAtomic replaces path with b through a rename, so a pi that
// reads the file meanwhile never sees half of it; an existing file keeps
// its mode.
func writeFileAtomic(path string, b []byte) error {
	mode := os.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// PiEnv is the environment that keeps a pi run against this server offline
// and quiet: no catalog refresh, no version check, no telemetry.
func PiEnv(agentDir string) []string {
	return []string{
		"PI_CODING_AGENT_DIR=" + agentDir,
		"PI_OFFLINE=1",
		"PI_SKIP_VERSION_CHECK=1",
		"PI_TELEMETRY=0",
	}
}
