// Command scripted-model serves the project's scripted OpenAI-compatible
// model for demos and manual tries: pi talks to it as to any provider, and
// it answers what the prompt's [[script:NAME]] or [[steps:[...]]] marker
// says. It writes a pi config dir that points at it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	agentDir := flag.String("agent-dir", "", "write a pi config dir (models.json, settings.json) pointing at this server here")
	scripts := flag.String("scripts", "", "JSON file of named scripts: {\"name\": [step, ...]}")
	flag.Parse()
	if err := run(*addr, *agentDir, *scripts); err != nil {
		fmt.Fprintln(os.Stderr, "scripted-model:", err)
		os.Exit(2)
	}
}

func run(addr, agentDir, scripts string) error {
	s, err := scriptedmodel.StartOn(addr)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	if scripts != "" {
		b, err := os.ReadFile(scripts)
		if err != nil {
			return err
		}
		var named map[string][]scriptedmodel.Step
		if err := json.Unmarshal(b, &named); err != nil {
			return fmt.Errorf("%s: %w", scripts, err)
		}
		for name, steps := range named {
			s.Script(name, steps...)
		}
	}
	if agentDir != "" {
		if err := s.WritePiAgentDir(agentDir); err != nil {
			return err
		}
	}
	fmt.Printf("scripted model at %s (model %s)\n", s.URL(), scriptedmodel.ModelRef)
	if agentDir != "" {
		// PI_OFFLINE: the pi that talks to this server needs no network
		// either (no model catalog refresh, no version check).
		fmt.Printf("pi config dir: %s (for pi: export PI_CODING_AGENT_DIR=%s PI_OFFLINE=1)\n", agentDir, agentDir)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	return nil
}
