package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// uiOptions are `subagents ui`: where the local service's UI and its key are.
type uiOptions struct {
	conn    connection.Settings
	uiURL   string
	dataDir string
}

func (o *uiOptions) register(fs *flag.FlagSet) {
	o.conn.RegisterFlags(fs)
	fs.StringVar(&o.uiURL, "ui-url", "", "the Temporal UI's address (env SUBAGENTS_UI_URL; default the frontend's port + 1000)")
	fs.StringVar(&o.dataDir, "data-dir", "", "the local service's data dir, where its API key is (default $SUBAGENTS_DATA_DIR or ~/.pi/subagents)")
}

// uiMain is `subagents ui`: the link that logs a browser into the local
// service's UI, made from its API key (docs/security.md).
func uiMain(_ context.Context, args []string, stdout, stderr io.Writer) error {
	var o uiOptions
	if _, err := ParseFlags("ui", args, stderr, o.register); err != nil {
		return err
	}
	opts, err := o.conn.ClientOptions()
	if err != nil {
		return err
	}
	dir := o.dataDir
	if dir == "" {
		if dir, err = connection.DefaultDataDir(); err != nil {
			return err
		}
	}
	key, err := connection.ReadKey(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return errcode.Errorf(errcode.ServiceUnavailable,
			"no API key in %s: start the local service first (`make run` or `subagents dev`)", dir)
	}
	if err != nil {
		return err
	}
	ui := cmp.Or(o.uiURL, os.Getenv("SUBAGENTS_UI_URL"), defaultUIURL(opts.HostPort))
	if ui == "" {
		return errcode.Errorf(errcode.InvalidInput, "no UI address for the frontend %s: pass --ui-url", opts.HostPort)
	}
	ns := cmp.Or(opts.Namespace, "default")
	_, err = fmt.Fprintln(stdout, connection.UILoginURL(ui, key, "/namespaces/"+ns+"/workflows"))
	return err
}
