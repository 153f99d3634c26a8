package activities

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// Limits of what ReadSession returns. The answer is a workflow result, and
// Temporal rejects payloads over 2 MiB: a longer transcript keeps its end,
// which is what a reader looking at how a run ended needs.
const (
	MaxReadChars = 1 << 20
	// MaxReadBytes bounds the text as JSON encodes it (multi-byte and
	// escaped characters count for what they take): half of Temporal's
	// limit, whatever the text is made of.
	MaxReadBytes = 1 << 20
	// The delegate contract's get_subagent_session previews.
	toolArgsPreviewChars   = 120
	toolResultPreviewChars = 500
)

// ReadSession reads a session's pi session file (or a turn's output
// artifact) on the worker that holds it, so that callers on other hosts get
// transcripts and full outputs through Temporal.
func (a *Activities) ReadSession(_ context.Context, req api.ReadRequest) (api.ReadResult, error) {
	if err := api.ValidateCwd(req.Cwd); err != nil {
		return api.ReadResult{}, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.InvalidInput), err)
	}
	// Both name the session file: neither may climb out of the data dir.
	for _, n := range [][2]string{{"session ID", req.SessionID}, {"agent", api.AgentName(req.Agent)}} {
		if err := api.ValidateName(n[0], n[1]); err != nil {
			return api.ReadResult{}, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.InvalidInput), err)
		}
	}
	file := SessionFile(a.cfg.DataDir, req.Cwd, req.Agent, req.SessionID)
	var text string
	var res api.ReadResult
	switch req.What {
	case api.ReadTranscript:
		msgs, err := readMessages(file)
		if errors.Is(err, fs.ErrNotExist) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		res.Found, res.MessageCount = true, len(msgs)
		text = FormatTranscript(msgs, req.Runs, a.sanitizer)
	case api.ReadOutput:
		b, err := os.ReadFile(artifactFile(file, req.Turn))
		if errors.Is(err, fs.ErrNotExist) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		res.Found, text = true, string(b)
	default:
		msg := fmt.Sprintf("what must be %q or %q, not %q", api.ReadTranscript, api.ReadOutput, req.What)
		return res, temporal.NewNonRetryableApplicationError(msg, string(errcode.InvalidInput), nil)
	}
	// Whole, before a page or the kept end cuts it.
	text = a.sanitizer.Sanitize(text)
	r := []rune(text)
	res.TotalChars = len(r)
	if req.Paged {
		from := min(max(req.From, 0), len(r))
		end := from + fitting(len(r)-from, func(i int) rune { return r[from+i] })
		res.Text, res.Truncated = string(r[from:end]), from > 0 || end < len(r)
		if end < len(r) {
			res.Next = end
		}
		return res, nil
	}
	// The end is kept: as many characters as both caps allow.
	keep := fitting(len(r), func(i int) rune { return r[len(r)-1-i] })
	if keep < len(r) {
		text = fmt.Sprintf("[... %d earlier characters omitted ...]\n", len(r)-keep) + string(r[len(r)-keep:])
		res.Truncated = true
	}
	res.Text = text
	return res, nil
}

// fitting is how many of n characters, the i-th being at(i), one answer
// holds within both MaxReadChars and MaxReadBytes.
func fitting(n int, at func(i int) rune) int {
	k, size := 0, 0
	for k < n && k < MaxReadChars {
		c := jsonSize(at(k))
		if size+c > MaxReadBytes {
			break
		}
		size += c
		k++
	}
	return k
}

// jsonSize is how many bytes JSON takes for c in a string, as Go's encoder
// writes it.
func jsonSize(c rune) int {
	switch {
	case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
		return 2
	case c < 0x20 || c == '<' || c == '>' || c == '&' || c == '\u2028' || c == '\u2029' || c == utf8.RuneError:
		return 6
	}
	return utf8.RuneLen(c)
}

// SessionMessage is one conversation message of a pi session file.
type SessionMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	ToolCallID   string          `json:"toolCallId,omitempty"`
	ToolName     string          `json:"toolName,omitempty"`
	IsError      bool            `json:"isError,omitempty"`
	StopReason   string          `json:"stopReason,omitempty"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
	Usage        *messageUsage   `json:"usage,omitempty"`
	Provider     string          `json:"provider,omitempty"`
	Model        string          `json:"model,omitempty"`
}

// readMessages returns the user, assistant and tool result messages of a
// pi session file, in order; system messages and other entries do not count.
func readMessages(path string) ([]SessionMessage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []SessionMessage
	r := bufio.NewReaderSize(f, 64<<10)
	err = readLines(r, maxLineBytes, func(line []byte) {
		if !bytes.Contains(line, []byte(`"message"`)) {
			return
		}
		var entry struct {
			Type    string          `json:"type"`
			Message *SessionMessage `json:"message"`
		}
		if json.Unmarshal(line, &entry) != nil || entry.Type != "message" || entry.Message == nil {
			return
		}
		switch entry.Message.Role {
		case "user", "assistant", "toolResult":
			out = append(out, *entry.Message)
		}
	})
	return out, err
}

// FormatTranscript renders messages as the delegate contract's get_subagent_session
// does: text verbatim, `→ tool: args` for calls, `[tool result]: text` for
// results, `[Error: ...]` for failed responses; runs separated by `---`, each
// under a `=== Run i/n (state) ===` header when there are several. z
// sanitizes each preview before it is cut (the text as a whole is the
// caller's to sanitize).
func FormatTranscript(msgs []SessionMessage, runs []api.RunMark, z *Sanitizer) string {
	if len(runs) == 0 {
		runs = []api.RunMark{{Turn: 1}}
	}
	var parts []string
	for i, run := range runs {
		start, end := min(max(run.FirstMessage, 0), len(msgs)), len(msgs)
		if i+1 < len(runs) {
			end = min(max(runs[i+1].FirstMessage, start), len(msgs))
		}
		var b strings.Builder
		if len(runs) > 1 {
			state := run.State
			if state == "" {
				state = "unknown"
			}
			fmt.Fprintf(&b, "=== Run %d/%d (%s) ===\n", i+1, len(runs), state)
		}
		for _, m := range msgs[start:end] {
			for _, line := range formatMessage(m, z) {
				b.WriteString(line)
				b.WriteByte('\n')
			}
		}
		parts = append(parts, strings.TrimRight(b.String(), "\n"))
	}
	return strings.Join(parts, "\n---\n")
}

func formatMessage(m SessionMessage, z *Sanitizer) []string {
	blocks := contentBlocks(m.Content)
	var out []string
	if m.Role == "toolResult" {
		var text []string
		for _, b := range blocks {
			if b.Type == "text" {
				text = append(text, b.Text)
			}
		}
		return []string{"[tool result]: " + cutWithDots(z.Sanitize(strings.Join(text, "\n")), toolResultPreviewChars)}
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) != "" {
				out = append(out, b.Text)
			}
		case "toolCall":
			out = append(out, "→ "+b.Name+": "+cutWithDots(z.Sanitize(compactJSON(b.Arguments)), toolArgsPreviewChars))
		}
	}
	if m.Role == "assistant" && (m.StopReason == "error" || m.ErrorMessage != "") {
		msg := m.ErrorMessage
		if msg == "" {
			msg = "the response ended with an error"
		}
		out = append(out, "[Error: "+msg+"]")
	}
	return out
}

// cutWithDots cuts s to n characters and appends "..." when it cut, as
// the delegate contract's transcript previews do.
func cutWithDots(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}
