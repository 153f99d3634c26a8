// Package syncbuf holds a buffer that a process's output and its reader
// can use at once: the tests and the bench watch a child's output for a
// line while the child still writes.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer is a strings.Builder safe for one writer and many readers.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
