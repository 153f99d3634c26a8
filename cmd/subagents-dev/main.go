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

	"github.com/durable-pi/subagents/cli"
	"github.com/durable-pi/subagents/cli/dev"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, map[string]cli.Main{
		"dev":  dev.Main,
		"demo": dev.DemoMain,
	})
	stop()
	os.Exit(cli.Report(err, os.Stderr))
}
