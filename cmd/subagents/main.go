// Command subagents runs durable subagents for pi: the client verbs,
// `serve` and `worker`. It does not link the embedded Temporal server: `dev`
// and `demo` run the subagents-dev build beside it (internal/command). This
// file only wires signals and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/durable-pi/subagents/internal/command"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, map[string]command.Main{
		"dev":  command.ExecServer("dev"),
		"demo": command.ExecServer("demo"),
	})
	stop()
	os.Exit(command.Report(err, os.Stderr))
}
