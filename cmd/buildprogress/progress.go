package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
)

const (
	// showAfter is how long a build runs before a terminal shows its line:
	// a rebuild of a few packages ends first and prints nothing extra.
	showAfter = 2 * time.Second
	// every is how often a line is printed where there is no terminal to
	// redraw one in: often enough that a log shows the build is alive, rarely
	// enough that a seven-minute build is fourteen lines.
	every = 30 * time.Second
	// redrawEvery bounds the terminal's redraws: go build names hundreds of
	// standard packages within a second.
	redrawEvery = 100 * time.Millisecond
)

// importPath is a line `go build -v` prints for a package it compiles: an
// import path alone (command-line-arguments included). Its own messages and
// the compiler's have spaces (`# pkg`, `file.go:3:1: undefined: x`,
// `go: downloading m v1.2.3`).
var importPath = regexp.MustCompile(`^[A-Za-z0-9_.~+-]+(/[A-Za-z0-9_.~+-]+)*$`)

// isPackage says whether line is go build -v naming a package it compiles.
func isPackage(line string) bool {
	return importPath.MatchString(line)
}

// status is the progress line: how many packages go build has started to
// compile, the latest, and the time since it started. Cut to width (a
// terminal's columns, 0 when none), since a line that wraps cannot be
// redrawn in place.
func status(count int, pkg string, elapsed time.Duration, width int) string {
	s := fmt.Sprintf("compiling package %d: %s (%s)", count, pkg, elapsed.Round(time.Second))
	if width <= 1 {
		return s
	}
	r := []rune(s)
	if len(r) < width {
		return s
	}
	// One column short of the width: a line that fills it wraps on some
	// terminals.
	return string(r[:width-2]) + "…"
}

// summary is the last line, after a build that showed progress: what it
// cost.
func summary(count int, elapsed time.Duration) string {
	noun := "packages"
	if count == 1 {
		noun = "package"
	}
	return fmt.Sprintf("compiled %d %s in %s", count, noun, elapsed.Round(time.Second))
}

// progress is what buildprogress shows of one go build: package lines
// counted, every other line passed on, a status line now and then.
type progress struct {
	out   io.Writer
	tty   bool
	width int
	start time.Time

	mu      sync.Mutex
	count   int    // package lines so far
	latest  string // the last package named
	drawn   string // the status line on the terminal now (tty)
	shown   bool   // a status line was shown
	lastOut time.Time
}

func newProgress(out io.Writer, tty bool, width int, start time.Time) *progress {
	return &progress{out: out, tty: tty, width: width, start: start}
}

// line handles one line of go build's stderr.
func (p *progress) line(s string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !isPackage(s) {
		// An error, or go's own news: the reader needs it whole, on a line
		// of its own; the status line comes back at the next tick.
		p.clear()
		_, _ = io.WriteString(p.out, s+"\n")
		return
	}
	p.count++
	p.latest = s
	if p.tty && p.shown && now.Sub(p.lastOut) >= redrawEvery {
		p.draw(now)
	}
}

// tick shows the status line when it is due.
func (p *progress) tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count == 0 {
		return // nothing compiles (yet): a warm cache, or modules downloading
	}
	if p.tty {
		if now.Sub(p.start) >= showAfter {
			p.draw(now)
		}
		return
	}
	if now.Sub(p.start) >= every && now.Sub(p.lastOut) >= every {
		p.draw(now)
	}
}

// finish replaces the status line, if one was shown, with the summary.
func (p *progress) finish(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.shown {
		return
	}
	p.clear()
	_, _ = io.WriteString(p.out, summary(p.count, now.Sub(p.start))+"\n")
}

// draw shows the status line: in place on a terminal, else as a line.
func (p *progress) draw(now time.Time) {
	s := status(p.count, p.latest, now.Sub(p.start), p.width)
	switch {
	case !p.tty:
		_, _ = io.WriteString(p.out, s+"\n")
	case s == p.drawn:
		return // a tick within the same second
	default:
		// Blanks over what is left of a longer line: no escape sequences,
		// so a dumb terminal shows it as well.
		pad := max(0, len([]rune(p.drawn))-len([]rune(s)))
		_, _ = io.WriteString(p.out, "\r"+s+strings.Repeat(" ", pad))
		p.drawn = s
	}
	p.shown = true
	p.lastOut = now
}

// clear takes the status line off the terminal, so that the next output
// starts at its first column.
func (p *progress) clear() {
	if !p.tty || p.drawn == "" {
		return
	}
	_, _ = io.WriteString(p.out, "\r"+strings.Repeat(" ", len([]rune(p.drawn)))+"\r")
	p.drawn = ""
}
