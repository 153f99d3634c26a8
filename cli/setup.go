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

// setupOptions are `subagents setup`: the connection flags and the
// retention of a namespace it creates.
type setupOptions struct {
	conn      connection.Settings
	retention time.Duration
}

func (o *setupOptions) register(fs *flag.FlagSet) {
	o.conn.RegisterFlags(fs)
	o.retention = worker.DefaultRetention
	fs.Var(seconds{&o.retention}, "retention", "how long a namespace this creates keeps closed workflows: seconds or a duration like 720h (default 720h)")
}

// setupMain is `subagents setup`.
func setupMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o setupOptions
	if _, err := ParseFlags("setup", args, stderr, o.register); err != nil {
		return err
	}
	return o.run(ctx, stdout)
}

func (o *setupOptions) run(ctx context.Context, stdout io.Writer) error {
	if o.retention < 24*time.Hour {
		return errcode.Errorf(errcode.InvalidInput, "--retention must be at least 24h (Temporal's minimum), not %s", o.retention)
	}
	c, err := o.conn.Dial(ctx, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	opts, err := o.conn.ClientOptions()
	if err != nil {
		return err
	}
	return worker.Setup(ctx, c, cmpNamespace(opts.Namespace), o.retention, stdout)
}

func cmpNamespace(ns string) string {
	if ns == "" {
		return client.DefaultNamespace
	}
	return ns
}
