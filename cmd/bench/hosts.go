package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// hosts measures the two ways a worker can keep children ready, side by
// side in one Node script (extension/test/bench/child-hosts.mjs): a warm
// `pi --mode rpc` process per task, as the pool keeps, and one long-lived
// Node process running each task as a session of pi's SDK.
func (b *bench) hosts(n int) (string, error) {
	b.model.Script("hosts", toolStep("subagent_finalize", map[string]any{"status": "SUCCESS", "result": "done"}), textStep("done"))
	// The Node beside pi (Node 22 from the lockfile), not the machine's.
	cmd := exec.Command(filepath.Join(b.pi.PathPrefix, "node"), mustAbs("extension/test/bench/child-hosts.mjs"), fmt.Sprint(n), b.workDir,
		mustAbs("extension/child/subagent-finalize.ts"), "[[script:hosts]] Say done.")
	cmd.Dir = mustAbs("extension")
	cmd.Env = append(os.Environ(), append(scriptedmodel.PiEnv(b.agentDir), "PATH="+b.pi.PathPrefix+":"+os.Getenv("PATH"), "PI_SUBAGENT_CHILD=1")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("child-hosts.mjs: %v\n%s%s", err, out, tail(stderr.String(), 3000))
	}
	var res struct {
		RPC, SDK  []float64
		SDKRssMiB int `json:"sdkRssMiB"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return "", fmt.Errorf("child-hosts.mjs answered %q: %w", out, err)
	}
	toDur := func(v []float64) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x*float64(time.Millisecond)))
		}
		return d
	}
	rpc, sdk := toDur(res.RPC), toDur(res.SDK)
	var r strings.Builder
	r.WriteString("\n## Warm RPC children or one SDK host\n\n")
	fmt.Fprintf(&r, "Per task, from \"a task came\" to \"its run settled\" (a one-turn finalize on the scripted model), %d tasks each in turn after a warm-up, in one Node script (`extension/test/bench/child-hosts.mjs`): ", n)
	r.WriteString("a pre-started `pi --mode rpc` process with the finalize extension, pointed at the task's session file and prompted (what the worker's pool does), ")
	r.WriteString("against one long-lived Node process that runs every task as a session of pi's SDK (resource loader with the finalize extension, `createAgentSession` on the task's file, prompt, dispose).\n\n")
	r.WriteString("| host | p50 | p99 | memory |\n| --- | --- | --- | --- |\n")
	fmt.Fprintf(&r, "| warm `pi --mode rpc` child, one task each | %s | %s | about 110 MiB per warm child |\n", ms(pct(rpc, 0.5)), ms(pct(rpc, 0.99)))
	fmt.Fprintf(&r, "| SDK sessions in one Node host | %s | %s | %d MiB for the host |\n\n", ms(pct(sdk, 0.5)), ms(pct(sdk, 0.99)), res.SDKRssMiB)
	fmt.Fprintf(&r, "The SDK host would take about %s off each task. It is not taken: its sessions share one process, so they cannot keep "+
		"what the pool keeps per child: its own environment (a child's depth marker and its profile's provider key are process environment, "+
		"read by pi and its extensions), its own event loop (a child whose tool floods output, or an extension that spins, would slow every other child), "+
		"its own heap and crash (an out-of-memory child would end them all), and a process group that a runaway child's tools are killed with.\n",
		ms(pct(rpc, 0.5)-pct(sdk, 0.5)))
	return r.String(), nil
}
