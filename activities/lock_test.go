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
	unlock, err := lockSession(context.Background(), file, func() {})
	if err != nil {
		t.Fatal(err)
	}

	// A second attempt waits, heartbeating, until the first lets go.
	var beats atomic.Int32
	got := make(chan error, 1)
	go func() {
		u, err := lockSession(context.Background(), file, func() { beats.Add(1) })
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second attempt got the lock while the first held it: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	unlock()
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
	unlock, err = lockSession(context.Background(), file, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := lockSession(ctx, file, func() {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}
