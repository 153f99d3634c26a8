package cli

import (
	"context"
	"flag"
	"io"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/worker"
)

// setupMain is `subagents setup`.
func setupMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("subagents setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn connection.Settings
	conn.RegisterFlags(fs)
	retention := fs.Duration("retention", worker.DefaultRetention, "how long a namespace this creates keeps closed workflows")
	if err := fs.Parse(args); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	if *retention < 24*time.Hour {
		return errcode.Errorf(errcode.InvalidInput, "--retention must be at least 24h (Temporal's minimum), not %s", *retention)
	}
	c, err := conn.Dial(ctx, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	opts, err := conn.ClientOptions()
	if err != nil {
		return err
	}
	return worker.Setup(ctx, c, cmpNamespace(opts.Namespace), *retention, stdout)
}

func cmpNamespace(ns string) string {
	if ns == "" {
		return client.DefaultNamespace
	}
	return ns
}
