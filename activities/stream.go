package activities

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
)

// toolErrorChars bounds ToolRow.Error: enough for a validation message.
const toolErrorChars = 300

// argsPreviewChars bounds a tool row's argument preview: enough to recognise
// a path or a command, small enough for heartbeats and history.
const argsPreviewChars = 120

// Stream folds pi's --mode json event stream into what a run produced. Feed
// it one line at a time; unknown event types are ignored, as pi's docs ask.
type Stream struct {
	SessionID string
	// FinalText is the text of the last assistant message.
	FinalText string
	// StopReason and ErrorMessage are those of the last assistant message.
	StopReason   string
	ErrorMessage string
	// Model is the provider/id of the model that wrote the last assistant
	// message: what the child really ran, pi's default included.
	Model string
	// PendingCalls are the tools the message that just ended asks for, in
	// order: an assistant message's, until the next message ends.
	PendingCalls []string
	Usage        api.Usage
	ToolRows     []api.ToolRow
	// Finalize is the first successful subagent_finalize, or nil.
	Finalize *api.Finalize
	// Settled is true once agent_settled arrived: pi has no work left.
	Settled bool
	// CommandError is the first command a pi in RPC mode refused (a warm
	// child's prompt), as "command: error".
	CommandError string
	// Events counts the records read; BadLines those that were not JSON.
	Events   int
	BadLines int
	// AutoRetries counts pi's own auto_retry_start events; AutoRetryError is
	// the error of the last one.
	AutoRetries    int
	AutoRetryError string
	// SameCallRun is how many tool calls in a row had the same name and
	// arguments, ending with the latest one (loop detection).
	SameCallRun int
	// Captured counts the structured events of the run: every event but
	// the streaming deltas (message_update, tool_execution_update) and the
	// session header, as the task contract's event_count does. Timeline holds the latest MaxTimeline of them
	// (0: none), timed from Started.
	Captured    int
	Timeline    []api.TimelineEvent
	MaxTimeline int
	Started     time.Time
	// Sanitizer masks a tool row's arguments and error before they are cut
	// to their previews (nil: secrets only, no home path).
	Sanitizer *Sanitizer

	lastSignature string
	argsByCall    map[string]json.RawMessage
}

type event struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Message    *message        `json:"message"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
	IsError    bool            `json:"isError"`
	ErrorMsg   string          `json:"errorMessage"`
	Result     *message        `json:"result"`
	// RPC mode's answer to a command (type "response").
	Command string `json:"command"`
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

type message struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	StopReason   string          `json:"stopReason"`
	ErrorMessage string          `json:"errorMessage"`
	Usage        *messageUsage   `json:"usage"`
	// Provider and Model are the model that answered (assistant messages).
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// messageUsage is an assistant message's usage, as pi writes it in both the
// event stream and the session file.
type messageUsage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
	Cost       struct {
		Total float64 `json:"total"`
	} `json:"cost"`
}

// usage is one assistant message's share of a run's Usage.
func (u *messageUsage) usage() api.Usage {
	if u == nil {
		return api.Usage{}
	}
	return api.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Cost: u.Cost.Total, Turns: 1}
}

// contentBlock is one block of a message's content.
type contentBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Text      string          `json:"text"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// contentBlocks reads a message's content, which pi writes either as a
// string or as a list of blocks.
func contentBlocks(raw json.RawMessage) []contentBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []contentBlock{{Type: "text", Text: s}}
	}
	var blocks []contentBlock
	_ = json.Unmarshal(raw, &blocks)
	return blocks
}

