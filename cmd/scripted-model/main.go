// Command scripted-model serves the project's scripted OpenAI-compatible
// model for demos and manual tries: pi talks to it as to any provider, and
// it answers what the prompt's [[script:NAME]] or [[steps:[...]]] marker
// says (or its default script, for a prompt with none), from the scripts
// of --scripts. It writes a pi config dir that points at it.
// docs/scripted-model.md describes the scripts.
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

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "scripted-model:", err)
		os.Exit(2)
	}
}

// run serves until ctx ends (SIGINT, SIGTERM).
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("scripted-model", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	agentDir := fs.String("agent-dir", "", "write a pi config dir (models.json, settings.json) pointing at this server here")
	scripts := fs.String("scripts", "", "the scripts: a folder of NAME.json files, each a list of steps, or one JSON file of named scripts {\"NAME\": [step, ...]} (docs/scripted-model.md)")
	defaultScript := fs.String("default-script", "", "the script of a conversation with no [[script:NAME]] or [[steps:...]] marker (default: the script named \"default\", if there is one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	named := map[string][]scriptedmodel.Step{}
	if *scripts != "" {
		var err error
		if named, err = scriptedmodel.LoadScripts(*scripts); err != nil {
			return err
		}
	}
	dflt := scriptedmodel.DefaultScript
	if *defaultScript != "" {
		if _, ok := named[*defaultScript]; !ok {
			where := *scripts
			if where == "" {
				where = "--scripts (none given)"
			}
			return fmt.Errorf("--default-script %s: no script named %q in %s", *defaultScript, *defaultScript, where)
		}
		dflt = *defaultScript
	}
	s, err := scriptedmodel.StartOn(*addr)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	for name, steps := range named {
		s.Script(name, steps...)
	}
	s.SetDefaultScript(dflt)
	if *agentDir != "" {
		if err := s.WritePiAgentDir(*agentDir); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "scripted model at %s (model %s)\n", s.URL(), scriptedmodel.ModelRef)
	if *agentDir != "" {
		// PI_OFFLINE: the pi that talks to this server needs no network
		// either (no model catalog refresh, no version check).
		fmt.Fprintf(stdout, "pi config dir: %s (for pi: export PI_CODING_AGENT_DIR=%s PI_OFFLINE=1)\n", *agentDir, *agentDir)
	}
	if _, ok := named[dflt]; ok {
		fmt.Fprintf(stdout, "a conversation with no marker gets script %q\n", dflt)
	}
	<-ctx.Done()
	return nil
}
