package activities

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
)

// cutTokens are secrets of the shapes the sanitizer knows, each with the
// length of the prefix that names its kind (what may be shown).
var cutTokens = []struct{ token, prefix string }{
	{"ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "ghp_"},
	{"github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_"},
	{"sk_live_51H8yZkA2eZvKYlo2CuSeTp7x", "sk_live_"},
	{"glpat-AbCdEfGhIjKlMnOpQrSt", "glpat-"},
	{"npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm_"},
	{"sk-proj-abcdefghijklmnop1234", "sk-"},
}

// leaked is a piece of token (six characters past its prefix) that text
// still holds.
func leaked(text, token, prefix string) string {
	for i := len(prefix); i+6 <= len(token); i++ {
		if strings.Contains(text, token[i:i+6]) {
			return token[i : i+6]
		}
	}
	return ""
}

// TestEveryCutIsSanitizedFirst (issue 31, item 8): every preview, tail and
// window this package cuts is cut from sanitized text. Wherever the cut
// falls in a token (before it, through it, after it), no piece of the token
// survives: not in a tool row's arguments (cut at 120 with "…") or error
// (300), a transcript's tool call (120 with "...") or tool result (500), a
// running child's last text (its last 500 characters) or pi's stderr tail
// (8 KiB). A token after a JSON escape ("\n" in a command) is masked too.
func TestEveryCutIsSanitizedFirst(t *testing.T) {
	z := NewSanitizer("/home/alice")
	cuts := []struct {
		name string
		// at is where the cut falls; text builds the cut's result with
		// the token pad characters from the kept end (a preview's start,
		// a tail's end).
		at   int
		text func(pad int, token string) string
	}{
		{"tool row arguments", argsPreviewChars, func(pad int, token string) string {
			var s Stream
			s.Sanitizer = z
			args, _ := json.Marshal(map[string]string{"command": strings.Repeat("x", pad) + " " + token + " done"})
			s.toolStarted("c1", "bash", args)
			return s.ToolRows[0].Args
		}},
		{"tool row arguments after a JSON escape", argsPreviewChars, func(pad int, token string) string {
			var s Stream
			s.Sanitizer = z
			args, _ := json.Marshal(map[string]string{"command": strings.Repeat("x", pad) + "\n" + token + " done"})
			s.toolStarted("c1", "bash", args)
			return s.ToolRows[0].Args
		}},
		{"tool row error", toolErrorChars, func(pad int, token string) string {
			var s Stream
			s.Sanitizer = z
			s.toolStarted("c1", "bash", json.RawMessage(`{}`))
			content, _ := json.Marshal(strings.Repeat("e", pad) + " " + token + " failed")
			s.toolEnded("c1", "bash", true, &message{Content: content})
			return s.ToolRows[0].Error
		}},
		{"transcript tool call", toolArgsPreviewChars, func(pad int, token string) string {
			args, _ := json.Marshal(map[string]string{"command": strings.Repeat("x", pad) + " " + token + " done"})
			content, _ := json.Marshal([]map[string]any{{"type": "toolCall", "id": "c1", "name": "bash", "arguments": json.RawMessage(args)}})
			return FormatTranscript([]SessionMessage{{Role: "assistant", Content: content}}, nil, z)
		}},
		{"transcript tool result", toolResultPreviewChars, func(pad int, token string) string {
			content, _ := json.Marshal(strings.Repeat("r", pad) + " " + token + " listed")
			return FormatTranscript([]SessionMessage{{Role: "toolResult", Content: content}}, nil, z)
		}},
		{"last text of a running child", lastTextChars, func(pad int, token string) string {
			// The tail keeps the end: the token ends pad characters
			// before the end of the text.
			r := &childRun{a: &Activities{sanitizer: z}}
			r.stream.FinalText = "head " + token + " " + strings.Repeat("t", pad)
			return r.progress(time.Second).LastText
		}},
		{"pi's stderr tail", stderrTailBytes, func(pad int, token string) string {
			var b tailBuffer
			_, _ = b.Write([]byte("start " + token + " " + strings.Repeat("s", pad)))
			return z.Sanitize(lastLine(b.String()))
		}},
	}
	for _, c := range cuts {
		t.Run(c.name, func(t *testing.T) {
			for _, tk := range cutTokens {
				// From the token wholly inside the window to wholly
				// outside it, through every cut within it.
				for pad := c.at - len(tk.token) - 30; pad < c.at+2; pad++ {
					if pad < 0 {
						continue
					}
					got := c.text(pad, tk.token)
					if piece := leaked(got, tk.token, tk.prefix); piece != "" {
						t.Fatalf("%s, token at %d: %q survives in %q", tk.token, pad, piece, got)
					}
				}
			}
		})
	}
}

// TestSanitizeAfterAnEscape: a token that follows an escape as JSON writes
// it ("\n", "\t", "\u0022") has no word boundary before it; it is masked
// all the same, and the escape stays.
func TestSanitizeAfterAnEscape(t *testing.T) {
	z := NewSanitizer("")
	for _, esc := range []string{`\n`, `\r`, `\t`, `\u0022`} {
		in := `{"command":"echo hi` + esc + `ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 sk-abcdefghijklmnopqrstuv"}`
		want := `{"command":"echo hi` + esc + `[REDACTED github token] [REDACTED api key]"}`
		if got := z.Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	// Still no match inside a word.
	if got := z.Sanitize("xghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"); got != "xghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789" {
		t.Errorf("a token inside a word was masked: %q", got)
	}
}

// TestToolRowsAreSanitizedOnce: the rows a result and a heartbeat carry
// are the stream's, sanitized as they were made (the home path too).
func TestToolRowsAreSanitizedOnce(t *testing.T) {
	z := NewSanitizer("/home/alice")
	r := &childRun{a: &Activities{sanitizer: z}}
	r.stream.Sanitizer = z
	for i := range heartbeatToolRows + 2 {
		r.stream.toolStarted(fmt.Sprint(i), "read", json.RawMessage(`{"path":"/home/alice/src/a.go"}`))
	}
	for _, row := range r.progress(time.Second).ToolRows {
		if row.Args != `{"path":"~/src/a.go"}` {
			t.Fatalf("row %+v", row)
		}
	}
	var res api.RunPiResult
	r.a.fill(&res, r, outcome{})
	if len(res.ToolRows) != heartbeatToolRows+2 || res.ToolRows[0].Args != `{"path":"~/src/a.go"}` {
		t.Fatalf("result rows %+v", res.ToolRows)
	}
}
