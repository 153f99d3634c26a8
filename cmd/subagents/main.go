// Command subagents runs durable subagents for pi: the client verbs,
// `serve` and `worker`. It does not link the embedded Temporal server: `dev`
// and `demo` run the subagents-dev build beside it (package cli). This
// file only wires signals and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/durable-pi/subagents/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, map[string]cli.Main{
		"dev":  cli.ExecServer("dev"),
		"demo": cli.ExecServer("demo"),
	})
	stop()
	os.Exit(cli.Report(err, os.Stderr))
}
