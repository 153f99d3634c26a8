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
	"slices"
	"syscall"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/demo"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/worker"
	"github.com/durable-pi/subagents/worker/dev"
)

const usage = `usage: subagents <command> [flags]

commands:
  dev         run an embedded Temporal (SQLite file), its UI and a worker
  worker      run a worker against an external Temporal (TEMPORAL_* settings)
  demo        the whole stack with a scripted model: a delegation survives a worker kill
  run         start tasks and wait, with live progress: run [--agent NAME] PROMPT
  start       start tasks and return their task IDs at once (--input - reads JSON)
  status      where tasks, sessions or delegations stand: status ID...
  wait        wait until they end: wait [--timeout 30s] ID...
  send        a follow-up prompt for a session: send ID PROMPT
  cancel      stop running work; finished tasks keep their results: cancel ID...
  list        delegations and sessions (--status --agent --parent-session --cwd)
  output      a session's final text (--full for all of it): output ID
  transcript  a session's whole conversation: transcript ID
  ack         a parent received a delegation's results: ack ID
  profiles    the agent profiles a task can use (--cwd DIR)
  serve       answer many of these calls over one connection: JSON lines on stdin and stdout (the pi extension's way)

Every client command takes --json: one envelope on stdout (contract_version
subagents.v1). Exit codes: 0 done, 1 a task failed, 2 bad input or not found,
3 Temporal unavailable, 4 a wait ended before the work did.

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
	case "demo":
		return demo.Main(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		_, _ = fmt.Fprint(stdout, usage)
		return nil
	default:
		// The client answers an unknown verb asked for --json with a coded
		// envelope; a person gets the usage.
		if slices.Contains(client.Verbs, args[0]) || client.WantsJSON(args[1:]) {
			return client.Main(ctx, args, client.IO{In: os.Stdin, Out: stdout, Err: stderr})
		}
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
