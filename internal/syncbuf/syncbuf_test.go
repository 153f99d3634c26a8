package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

func TestBufferConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "x\n"); got != 400 {
		t.Fatalf("%d writes kept, want 400", got)
	}
}
