package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestFirstHourPiExtension is the README's first delegation on a fresh
// machine: a shell with an empty HOME, no pi on PATH and the machine's own
// node first (older than pi needs, on this machine), runs `make
// pi-extension`, then `bin/pi -p` in a project folder. The delegation is
// answered inside pi through the installed extension (no -e), by a service
// the extension started itself from the source tree's bin/subagents.
func TestFirstHourPiExtension(t *testing.T) {
	// Not parallel: make pi-extension rewrites extension/dist/extension.js
	// and bin/ in the checkout, which the other tests' pi load and run.
	e := newEnv(t)
	w := e.newLocalWorld()
	root := checkoutRoot(t)
	env := append(freshShellEnv(t, w.home),
		// The scripted model's pi config dir, where pi install records the
		// package, and the test's own service address and data dir.
		"PI_CODING_AGENT_DIR="+e.agentDir, "PI_OFFLINE=1",
		"TEMPORAL_ADDRESS="+w.address, "SUBAGENTS_DATA_DIR="+w.dataDir,
	)
	if p := lookPathInEnv(env, "pi"); p != "" {
		t.Fatalf("the new user's shell finds pi at %s", p)
	}
	if node := lookPathInEnv(env, "node"); node != "" {
		out, _ := exec.Command(node, "--version").Output()
		t.Logf("the machine's node, first on PATH: %s %s", node, bytes.TrimSpace(out))
	}

	out, err := runMakeIn(t, env, "pi-extension")
	if err != nil {
		t.Fatalf("make pi-extension: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "bin/pi") {
		t.Fatalf("make pi-extension's last line does not say how to start pi: %q\n%s", last, out)
	}
	var settings struct {
		Packages []string `json:"packages"`
	}
	b, err := os.ReadFile(filepath.Join(e.agentDir, "settings.json"))
	if err != nil || json.Unmarshal(b, &settings) != nil {
		t.Fatalf("pi's settings after make pi-extension: %v\n%s", err, b)
	}
	installed := false
	for _, p := range settings.Packages {
		installed = installed || filepath.Clean(filepath.Join(e.agentDir, p)) == filepath.Join(root, "extension")
	}
	if !installed {
		t.Fatalf("pi's settings do not name %s as a package: %s", filepath.Join(root, "extension"), b)
	}

	prompt := e.scriptDelegation("firsthour", "answered through the installed extension")
	// pi's start, the service's first start (a new database: seconds) and
	// two turns of the parent: twice the harness's bound of one test's wait.
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	pi := exec.CommandContext(ctx, filepath.Join(root, "bin", "pi"), "-p", prompt)
	pi.Dir, pi.Env = e.workDir, env
	// Its own process group, ended whole if the test's time runs out; the
	// service it starts leaves the group (and is stopped by the world).
	pi.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pi.Cancel = func() error { return syscall.Kill(-pi.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	pi.Stdout, pi.Stderr = &stdout, &stderr
	if err := pi.Run(); err != nil {
		t.Fatalf("bin/pi -p: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "Done." {
		t.Fatalf("bin/pi -p printed %q, want the parent's last answer %q\nstderr:\n%s", got, "Done.", stderr.String())
	}
	e.checkDelegation("firsthour", "answered through the installed extension")

	procs := w.devProcesses()
	if len(procs) != 1 {
		t.Fatalf("subagents dev processes for %s: %v, want the one the extension started", w.dataDir, procs)
	}
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(procs[0]), "exe"))
	if err != nil || filepath.Dir(exe) != filepath.Join(root, "bin") {
		t.Fatalf("the service runs %q (%v), want the source tree's bin/", exe, err)
	}
	if log, err := os.ReadFile(filepath.Join(w.dataDir, "service.log")); err != nil || !strings.Contains(string(log), "worker polling task queue") {
		t.Fatalf("the auto-started service's log: %v\n%s", err, log)
	}
}
