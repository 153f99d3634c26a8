// Command subagents-dev is the subagents command with the embedded Temporal
// server and UI linked in: `subagents dev` and `subagents demo` run it (it
// answers every other command too). This file only wires signals and exit
// codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/durable-pi/subagents/internal/command"
	"github.com/durable-pi/subagents/internal/demo"
	"github.com/durable-pi/subagents/worker/dev"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, map[string]command.Main{
		"dev":  dev.Main,
		"demo": demo.Main,
	})
	stop()
	os.Exit(command.Report(err, os.Stderr))
}
