// Command scripted-model serves the project's scripted OpenAI-compatible
// model for demos and manual tries: pi talks to it as to any provider, and
// it answers what the prompt's [[script:NAME]] or [[steps:[...]]] marker
// says. It writes a pi config dir that points at it.
package main

import (
	"context"
	"encoding/json"
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
	scripts := fs.String("scripts", "", "JSON file of named scripts: {\"name\": [step, ...]}")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := scriptedmodel.StartOn(*addr)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	if *scripts != "" {
		b, err := os.ReadFile(*scripts)
		if err != nil {
			return err
		}
		var named map[string][]scriptedmodel.Step
		if err := json.Unmarshal(b, &named); err != nil {
			return fmt.Errorf("%s: %w", *scripts, err)
		}
		for name, steps := range named {
			s.Script(name, steps...)
		}
	}
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
	<-ctx.Done()
	return nil
}
