package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestSetupAnExternalNamespace: the operator's path on a Temporal that has
// never seen this project: the worker names what is missing and the command
// that fixes it; `subagents setup` creates the namespace and the search
// attributes, idempotently, and waits until they are served; then the
// worker polls and `list` queries by the attributes.
func TestSetupAnExternalNamespace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := "setup-" + uuid.NewString()[:8]
	conn := []string{"--address", shared.server.FrontendAddress(), "--namespace", ns}
	env := e.cliEnv()

	code, _, stderr := runSubagents(t, env, append([]string{"worker", "--task-queue", e.taskQueue, "--data-dir", e.dataDir}, conn...)...)
	if code != 2 || !strings.Contains(stderr, fmt.Sprintf("namespace %q does not exist", ns)) || !strings.Contains(stderr, "subagents setup --namespace "+ns) {
		t.Fatalf("worker on a missing namespace: exit %d\n%s", code, stderr)
	}

	code, out, stderr := runSubagents(t, env, append([]string{"setup", "--retention", "48h"}, conn...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("namespace %q created (retention 48h0m0s)", ns)) || !strings.Contains(out, "is ready") {
		t.Fatalf("setup: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runSubagents(t, env, append([]string{"setup"}, conn...)...)
	if code != 0 || !strings.Contains(out, "exists") || !strings.Contains(out, "registered already") {
		t.Fatalf("setup again: exit %d\n%s%s", code, out, stderr)
	}

	// The worker starts on it and polls.
	cmd := exec.Command(subagentsBinary(t), append([]string{"worker", "--task-queue", e.taskQueue, "--data-dir", e.dataDir}, conn...)...)
	cmd.Env = append(os.Environ(), env...)
	buf := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endWorker(t, cmd) })
	deadline := time.Now().Add(testTimeout)
	for !strings.Contains(buf.String(), "worker polling task queue") {
		if time.Now().After(deadline) {
			t.Fatalf("worker did not start:\n%s", buf)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, out, stderr = runSubagents(t, env, append([]string{"list", "--json", "--status", "completed", "--task-queue", e.taskQueue}, conn...)...)
	if code != 0 || !strings.Contains(out, `"op": "list"`) {
		t.Fatalf("list on the new namespace: exit %d\n%s%s", code, out, stderr)
	}
}
