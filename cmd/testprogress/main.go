// Command testprogress runs `go test -json ...` (the command after --) and
// shows its progress as it goes: one line per top-level test as it passes
// (the e2e package alone runs for minutes, silent under plain `go test`),
// the whole output of a test or package that fails, and a line now and
// then naming the tests still running. It exits with the command's code,
// and non-zero whenever a test failed, so `make test` fails as before.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: testprogress -- go test -json [flags] [packages]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(flag.Args(), os.Stdout, os.Stderr))
}

// quietAfter is how long the output may stay silent before a line names
// the tests still running: long enough to say nothing during the quick
// packages, short enough that a minute-long e2e test shows it is alive.
const quietAfter = time.Minute

// run runs args, formats its stdout and returns the exit code to leave with.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "testprogress:", errcode.Wrap(errcode.Failed, err, err.Error()))
		return 2
	}
	// Ctrl-C reaches go test too (same process group): keep reading until
	// it has said what failed. A SIGTERM for this process alone is passed on.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testprogress:", errcode.Wrap(errcode.InvalidInput, err, "start "+args[0]+": "+err.Error()))
		return 2
	}
	p := newProgress(stdout, modulePath("go.mod"))
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(quietAfter / 4)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case s := <-signals:
				if s == syscall.SIGTERM {
					_ = cmd.Process.Signal(s)
				}
			case now := <-tick.C:
				p.stillRunning(now, quietAfter)
			}
		}
	}()
	p.read(out)
	err = cmd.Wait()
	close(done)
	code := 0
	if err != nil {
		code = cmd.ProcessState.ExitCode()
		if code <= 0 {
			code = 1
		}
	}
	return p.finish(code)
}

// modulePath is the module named in the go.mod at path ("" when none):
// package names are shown relative to it.
func modulePath(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
