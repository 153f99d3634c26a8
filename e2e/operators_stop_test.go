package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopEndsTheLocalService: `subagents stop` ends the `subagents dev` of
// the data dir ($SUBAGENTS_DATA_DIR here, as a user's shell has it), which
// exits cleanly with its whole tree; its lock file then says it stopped (it
// was left empty, while the README told users to `kill $(cat dev.lock)`).
// A second stop finds nothing to stop and says so, exit 0; so does a stop
// after the service was killed with SIGKILL, whose pid the file still
// names.
func TestStopEndsTheLocalService(t *testing.T) {
	e := newEnv(t)
	lock := filepath.Join(e.dataDir, "dev.lock")
	start := func() *devProcess {
		p := e.startDev("--port", strconv.Itoa(freePort()), "--headless", "--data-dir", e.dataDir, "--task-queue", e.taskQueue)
		p.waitReady(t)
		return p
	}

	p := start()
	pid := p.cmd.Process.Pid
	if b, _ := os.ReadFile(lock); strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Fatalf("while the service runs, dev.lock holds %q, want its pid %d", b, pid)
	}
	code, stdout, stderr := runSubagents(t, e.cliEnv(), "stop")
	want := fmt.Sprintf("stopped the subagents service of data dir %s (pid %d) in ", e.dataDir, pid)
	if code != 0 || !strings.HasPrefix(stdout, want) || stderr != "" {
		t.Fatalf("stop: exit %d\nstdout: %s\nstderr: %s\nwant stdout %q...", code, stdout, stderr, want)
	}
	// stop returns once the process has exited.
	select {
	case <-p.done:
	default:
		t.Fatal("stop returned while the service still ran")
	}
	if p.err != nil {
		t.Fatalf("the service ended with %v after stop, want a clean exit\n%s", p.err, p.stderr)
	}
	waitTreeGone(t, pid)
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^stopped pid=` + strconv.Itoa(pid) + ` at=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$`).Match(b) {
		t.Fatalf("after the stop, dev.lock holds %q, want that pid %d stopped and when", b, pid)
	}

	code, stdout, stderr = runSubagents(t, e.cliEnv(), "stop", "--data-dir", e.dataDir)
	if code != 0 || stdout != "no subagents service runs for data dir "+e.dataDir+"\n" || stderr != "" {
		t.Fatalf("second stop: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	// Killed: the file still names its pid, but nothing holds the lock.
	p = start()
	pid = p.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(testTimeout):
		t.Fatal("the service did not die of SIGKILL")
	}
	waitTreeGone(t, pid)
	if b, _ := os.ReadFile(lock); strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Fatalf("after SIGKILL, dev.lock holds %q, want the dead pid %d", b, pid)
	}
	code, stdout, stderr = runSubagents(t, e.cliEnv(), "stop")
	if code != 0 || stdout != "no subagents service runs for data dir "+e.dataDir+"\n" || stderr != "" {
		t.Fatalf("stop after SIGKILL: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