// text returns the message's text blocks joined; thinking and tool calls
// are not text.
func (m *message) text() string {
	var parts []string
	for _, b := range contentBlocks(m.Content) {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Apply folds one JSONL record into the stream's state and returns its
// event type ("" for a line that is not a record).
func (s *Stream) Apply(line []byte) string {
	line = trimCR(line)
	if len(line) == 0 {
		return ""
	}
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil {
		s.BadLines++
		return ""
	}
	if ev.Type == "response" {
		// RPC mode's answer to a command, not an event of the run: a
		// command pi refused is the run's failure.
		if !ev.Success && s.CommandError == "" {
			s.CommandError = ev.Command + ": " + ev.Error
		}
		return ev.Type
	}
	s.Events++
	switch ev.Type {
	case "message_update", "tool_execution_update", "session":
		// Streaming deltas, and the session file's header, which pi in JSON
		// mode prints and a warm child in RPC mode does not: not events of
		// the run, so a pooled and a cold run count the same.
	default:
		s.capture(ev)
	}
	switch ev.Type {
	case "session":
		s.SessionID = ev.ID
	case "message_end":
		s.PendingCalls = s.PendingCalls[:0]
		if ev.Message != nil && ev.Message.Role == "assistant" {
			s.assistantEnded(ev.Message)
		}
	case "tool_execution_start":
		s.toolStarted(ev.ToolCallID, ev.ToolName, ev.Args)
	case "tool_execution_end":
		s.toolEnded(ev.ToolCallID, ev.ToolName, ev.IsError, ev.Result)
	case "auto_retry_start":
		s.AutoRetries++
		s.AutoRetryError = ev.ErrorMsg
	case "agent_settled":
		s.Settled = true
	}
	return ev.Type
}

// capture counts a structured event and keeps it in the timeline, the
// oldest dropped past MaxTimeline.
func (s *Stream) capture(ev event) {
	s.Captured++
	if s.MaxTimeline <= 0 {
		return
	}
	var at int64
	if !s.Started.IsZero() {
		at = time.Since(s.Started).Milliseconds()
	}
	if len(s.Timeline) == s.MaxTimeline {
		s.Timeline = append(s.Timeline[:0], s.Timeline[1:]...)
	}
	s.Timeline = append(s.Timeline, api.TimelineEvent{Type: ev.Type, Tool: ev.ToolName, AtMS: at})
}

// assistantEnded folds in a complete assistant message.
func (s *Stream) assistantEnded(m *message) {
	s.FinalText = m.text()
	s.PendingCalls = s.PendingCalls[:0]
	for _, b := range contentBlocks(m.Content) {
		if b.Type == "toolCall" {
			s.PendingCalls = append(s.PendingCalls, b.Name)
		}
	}
	s.StopReason = m.StopReason
	s.ErrorMessage = m.ErrorMessage
	if m.Provider != "" && m.Model != "" {
		s.Model = m.Provider + "/" + m.Model
	}
	if m.Usage != nil {
		s.Usage = s.Usage.Add(m.Usage.usage())
	}
}

// toolStarted folds in the start of a tool call.
func (s *Stream) toolStarted(id, name string, args json.RawMessage) {
	if s.argsByCall == nil {
		s.argsByCall = map[string]json.RawMessage{}
	}
	s.argsByCall[id] = args
	signature := name + " " + compactJSON(args)
	if signature == s.lastSignature {
		s.SameCallRun++
	} else {
		s.lastSignature, s.SameCallRun = signature, 1
	}
	s.ToolRows = append(s.ToolRows, api.ToolRow{ID: id, Name: name, Args: preview(s.Sanitizer, args), Status: "running"})
}

// toolEnded folds in the end of a tool call; the first successful
// subagent_finalize is the run's result.
func (s *Stream) toolEnded(id, name string, isError bool, result *message) {
	status, errText := "ok", ""
	if isError {
		status = "error"
		if result != nil {
			errText = clip(s.Sanitizer.Sanitize(result.text()), toolErrorChars)
		}
	}
	for i := len(s.ToolRows) - 1; i >= 0; i-- {
		if s.ToolRows[i].ID == id {
			s.ToolRows[i].Status, s.ToolRows[i].Error = status, errText
			break
		}
	}
	if name == api.FinalizeToolName && !isError && s.Finalize == nil {
		var f api.Finalize
		if json.Unmarshal(s.argsByCall[id], &f) == nil {
			// A one-word verdict, as the tool checked; whatever space
			// the model put around it is not part of the word.
			f.Verdict = strings.TrimSpace(f.Verdict)
			s.Finalize = &f
		}
	}
	delete(s.argsByCall, id)
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// nextRun readies the stream for another run of the same task on the same
// session (a fallback model, runModels): how that run ends replaces how the
// last one ended, while the counts, usage, tool rows and timeline go on.
func (s *Stream) nextRun() {
	s.FinalText, s.StopReason, s.ErrorMessage, s.Model = "", "", "", ""
	s.PendingCalls = s.PendingCalls[:0]
	s.Settled = false
	s.CommandError = ""
}

// ToolCallCount is the number of tool calls started so far.
func (s *Stream) ToolCallCount() int { return len(s.ToolRows) }

// WorkCalls is the number of tool calls started so far but
// subagent_finalize, which hands back the work and is none of it: what a
// budget's tool calls count.
func (s *Stream) WorkCalls() int {
	n := 0
	for _, row := range s.ToolRows {
		if row.Name != api.FinalizeToolName {
			n++
		}
	}
	return n
}

// Failed reports whether the run's last assistant message ended in a provider
// error or an abort. pi exits 0 in that case, so the exit code cannot tell.
func (s *Stream) Failed() bool {
	return s.StopReason == "error" || s.StopReason == "aborted"
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// preview is a tool call's arguments on one line, sanitized before they
// are cut: a token the cut went through would keep most of itself and
// lose the shape that masks it. Only the arguments' opening is sanitized
// (previewSource): a write of many megabytes would otherwise be masked in
// full for a preview of 120 characters.
func preview(z *Sanitizer, raw json.RawMessage) string {
	return clip(strings.Join(strings.Fields(z.Sanitize(previewSource(string(raw)))), " "), argsPreviewChars)
}

// previewMargin is how much visible text previewSource keeps past the
// preview's end: far longer than any secret the sanitizer masks (a 4096-bit
// PEM key is about 3.3 KiB), so a secret that starts inside the preview
// ends inside what is sanitized, and is masked whole as the full text
// would mask it.
const previewMargin = 16 << 10

// previewSource is the opening of s that a preview is cut from: the
// shortest one holding argsPreviewChars runes of visible text (at most 4
// bytes each) and previewMargin bytes more. White space does not count, as
// the preview folds it away; everything else does, so the cut is never
// nearer than the full text's preview would be.
func previewSource(s string) string {
	visible := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\v', '\f':
			continue
		}
		if visible++; visible >= 4*argsPreviewChars+previewMargin {
			return s[:i+1]
		}
	}
	return s
}

// clip cuts s to n runes, the last one an ellipsis when it cut.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
