// Command npmci runs `npm ci` (or the command after --) in a folder and
// passes its output through, except npm's EBADENGINE warnings that the Node
// npm ci installed beside pi satisfies: on a machine whose node is 20, every
// package of pi warns that it wants Node >= 22, five lines each, although
// pi never runs on the machine's node (the Makefile and bin/pi put the Node
// 22 from the lockfile first on PATH). Those become one line saying so;
// every other warning, and any EBADENGINE warning that Node does not
// satisfy, is printed as npm wrote it. The exit code is the command's.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/durable-pi/subagents/internal/errcode"
)

func main() {
	dir := flag.String("dir", ".", "folder to run the command in (its node_modules/.bin/node is the Node beside pi)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: npmci [-dir DIR] -- npm ci [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	// Ctrl-C reaches npm too (same process group): wait for it to stop
	// instead of dying first and losing what it says.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	os.Exit(run(*dir, flag.Args(), os.Stdout, os.Stderr))
}

// run runs args in dir, filters its output to stdout and returns the exit
// code to leave with.
func run(dir string, args []string, stdout, stderr io.Writer) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	r, w := io.Pipe()
	// One pipe for both streams keeps npm's order of lines.
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "npmci:", errcode.Wrap(errcode.InvalidInput, err, "start "+args[0]+": "+err.Error()))
		return 2
	}
	f := &filter{out: stdout}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		f.read(r)
	}()
	err := cmd.Wait()
	_ = w.Close()
	<-scanned
	code := cmd.ProcessState.ExitCode()
	if err != nil && code == 0 {
		code = 1
	}
	beside := ""
	if code == 0 {
		beside = nodeVersion(filepath.Join(dir, "node_modules", ".bin", "node"))
	}
	f.finish(beside, filepath.Join(dir, "node_modules", ".bin", "node"))
	return code
}

// nodeVersion is what node --version prints ("v22.23.3"), or "" when it
// does not run.
func nodeVersion(node string) string {
	// node --version answers in milliseconds; this only guards a hang.
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// filter passes lines through and holds back EBADENGINE warnings until the
// end, when the Node beside pi is known.
type filter struct {
	out    io.Writer
	held   []engineWarning
	inWarn *engineWarning
}

// engineWarning is one EBADENGINE block as npm prints it:
//
//	npm warn EBADENGINE Unsupported engine {
//	npm warn EBADENGINE   package: 'chalk@6.0.0',
//	npm warn EBADENGINE   required: { node: '>=22' },
//	npm warn EBADENGINE   current: { node: 'v20.20.2', npm: '11.19.1' }
//	npm warn EBADENGINE }
type engineWarning struct {
	lines                  []string
	pkg, required, current string
}

const enginePrefix = "npm warn EBADENGINE"

func (f *filter) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	// npm's lines are short; a long one (a stack) must not stop the copy.
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		f.line(sc.Text())
	}
	// Whatever is left after a read error still goes out unfiltered.
	_, _ = io.Copy(f.out, r)
}

func (f *filter) line(s string) {
	if !strings.HasPrefix(s, enginePrefix) {
		f.flushOpen()
		fmt.Fprintln(f.out, s)
		return
	}
	rest := strings.TrimSpace(strings.TrimPrefix(s, enginePrefix))
	if f.inWarn == nil {
		f.inWarn = &engineWarning{}
	}
	w := f.inWarn
	w.lines = append(w.lines, s)
	switch {
	case strings.HasPrefix(rest, "package:"):
		w.pkg = quoted(rest)
	case strings.HasPrefix(rest, "required:"):
		w.required = quotedAfter(rest, "node:")
	case strings.HasPrefix(rest, "current:"):
		w.current = quotedAfter(rest, "node:")
	case rest == "}":
		f.held = append(f.held, *w)
		f.inWarn = nil
	}
}

// flushOpen keeps a block npm left unfinished as it was.
func (f *filter) flushOpen() {
	if f.inWarn != nil {
		f.held = append(f.held, *f.inWarn)
		f.inWarn = nil
	}
}

// finish prints the held warnings: those the Node beside pi (version
// beside, "" when unknown) satisfies as one line, the others verbatim.
func (f *filter) finish(beside, node string) {
	f.flushOpen()
	var harmless []engineWarning
	for _, w := range f.held {
		if beside != "" && w.pkg != "" && satisfies(beside, w.required) {
			harmless = append(harmless, w)
			continue
		}
		for _, l := range w.lines {
			fmt.Fprintln(f.out, l)
		}
	}
	if len(harmless) == 0 {
		return
	}
	wants := map[string]bool{}
	var ranges []string
	for _, w := range harmless {
		if !wants[w.required] {
			wants[w.required] = true
			ranges = append(ranges, w.required)
		}
	}
	current := harmless[0].current
	fmt.Fprintf(f.out, "npm ci: %d EBADENGINE warnings (packages asking for Node %s; this machine's node is %s) left out: harmless, pi runs on the Node %s that npm ci installed beside it (%s)\n",
		len(harmless), strings.Join(ranges, ", "), current, beside, node)
}

// quoted is the first '...' value in s.
func quoted(s string) string {
	i := strings.IndexByte(s, '\'')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(s[i+1:], '\'')
	if j < 0 {
		return ""
	}
	return s[i+1 : i+1+j]
}

// quotedAfter is the '...' value after key in s.
func quotedAfter(s, key string) string {
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	return quoted(s[i+len(key):])
}
