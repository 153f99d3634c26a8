package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, and the
// build events go test adds to it).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string // build-output and build-fail
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// progress turns events into the lines a person watching `make test`
// wants: passes as they happen, failures in full.
type progress struct {
	out    io.Writer
	module string

	mu       sync.Mutex
	pkgs     map[string]*pkgState
	failures []string
	// where are the failed tests' messages (file:line and their first
	// line), repeated after the list of failures: a failing test's whole
	// output can be thousands of lines (a cluster's logs), and whoever
	// reads only the end of the log still learns why it failed.
	where     []string
	lastWrite time.Time
}

// pkgState is what a package said that is not shown yet.
type pkgState struct {
	output []string              // output outside any test
	tests  map[string]*testState // by top-level test name
	failed bool                  // a test of it failed (and was shown)
}

// testState is a running top-level test, subtests included.
type testState struct {
	started time.Time
	output  []string
}

func newProgress(out io.Writer, module string) *progress {
	return &progress{out: out, module: module, pkgs: map[string]*pkgState{}, lastWrite: time.Now()}
}

// read handles every line of r; a line that is not an event (go test ran
// without -json, or printed something of its own) is shown as it is.
func (p *progress) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	// test2json cuts long output into events; a megabyte-long line is a
	// test printing a blob, which must not stop the formatter.
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			p.write(string(line) + "\n")
			continue
		}
		p.handle(ev)
	}
	if err := sc.Err(); err != nil {
		p.write(fmt.Sprintf("testprogress: reading go test's output: %v\n", err))
		_, _ = io.Copy(p.out, r)
	}
}

func (p *progress) handle(ev event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Action {
	case "build-output":
		// Compiler and vet errors: shown at once, as go test would.
		p.writeLocked(ev.Output)
		return
	case "build-fail":
		p.failures = append(p.failures, p.name(ev.ImportPath)+" (build)")
		return
	}
	pkg := p.pkg(ev.Package)
	if ev.Test == "" {
		p.packageEvent(ev, pkg)
		return
	}
	top, _, isSub := strings.Cut(ev.Test, "/")
	t := pkg.tests[top]
	if t == nil {
		t = &testState{started: ev.Time}
		if t.started.IsZero() {
			t.started = time.Now()
		}
		pkg.tests[top] = t
	}
	switch ev.Action {
	case "output":
		t.output = append(t.output, ev.Output)
	case "pass", "skip", "fail":
		if isSub {
			// Its parent's end shows it (a failed subtest fails the parent).
			return
		}
		delete(pkg.tests, top)
		switch ev.Action {
		case "pass":
			p.writeLocked(fmt.Sprintf("ok   %s %s (%.2fs)\n", p.name(ev.Package), top, ev.Elapsed))
		case "skip":
			p.writeLocked(fmt.Sprintf("skip %s %s\n%s", p.name(ev.Package), top, strings.Join(t.output, "")))
		case "fail":
			pkg.failed = true
			p.failures = append(p.failures, p.name(ev.Package)+" "+top)
			for _, m := range testMessages(t.output) {
				p.where = append(p.where, p.name(ev.Package)+" "+top+": "+m)
			}
			p.writeLocked(fmt.Sprintf("FAIL %s %s (%.2fs)\n%s", p.name(ev.Package), top, ev.Elapsed, strings.Join(t.output, "")))
		}
	}
}

