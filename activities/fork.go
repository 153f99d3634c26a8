package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// A context fork (RunPiInput.ForkFrom) starts a session's child from a copy
// of its parent's conversation instead of an empty session: before the
// session's first run, the worker writes the child's session file from the
// parent's pi session file, and the child's prompt then runs on it as a
// resumed session's does.
//
// The copy is the parent's conversation as pi would send it to a model
// (session-format.md): the path from the file's last entry (its leaf) to
// the root, in a file of its own, with its own header (a new id, the
// child's cwd, parentSession naming the parent's file) and each entry
// linked to the one before it. Left out are what is the parent's and not
// the conversation's:
//
//   - the delegation machinery: the calls of this project's delegation
//     tools (profiles.DelegationTools; the parent's last message is the very
//     call that started this child) and their results, and the results
//     the parent's extension delivered as messages (deliveryMessageType).
//     A child never has those tools, and a conversation about delegating
//     would only invite it to try;
//   - the parent's system messages (its prompt and tool declarations,
//     delegation tools among them) and model or thinking changes: the
//     child's own pi declares its prompt, tools and model on its first
//     request, as pi does for a session written before system messages;
//   - labels, names, usage records and extensions' state, which are no
//     part of what a model reads.
//
// Trust: unlike a profile or an extension, which decide what a child may
// run, the parent's session file is the user's own conversation, read as
// text into the child's context; nothing in it runs. profiles' trust check
// (whose writing the worker accepts in what a child loads) is not needed
// for it. Whoever could name another file here can start a child with any
// prompt and a bash tool anyway.

// fork writes the session's file from its parent's (in.ForkFrom) when it
// does not exist yet: the session's first run. forked says it did.
func (a *Activities) fork(ctx context.Context, in api.RunPiInput, file string) (forked bool, err error) {
	// Lstat: a warm child's slot link is a file that exists.
	if _, err := os.Lstat(file); !errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err := forkSession(in.ForkFrom, file, in.Cwd); err != nil {
		activity.GetLogger(ctx).Warn("context fork refused", "session", in.SessionID, "error", a.sanitizer.Sanitize(err.Error()))
		return false, err
	}
	return true, nil
}

// deliveryMessageType is the customType of the messages in which the
// parent's extension delivers a background delegation's result
// (RESULT_MESSAGE_TYPE in extension/src/delivery.ts).
const deliveryMessageType = "subagents-result"

// forkSession writes file, the child's session file (it must not exist),
// from parent, the parent's pi session file, for a child in cwd. A parent
// file that is missing, unreadable or no pi session file is INVALID_INPUT,
// naming it; what fails writing file is not.
func forkSession(parent, file, cwd string) error {
	if !filepath.IsAbs(parent) {
		return errcode.Errorf(errcode.InvalidInput, "context fork: the parent's session file %q is not an absolute path", parent)
	}
	info, err := os.Stat(parent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errcode.Errorf(errcode.InvalidInput, "context fork: the parent's session file %s does not exist", parent)
	case err != nil:
		return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("context fork: cannot read the parent's session file %s: %v", parent, pathErr(err)))
	case !info.Mode().IsRegular():
		return errcode.Errorf(errcode.InvalidInput, "context fork: the parent's session file %s is not a file", parent)
	case info.Size() > maxSessionBytes:
		return errcode.Errorf(errcode.InvalidInput, "context fork: the parent's session file %s is larger than %s", parent, sizeText(maxSessionBytes))
	}
	entries, err := readEntries(parent, maxSessionBytes)
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("context fork: cannot read the parent's session file %s: %v", parent, pathErr(err)))
	}
	if len(entries) == 0 || entries[0].str("type") != "session" {
		return errcode.Errorf(errcode.InvalidInput, "context fork: %s is not a pi session file (its first line is no session header)", parent)
	}
	lines, err := forkLines(entries, parent, cwd, time.Now())
	if err != nil {
		return err
	}
	return writeNew(file, lines)
}

