// Command buildprogress runs `go build -v ...` (the command after --) and
// turns the package names -v prints as it compiles them into one line of
// progress. The first `make build` compiles the embedded Temporal server,
// well over a thousand packages, for minutes on two cores, silently under a
// plain `go build`: a newcomer cannot tell it from a hang.
//
// On a terminal the line is redrawn in place; elsewhere (a CI log, a pipe)
// it is printed every half minute. Everything else go build says (compiler
// errors, `go: downloading ...`) is passed on as it comes, and buildprogress
// exits with go build's code. A build with nothing to compile (a warm
// cache) prints nothing more than go build would.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: buildprogress -- go build -v [flags] [packages]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	width, tty := terminalWidth(os.Stderr)
	os.Exit(run(flag.Args(), os.Stdout, os.Stderr, tty, width))
}

// terminalWidth is f's width in columns when f is a terminal. The window
// size ioctl answers for terminals only (a character device such as
// /dev/null is none), on Linux and macOS alike.
func terminalWidth(f *os.File) (int, bool) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, false
	}
	return int(ws.Col), true
}

// run runs args with its stderr read line by line, and returns the exit
// code to leave with: the command's.
func run(args []string, stdout, stderr io.Writer, tty bool, width int) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout = stdout
	errs, err := cmd.StderrPipe()
	if err != nil {
		fmt.Fprintln(stderr, "buildprogress:", err)
		return 2
	}
	// Ctrl-C reaches go build too (same process group): keep reading until
	// it has stopped, so its last words are shown. A SIGTERM for this
	// process alone is passed on.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "buildprogress: start %s: %v\n", args[0], err)
		return 2
	}
	p := newProgress(stderr, tty, width, time.Now())
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
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
				p.tick(now)
			}
		}
	}()
	sc := bufio.NewScanner(errs)
	// A compiler error is short, but a line of a tool's output need not be:
	// a long one must not stop the reader (and with it go build).
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		p.line(sc.Text(), time.Now())
	}
	if err := sc.Err(); err != nil {
		p.line("buildprogress: reading go build's output: "+err.Error(), time.Now())
		_, _ = io.Copy(stderr, errs)
	}
	err = cmd.Wait()
	close(done)
	p.finish(time.Now())
	if err != nil {
		if code := cmd.ProcessState.ExitCode(); code > 0 {
			return code
		}
		return 1 // killed by a signal
	}
	return 0
}
