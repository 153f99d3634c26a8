// Command subagents runs durable subagents for pi: `dev` (embedded Temporal,
// UI and worker), `worker` (against an external Temporal), and the client
// verbs. This file only wires signals and exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/dev"
)

// Exit codes: what a script calling subagents can branch on.
const (
	exitOK          = 0
	exitFailed      = 1 // the task ran and failed, or an unexpected error
	exitBadInput    = 2 // the request or the set-up is wrong: fix and retry
	exitUnavailable = 3 // Temporal cannot be reached: start it and retry
)

const usage = `usage: subagents <command> [flags]

commands:
  dev      run an embedded Temporal (SQLite file), its UI and a worker
  worker   run a worker against an external Temporal (TEMPORAL_* settings)

Run "subagents <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return errcode.New(errcode.InvalidInput, "no command given")
	}
	switch args[0] {
	case "dev":
		return dev.Main(ctx, args[1:], stdout, stderr)
	case "worker":
		return worker.Main(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		_, _ = fmt.Fprint(stdout, usage)
		return nil
	default:
		_, _ = fmt.Fprint(stderr, usage)
		return errcode.Errorf(errcode.InvalidInput, "unknown command %q", args[0])
	}
}

// report prints err as one line and returns the exit code for it.
func report(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	_, _ = fmt.Fprintf(stderr, "subagents: %v\n", err)
	switch errcode.CodeOf(err).Category() {
	case errcode.CategoryInvalidInput, errcode.CategoryNotFound, errcode.CategoryPermission:
		return exitBadInput
	case errcode.CategoryUnavailable:
		return exitUnavailable
	default:
		return exitFailed
	}
}