// packageEvent handles an event of the package itself.
func (p *progress) packageEvent(ev event, pkg *pkgState) {
	switch ev.Action {
	case "output":
		pkg.output = append(pkg.output, ev.Output)
	case "pass":
		delete(p.pkgs, ev.Package)
		p.writeLocked(fmt.Sprintf("ok   %s (%.1fs)\n", p.name(ev.Package), ev.Elapsed))
	case "skip":
		// No test files: nothing to say.
		delete(p.pkgs, ev.Package)
	case "fail":
		delete(p.pkgs, ev.Package)
		if !pkg.failed && ev.FailedBuild == "" {
			// No test failed: a crash, a timeout, TestMain, or a test
			// that never ended. Its output is all the reader has.
			p.failures = append(p.failures, p.name(ev.Package)+" (package)")
		}
		var b strings.Builder
		fmt.Fprintf(&b, "FAIL %s (%.1fs)\n", p.name(ev.Package), ev.Elapsed)
		var running []string
		for name := range pkg.tests {
			running = append(running, name)
		}
		sort.Strings(running)
		for _, name := range running {
			fmt.Fprintf(&b, "--- %s did not finish; its output:\n%s", name, strings.Join(pkg.tests[name].output, ""))
		}
		b.WriteString(strings.Join(pkg.output, ""))
		p.writeLocked(b.String())
	}
}

func (p *progress) pkg(name string) *pkgState {
	s := p.pkgs[name]
	if s == nil {
		s = &pkgState{tests: map[string]*testState{}}
		p.pkgs[name] = s
	}
	return s
}

// name is a package's import path, relative to the module.
func (p *progress) name(importPath string) string {
	if p.module == "" {
		return importPath
	}
	if importPath == p.module {
		return "."
	}
	if rest, ok := strings.CutPrefix(importPath, p.module+"/"); ok {
		return rest
	}
	return importPath
}

func (p *progress) write(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeLocked(s)
}

func (p *progress) writeLocked(s string) {
	if s == "" {
		return
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	_, _ = io.WriteString(p.out, s)
	p.lastWrite = time.Now()
}

// stillRunning names the running tests when nothing was written for quiet.
func (p *progress) stillRunning(now time.Time, quiet time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.lastWrite) < quiet {
		return
	}
	var names []string
	for pkgName, pkg := range p.pkgs {
		for name, t := range pkg.tests {
			names = append(names, fmt.Sprintf("%s %s (%s)", p.name(pkgName), name, now.Sub(t.started).Round(time.Second)))
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	p.writeLocked("...  running: " + strings.Join(names, ", ") + "\n")
}

// finish prints what failed and returns the exit code: the command's, and
// 1 when it exited 0 though a test failed.
func (p *progress) finish(code int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	// A package that never ended (go test killed) still shows its output.
	var left []string
	for name := range p.pkgs {
		left = append(left, name)
	}
	sort.Strings(left)
	for _, name := range left {
		pkg := p.pkgs[name]
		if len(pkg.tests) == 0 && len(pkg.output) == 0 {
			continue
		}
		p.packageEvent(event{Action: "fail", Package: name}, pkg)
	}
	if len(p.failures) == 0 {
		if code != 0 {
			p.writeLocked(fmt.Sprintf("FAIL: go test exited %d\n", code))
		}
		return code
	}
	if len(p.where) > 0 {
		p.writeLocked("Where they failed (each test's messages, the first line of each; the whole output is above):\n  " + strings.Join(p.where, "\n  ") + "\n")
	}
	p.writeLocked(fmt.Sprintf("FAIL: %d failed: %s\n", len(p.failures), strings.Join(p.failures, ", ")))
	if code == 0 {
		return 1
	}
	return code
}

// testMessage is the first line of a message a test logged (t.Log, t.Error,
// t.Fatal: go test prefixes each with its file and line).
var testMessage = regexp.MustCompile(`^\s+([\w.-]+_test\.go:\d+: .*)`)

// Where a failed test's messages are summed up: the last few, each cut,
// so that the summary stays a few lines however much a test logged.
const (
	maxMessages     = 8
	maxMessageRunes = 240
)

// testMessages are the first lines of the messages in a test's output, the
// last maxMessages of them.
func testMessages(output []string) []string {
	var out []string
	for _, line := range output {
		m := testMessage.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		msg := m[1]
		if r := []rune(msg); len(r) > maxMessageRunes {
			msg = string(r[:maxMessageRunes]) + "…"
		}
		out = append(out, msg)
	}
	return out[max(0, len(out)-maxMessages):]
}
