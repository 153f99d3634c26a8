package activities

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestStaleSessionLocks lists what SweepSessions would remove, and
// removes nothing.
func TestStaleSessionLocks(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "sessions", "0123456789abcdef")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-LockIdle - time.Hour)
	files := []struct {
		name  string
		age   time.Time
		stale bool
	}{
		{"scout_a.jsonl", old, false},
		{"scout_a.jsonl.lock", old, true}, // idle past LockIdle
		{"scout_b.jsonl.lock", now, true}, // its session is gone
		{"scout_c.jsonl", now, false},
		{"scout_c.jsonl.lock", now, false}, // in use lately
		{"scout_d.jsonl.lock", old, false}, // held by a running attempt
	}
	for _, f := range files {
		writeAged(t, filepath.Join(dir, f.name), f.age)
	}
	hold(t, filepath.Join(dir, "scout_d.jsonl.lock"))
	got, err := StaleSessionLocks(data, now)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if f.stale {
			want = append(want, filepath.Join(dir, f.name))
		}
		if _, err := os.Stat(filepath.Join(dir, f.name)); err != nil {
			t.Errorf("%s was removed: %v", f.name, err)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stale locks %v, want %v", got, want)
	}
	if got, err := StaleSessionLocks(t.TempDir(), now); err != nil || len(got) != 0 {
		t.Fatalf("an empty data dir: %v %v", got, err)
	}
}

// TestStaleWorktrees lists the journals no attempt holds, and a journal
// that cannot be read, and leaves them all in place.
func TestStaleWorktrees(t *testing.T) {
	data := t.TempDir()
	if err := os.MkdirAll(worktreesDir(data), 0o700); err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(data, "sessions")
	if err := os.MkdirAll(sessions, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"dead", "running"} {
		j := worktreeJournal{Session: s, Repo: "/repo", Path: filepath.Join(data, "worktrees", s), Branch: BranchPrefix + s,
			SessionFile: filepath.Join(sessions, s+".jsonl")}
		b, _ := json.Marshal(j)
		if err := os.WriteFile(journalFile(data, s), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(journalFile(data, "torn"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	hold(t, filepath.Join(sessions, "running.jsonl.lock"))
	got, err := StaleWorktrees(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Session != "dead" || got[0].Branch != "subagents/dead" || got[0].Error != "" ||
		got[1].Session != "torn" || got[1].Error == "" {
		t.Fatalf("stale worktrees %+v, want dead and torn", got)
	}
	for _, s := range []string{"dead", "running", "torn"} {
		if _, err := os.Stat(journalFile(data, s)); err != nil {
			t.Errorf("journal %s: %v", s, err)
		}
	}
	if got, err := StaleWorktrees(t.TempDir()); err != nil || len(got) != 0 {
		t.Fatalf("no worktrees folder: %v %v", got, err)
	}
}

// hold takes an exclusive lock on path (made if missing) until the test
// ends, as a running attempt holds its session's lock.
// writeAged writes a file at path last changed at age.
func writeAged(t *testing.T, path string, age time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, age, age); err != nil {
		t.Fatal(err)
	}
}

func hold(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
}
