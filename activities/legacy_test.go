package activities

import (
	"os"
	"path/filepath"
	"testing"
)

// TestImportLegacySession: a session the contract's extension kept under
// ~/.pi/subagent-sessions is copied, once, to where this project keeps
// it, found by its agent, ID and the folder its header names.
func TestImportLegacySession(t *testing.T) {
	home := t.TempDir()
	write := func(hash, name, content string) string {
		p := filepath.Join(home, LegacySessionsDir, hash, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	header := func(cwd string) string {
		return `{"type":"session","version":3,"id":"x","cwd":"` + cwd + `"}` + "\n" + `{"type":"message"}` + "\n"
	}
	other := write("aaaa", "scout_s1.jsonl", header("/other"))
	mine := write("bbbb", "scout_s1.jsonl", header("/repo"))
	write("cccc", "planner_s1.jsonl", header("/repo"))

	tests := []struct {
		name, cwd, agent, id string
		want                 string
	}{
		{"its folder", "/repo", "scout", "s1", mine},
		{"another folder's", "/other", "scout", "s1", other},
		{"no such folder", "/nowhere", "scout", "s1", ""},
		{"no such agent", "/repo", "oracle", "s1", ""},
		{"a path in the ID", "/repo", "scout", "../s1", ""},
		// The ID was another session's here: the sticky session's ID has
		// the folder-and-agent suffix, its file in the contract's folder not.
		{"a suffixed ID", "/repo", "scout", "s1-0123456789ab", mine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "sessions", "h", "x.jsonl")
			got, err := importLegacySession(filepath.Join(home, LegacySessionsDir), tc.cwd, tc.agent, tc.id, dst)
			if err != nil || got != tc.want {
				t.Fatalf("imported %q, %v; want %q", got, err, tc.want)
			}
			if tc.want == "" {
				if _, err := os.Stat(dst); !os.IsNotExist(err) {
					t.Fatalf("a file was written: %v", err)
				}
				return
			}
			b, _ := os.ReadFile(dst)
			if string(b) != header(tc.cwd) {
				t.Fatalf("copy holds %q", b)
			}
			// Once: a session file already there is never replaced.
			if again, err := importLegacySession(filepath.Join(home, LegacySessionsDir), tc.cwd, tc.agent, tc.id, dst); err != nil || again != "" {
				t.Fatalf("imported again: %q %v", again, err)
			}
		})
	}
}
