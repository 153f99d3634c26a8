package activities

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSweepSessions: lock and full-output files go with their session file,
// and an idle lock goes after LockIdle; a held lock, a fresh one and
// everything of a session that is still there stay.
func TestSweepSessions(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "sessions", "0123456789abcdef")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-LockIdle - time.Hour)
	files := []struct {
		name string
		age  time.Time
		keep bool
	}{
		{"scout_a.jsonl", old, true},             // a session file is never removed
		{"scout_a.jsonl.lock", old, false},       // idle past LockIdle
		{"scout_a.turn-1.output.md", old, true},  // its session is there
		{"scout_b.jsonl.lock", now, false},       // its session is gone
		{"scout_b.turn-2.output.md", now, false}, // its session is gone
		{"scout_c.jsonl", now, true},             //
		{"scout_c.jsonl.lock", now, true},        // in use lately
		{"scout_d.jsonl.lock", old, true},        // held by a running attempt
		{"notes.md", old, true},                  // not ours
	}
	for _, f := range files {
		writeAged(t, filepath.Join(dir, f.name), f.age)
	}
	hold(t, filepath.Join(dir, "scout_d.jsonl.lock"))
	n, err := SweepSessions(data, now)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, f := range files {
		_, err := os.Stat(filepath.Join(dir, f.name))
		if kept := err == nil; kept != f.keep {
			t.Errorf("%s: kept %v, want %v", f.name, kept, f.keep)
		}
		if !f.keep {
			want++
		}
	}
	if n != want {
		t.Errorf("removed %d, want %d", n, want)
	}
	if n, err := SweepSessions(t.TempDir(), now); n != 0 || err != nil {
		t.Fatalf("a data dir with no sessions: %d, %v", n, err)
	}
}

// TestLockAfterSweep: an attempt that opened a lock file a sweep then
// removed locks the file at the path, the one the next attempt sees.
func TestLockAfterSweep(t *testing.T) {
	session := filepath.Join(t.TempDir(), "s.jsonl")
	l, err := lockSession(t.Context(), session, func() {})
	if err != nil {
		t.Fatal(err)
	}
	l.unlock()
	if !removeUnlocked(session + ".lock") {
		t.Fatal("an unheld lock was not removed")
	}
	l, err = lockSession(t.Context(), session, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer l.unlock()
	if !current(l.f, session+".lock") {
		t.Fatal("the lock held is not the file at the path")
	}
	if removeUnlocked(session + ".lock") {
		t.Fatal("a held lock was removed")
	}
}
