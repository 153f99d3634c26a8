package activities

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// maxSessionBytes bounds what of a session file this package reads whole
// (to rewrite or append to it): hours of a busy session are tens of MiB,
// and a conversation far past any model's context window is no use to
// read further.
const maxSessionBytes = 256 << 20

// entry is one line of a pi session file (docs: session-format.md): the
// header (type "session") or an entry of the conversation's tree, with
// its id and parentId. It keeps every field as written, so that what
// this package does not change goes back as pi wrote it.
type entry map[string]json.RawMessage

// str is the string field key of e ("" when it is missing or no string).
func (e entry) str(key string) string {
	var s string
	_ = json.Unmarshal(e[key], &s)
	return s
}

// set sets field key of e to v.
func (e entry) set(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only values of this package's own making are set.
		panic(fmt.Sprintf("session entry field %s: %v", key, err))
	}
	e[key] = b
}

// entryMessage is the part of a message entry's message this package reads.
type entryMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	StopReason string          `json:"stopReason"`
	ToolName   string          `json:"toolName"`
	ToolCallID string          `json:"toolCallId"`
}

// message is e's message, for a "message" entry (nil otherwise).
func (e entry) message() *entryMessage {
	if e.str("type") != "message" {
		return nil
	}
	var m entryMessage
	if json.Unmarshal(e["message"], &m) != nil {
		return nil
	}
	return &m
}

// readEntries reads a session file's lines, at most maxBytes of them: a
// line that is not a JSON object (the end a crash cut, or a line being
// written) is skipped, as pi skips it.
func readEntries(path string, maxBytes int64) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []entry
	r := bufio.NewReaderSize(io.LimitReader(f, maxBytes), 64<<10)
	err = readLines(r, maxLineBytes, func(line []byte) {
		var e entry
		if json.Unmarshal(trimCR(line), &e) == nil && e != nil {
			out = append(out, e)
		}
	})
	return out, err
}

// newEntryID is an id for an entry this package writes: 8 hex digits, as
// pi's own.
func newEntryID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// entryTime is a session entry's timestamp: ISO 8601 in UTC, milliseconds.
func entryTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// messageText is a message's text blocks (or its string content) joined.
func messageText(content json.RawMessage) string {
	var parts []string
	for _, b := range contentBlocks(content) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
