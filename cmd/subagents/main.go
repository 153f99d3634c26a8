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

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/dev"
)

const usage = `usage: subagents <command> [flags]

commands:
  dev       run an embedded Temporal (SQLite file), its UI and a worker
  worker    run a worker against an external Temporal (TEMPORAL_* settings)
  profiles  list the agent profiles a task can use (--json, --cwd DIR)

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
	case "profiles":
		return client.Main(ctx, args, stdout, stderr)
	default:
		_, _ = fmt.Fprint(stderr, usage)
		return errcode.Errorf(errcode.InvalidInput, "unknown command %q", args[0])
	}
}

// report prints err as one line and returns the exit code for it.
func report(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, flag.ErrHelp) {
		return errcode.ExitOK
	}
	_, _ = fmt.Fprintf(stderr, "subagents: %v\n", err)
	return errcode.ExitCode(err)
}
