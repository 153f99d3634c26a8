package activities

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/durable-pi/subagents/api"
)

// LegacySessionsDir is where the sessions contract's own extension keeps
// its sticky sessions, under the worker user's home:
// ~/.pi/subagent-sessions/<cwd-hash>/<agent>_<sessionId>.jsonl. A user
// who moves to this project resumes those sessions by their IDs.
const LegacySessionsDir = ".pi/subagent-sessions"

// importLegacySession copies the contract's session file of agent and
// sessionID in cwd, if dir (Config.LegacySessionsDir) holds one, to dst
// (where this project keeps that session), once: only when dst does not
// exist yet. The contract does not say how it hashes cwd, so every folder
// under dir is looked in and a file counts only if its pi header names
// cwd. The copy leaves the original where it was. It returns the file
// imported, "" for none.
func importLegacySession(dir, cwd, agent, sessionID, dst string) (string, error) {
	if dir == "" || !api.ValidName(sessionID) {
		return "", nil
	}
	if _, err := os.Lstat(dst); err == nil || !os.IsNotExist(err) {
		return "", nil
	}
	var matches []string
	for _, id := range legacyIDs(sessionID) {
		found, err := filepath.Glob(filepath.Join(dir, "*", api.AgentName(agent)+"_"+id+".jsonl"))
		if err == nil {
			matches = append(matches, found...)
		}
	}
	for _, src := range matches {
		if headerCwd(src) != cwd {
			continue
		}
		if err := copyNew(src, dst); err != nil {
			return "", fmt.Errorf("import %s: %w", src, err)
		}
		return src, nil
	}
	return "", nil
}

// stickySuffix is the suffix client/sticky.go gives a sticky session's ID
// when that ID names another session already (another agent's, or
// another folder's): "-" and 12 hex digits.
var stickySuffix = regexp.MustCompile(`-[0-9a-f]{12}$`)

// legacyIDs are the IDs a session's file may have had in the contract's
// folder: its own, and the caller's ID a sticky suffix was added to.
func legacyIDs(sessionID string) []string {
	ids := []string{sessionID}
	if loc := stickySuffix.FindStringIndex(sessionID); loc != nil && loc[0] > 0 {
		ids = append(ids, sessionID[:loc[0]])
	}
	return ids
}

// headerCwd is the folder a pi session file's header names ("" if none):
// its first line, {"type":"session",...,"cwd":...}.
func headerCwd(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	// A header is a short line; 64 KiB holds any folder's path.
	line, err := bufio.NewReaderSize(io.LimitReader(f, 64<<10), 64<<10).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return ""
	}
	var h struct {
		Type string `json:"type"`
		Cwd  string `json:"cwd"`
	}
	if json.Unmarshal(line, &h) != nil || h.Type != "session" {
		return ""
	}
	return h.Cwd
}

// copyNew copies src to dst, a file that must not exist yet, private to
// the user as this project's session files are.
func copyNew(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		_ = os.Remove(dst)
		return err
	}
	return out.Close()
}
