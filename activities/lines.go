package activities

import (
	"bufio"
	"errors"
	"io"
)

// Reading pi's output and session files line by line, each line bounded
// (maxLineBytes).

// maxLineBytes bounds one line of pi's output or session file: pi cuts
// what a tool returns to the model at 50 KB, so even an event that repeats a
// large file write stays far below it, while a child printing without a
// newline is stopped before it holds the worker's memory.
const maxLineBytes = 64 << 20

// errLineTooLong ends a reading whose line passed its bound.
var errLineTooLong = errors.New("a line is longer than the limit")

// readLines calls fn with each line of r (fn may keep it), holding at most
// maxLine bytes of a line: a longer one ends the reading at once with
// errLineTooLong (the caller decides what becomes of the rest of r).
func readLines(r io.Reader, maxLine int, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return errLineTooLong
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			fn(line)
			line = nil
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, br)
			return err
		}
	}
}