// pathErr is err without the path an *fs.PathError repeats.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// forkLines are the lines of the child's session file: its header, then
// the parent's conversation path without what forkSession leaves out.
func forkLines(entries []entry, parent, cwd string, now time.Time) ([][]byte, error) {
	head, path := entries[0], conversationPath(entries[1:])
	var version int
	_ = json.Unmarshal(head["version"], &version)
	header := entry{}
	header.set("type", "session")
	// An entry list without ids (version 1) gets them below: it is then
	// version 2's tree, which pi migrates on to its current version.
	header.set("version", max(version, 2))
	header.set("id", uuid.NewString())
	header.set("timestamp", entryTime(now))
	header.set("cwd", cwd)
	header.set("parentSession", parent)

	dropped := map[string]bool{} // delegation calls left out, by call ID
	leftOut := map[string]bool{} // entries left out, by entry ID
	var kept []entry
	for _, e := range path {
		if e.str("id") == "" {
			e.set("id", newEntryID())
		}
		keep := forkEntry(e, dropped)
		if keep != nil && keep.str("type") == "context_edit" && leftOut[keep.str("targetId")] {
			// It edits what is left out.
			keep = nil
		}
		if keep != nil {
			kept = append(kept, keep)
		} else {
			leftOut[e.str("id")] = true
		}
	}
	// An entry left out that a compaction kept from (firstKeptEntryId)
	// stands for the next entry kept after it: the compaction itself at
	// the latest, which then keeps none.
	next := map[string]string{}
	following := ""
	keptIdx := len(kept) - 1
	for i := len(path) - 1; i >= 0; i-- {
		id := path[i].str("id")
		if keptIdx >= 0 && kept[keptIdx].str("id") == id {
			following = id
			keptIdx--
			continue
		}
		next[id] = following
	}
	lines := make([][]byte, 0, len(kept)+1)
	b, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	lines = append(lines, b)
	var parentID any
	for _, e := range kept {
		if first := e.str("firstKeptEntryId"); e.str("type") == "compaction" && leftOut[first] {
			e.set("firstKeptEntryId", next[first])
		}
		e.set("parentId", parentID)
		parentID = e.str("id")
		b, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		lines = append(lines, b)
	}
	return lines, nil
}

// conversationPath is the entries from the root to the file's leaf (its
// last entry with an id), as pi builds a session's context; entries that
// have no ids (a version 1 file) are the path in their order.
func conversationPath(entries []entry) []entry {
	byID := map[string]entry{}
	leaf := ""
	for _, e := range entries {
		if id := e.str("id"); id != "" {
			byID[id] = e
			leaf = id
		}
	}
	if leaf == "" {
		return entries
	}
	var path []entry
	seen := map[string]bool{}
	for id := leaf; id != "" && !seen[id]; {
		e, ok := byID[id]
		if !ok {
			break
		}
		seen[id] = true
		path = append(path, e)
		id = e.str("parentId")
	}
	slices.Reverse(path)
	return path
}

// forkEntry is e as the child's session file keeps it, or nil when it is
// left out; a delegation call it takes out of an assistant message goes
// into dropped, so that its result goes too.
func forkEntry(e entry, dropped map[string]bool) entry {
	switch e.str("type") {
	case "message":
		return forkMessage(e, dropped)
	case "compaction":
		// Its systemMessage is the parent's prompt and tools; without
		// it, the compaction is as pi wrote it before it kept one.
		delete(e, "systemMessage")
		return e
	case "branch_summary", "context_edit":
		return e
	case "custom_message":
		if e.str("customType") == deliveryMessageType {
			return nil
		}
		return e
	}
	// model_change, thinking_level_change, usage, custom, label,
	// session_info, and any type this pi does not write.
	return nil
}

// forkMessage is forkEntry for a message entry.
func forkMessage(e entry, dropped map[string]bool) entry {
	m := e.message()
	if m == nil {
		return nil
	}
	switch m.Role {
	case "system":
		return nil
	case "toolResult":
		if dropped[m.ToolCallID] || slices.Contains(profiles.DelegationTools, m.ToolName) {
			return nil
		}
	case "assistant":
		return forkAssistant(e, dropped)
	}
	return e
}

// forkAssistant takes the delegation calls out of an assistant message: a
// message left with no text and no call goes, and one left with no call
// ended its turn (stop reason "stop").
func forkAssistant(e entry, dropped map[string]bool) entry {
	var msg map[string]json.RawMessage
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(e["message"], &msg) != nil || json.Unmarshal(msg["content"], &blocks) != nil {
		// A string content (no calls) or one this package cannot read:
		// as it is.
		return e
	}
	str := func(b map[string]json.RawMessage, key string) string {
		var s string
		_ = json.Unmarshal(b[key], &s)
		return s
	}
	var out []map[string]json.RawMessage
	text, calls, removed := false, false, false
	for _, b := range blocks {
		switch str(b, "type") {
		case "toolCall":
			if slices.Contains(profiles.DelegationTools, str(b, "name")) {
				dropped[str(b, "id")] = true
				removed = true
				continue
			}
			calls = true
		case "text":
			text = text || str(b, "text") != ""
		}
		out = append(out, b)
	}
	if !removed {
		return e
	}
	if !text && !calls {
		return nil
	}
	content, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	msg["content"] = content
	if !calls && str(msg, "stopReason") == "toolUse" {
		msg["stopReason"] = json.RawMessage(`"stop"`)
	}
	e.set("message", msg)
	return e
}

// writeNew writes lines to file, which must not exist: through a
// temporary file renamed into place, so that a crash leaves no half file
// a retry would take for the fork.
func writeNew(file string, lines [][]byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".fork-*.jsonl")
	if err != nil {
		return err
	}
	var body []byte
	for _, l := range lines {
		body = append(append(body, l...), '\n')
	}
	_, werr := tmp.Write(body)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	// A link, not a rename: a file that appeared meanwhile is not
	// replaced.
	if err := os.Link(tmp.Name(), file); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Remove(tmp.Name())
}
