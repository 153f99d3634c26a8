package cli

// How a connection's request lines are read: bounded in length, in shared
// memory and, on the socket, in time (ServeConn's reader).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// lineChunk is the unit a line longer than the reader's buffer is held in
// while it is read: chunks come from a pool and go back to it, so a line
// refused at the limit leaves no garbage behind, and the memory a long line
// takes grows by a chunk, not by doubling.
const lineChunk = 64 << 10

var chunkPool = sync.Pool{New: func() any { return new([lineChunk]byte) }}

// headBytes is how much of a line is kept to find its ID after the line is
// refused: the ID comes first in every request a client writes.
const headBytes = 256

// lineReader splits its input on LF. A line over max bytes is refused as
// soon as it crosses the limit and its rest is skipped, unread into memory;
// so is a line the shared budget has no room for. With a deadline, a line
// must end within its timeout from its first byte.
type lineReader struct {
	r       *bufio.Reader
	max     int
	budget  *readBudget
	timeout time.Duration
	conn    interface{ SetReadDeadline(time.Time) error }

	// The line being read: held in chunks past the reader's buffer (n
	// bytes, taken from the budget in whole chunks); its first bytes; and
	// whether it has begun, and is being skipped.
	chunks        []*[lineChunk]byte
	n             int
	head          []byte
	started, skip bool
}

func newLineReader(r io.Reader, max int, opts ConnOptions) *lineReader {
	l := &lineReader{r: bufio.NewReaderSize(r, lineChunk), max: max, budget: opts.budget}
	if c, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok && opts.LineTimeout > 0 {
		l.conn, l.timeout = c, opts.LineTimeout
	}
	return l
}

// next returns the next line without its LF, valid until the next call; or,
// with refused set, the first bytes of a line that was refused and why.
func (l *lineReader) next() (line []byte, refused error, err error) {
	for {
		if !l.started {
			// Between lines a connection may stay idle as long as it likes.
			if _, err := l.r.Peek(1); err != nil {
				return nil, nil, err
			}
			l.begin()
		}
		chunk, err := l.r.ReadSlice('\n')
		if len(l.head) < headBytes && !l.skip {
			l.head = append(l.head, chunk[:min(len(chunk), headBytes-len(l.head))]...)
		}
		full := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !full && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		ended := !full // at its LF, or at the end of the input
		if l.skip {
			if ended {
				l.end()
			}
			continue
		}
		text := bytes.TrimSuffix(chunk, []byte("\n"))
		if l.n+len(text) > l.max {
			return l.refuse(ended, errcode.Errorf(errcode.InvalidInput,
				"request: longer than the limit of %d bytes (a delegation's input is at most %d KiB: name large context in files[], read on the worker)",
				l.max, client.MaxStartBytes>>10))
		}
		if ended && l.n == 0 {
			// The common case: the whole line is in the reader's buffer.
			l.end()
			return text, nil, nil
		}
		if !l.hold(text) {
			return l.refuse(ended, errcode.Errorf(errcode.ServiceUnavailable,
				"request: the service holds %s of request lines being read, its limit: try again", sizeText(l.budget.size)))
		}
		if ended {
			line = l.join()
			l.end()
			return line, nil, nil
		}
	}
}

// unanswered is the head of the line being read, unless it was refused
// already.
func (l *lineReader) unanswered() []byte {
	if l.skip {
		return nil
	}
	return l.head
}

// begin starts a line's clock.
func (l *lineReader) begin() {
	l.started = true
	if l.conn != nil {
		_ = l.conn.SetReadDeadline(time.Now().Add(l.timeout))
	}
}

// end ends a line: what it held goes back, and the clock stops.
func (l *lineReader) end() {
	l.drop()
	l.started, l.skip, l.head = false, false, l.head[:0]
	if l.conn != nil {
		_ = l.conn.SetReadDeadline(time.Time{})
	}
}

// refuse gives up the current line with why, skipping its rest unless it
// ended; its head stays for the caller to find its ID.
func (l *lineReader) refuse(ended bool, why error) ([]byte, error, error) {
	l.drop()
	head := bytes.Clone(l.head)
	if ended {
		l.end()
	} else {
		l.skip = true
	}
	return head, why, nil
}

// hold keeps p as the line's next bytes, in chunks the budget allows.
func (l *lineReader) hold(p []byte) bool {
	for len(p) > 0 {
		at := l.n % lineChunk
		if at == 0 {
			if !l.budget.take(lineChunk) {
				return false
			}
			l.chunks = append(l.chunks, chunkPool.Get().(*[lineChunk]byte))
		}
		k := copy(l.chunks[len(l.chunks)-1][at:], p)
		l.n += k
		p = p[k:]
	}
	return true
}

// join is the held line in one piece.
func (l *lineReader) join() []byte {
	line := make([]byte, 0, l.n)
	for i, c := range l.chunks {
		line = append(line, c[:min(lineChunk, l.n-i*lineChunk)]...)
	}
	return line
}

// drop gives the held chunks back to the pool and the budget.
func (l *lineReader) drop() {
	for _, c := range l.chunks {
		chunkPool.Put(c)
	}
	l.budget.give(len(l.chunks) * lineChunk)
	l.chunks, l.n = l.chunks[:0], 0
}

// sizeText says n bytes in the unit a limit is given in.
func sizeText(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// readBudget is the bytes that the connections of one socket may hold in
// lines being read, all together.
type readBudget struct {
	size int
	left atomic.Int64
}

func newReadBudget(size int) *readBudget {
	b := &readBudget{size: size}
	b.left.Store(int64(size))
	return b
}

// take reserves n bytes, if there is room; a nil budget always has room.
func (b *readBudget) take(n int) bool {
	if b == nil {
		return true
	}
	for {
		left := b.left.Load()
		if left < int64(n) {
			return false
		}
		if b.left.CompareAndSwap(left, left-int64(n)) {
			return true
		}
	}
}

func (b *readBudget) give(n int) {
	if b != nil && n > 0 {
		b.left.Add(int64(n))
	}
}

// lineWriter hands on what a verb prints, a line at a time.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.emit(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
