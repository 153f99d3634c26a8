package activities

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestLockSession(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s.jsonl")
	first, err := lockSession(context.Background(), file, func() {})
	if err != nil {
		t.Fatal(err)
	}

	// A second attempt waits, heartbeating, until the first lets go.
	var beats atomic.Int32
	got := make(chan error, 1)
	go func() {
		l, err := lockSession(context.Background(), file, func() { beats.Add(1) })
		if err == nil {
			l.unlock()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second attempt got the lock while the first held it: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	first.unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second attempt never got the lock")
	}
	if beats.Load() == 0 {
		t.Fatal("the waiting attempt did not heartbeat")
	}

	// A cancelled attempt stops waiting.
	held, err := lockSession(context.Background(), file, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer held.unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := lockSession(ctx, file, func() {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}

// A run's record survives its holder and is read back only by the same run.
func TestLockRecord(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s.jsonl")
	l, err := lockSession(context.Background(), file, func() {})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.record("wf/run/7"); ok {
		t.Fatal("a new lock file holds a record")
	}
	if err := l.write(runRecord{Run: "wf/run/7", MessagesBefore: 12}); err != nil {
		t.Fatal(err)
	}
	// A shorter record replaces a longer one whole.
	if err := l.write(runRecord{Run: "wf/run/7", MessagesBefore: 3}); err != nil {
		t.Fatal(err)
	}
	l.unlock()

	l, err = lockSession(context.Background(), file, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer l.unlock()
	tests := []struct {
		run  string
		want int
		ok   bool
	}{
		{"wf/run/7", 3, true},
		{"wf/run/8", 0, false},
		{"other/run/7", 0, false},
	}
	for _, tt := range tests {
		got, ok := l.record(tt.run)
		if ok != tt.ok || got.MessagesBefore != tt.want {
			t.Errorf("record(%q) = %d, %v; want %d, %v", tt.run, got.MessagesBefore, ok, tt.want, tt.ok)
		}
	}
}
