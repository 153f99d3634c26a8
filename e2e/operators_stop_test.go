package e2e

import (
	"fmt"
	"os"
	"os/exec"
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
	t.Parallel()
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
	// stop returns once the process has exited: a zombie counts, so the
	// test's own Wait may reap it a moment later. reapGrace bounds that
	// moment: a process still running after it was not stopped.
	const reapGrace = 5 * time.Second
	select {
	case <-p.done:
	case <-time.After(reapGrace):
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

// TestStopUnderAWaitingRun (issue 42): `subagents stop` while a `run`
// handed to the local service waits for its task. The run said "EOF …
// start one with make run"; it says instead that the service stopped,
// that its delegation goes on at the service's next start, and the wait
// that picks it up (exit 3). After the next start, that wait does: the
// child, stopped in its command, goes on from its session and finalizes.
func TestStopUnderAWaitingRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.dataDir = filepath.Join(t.TempDir(), "d")
	e.model.Script("stopped", bashStep("echo go > started.txt; sleep 600"), finalizeStep("done after the restart"))
	port := freePort()
	args := []string{"--port", strconv.Itoa(port), "--headless", "--db-filename", filepath.Join(t.TempDir(), "temporal.db"),
		"--data-dir", e.dataDir, "--task-queue", e.taskQueue}
	p := e.startDev(args...)
	p.waitReady(t)
	conn := []string{"--address", fmt.Sprintf("127.0.0.1:%d", port), "--task-queue", e.taskQueue}

	run := exec.Command(subagentsBinary(t), append(append([]string{"run"}, conn...), "[[script:stopped]] Wait for it.")...)
	run.Env = append(os.Environ(), e.cliEnv()...)
	run.Dir = e.workDir
	var out, errOut syncBuffer
	run.Stdout, run.Stderr = &out, &errOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { _ = run.Wait(); close(ran) }()
	t.Cleanup(func() { _ = run.Process.Kill(); <-ran })
	deadline := time.Now().Add(testTimeout)
	for len(e.model.RequestsFor("stopped")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the child never asked its model\nstdout: %s\nstderr: %s", out.String(), errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The stop comes while its command runs.
	waitForFile(t, filepath.Join(e.workDir, "started.txt"))

	if code, stdout, stderr := runSubagents(t, e.cliEnv(), "stop"); code != 0 {
		t.Fatalf("stop: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	select {
	case <-ran:
	case <-time.After(testTimeout):
		t.Fatal("the run still waits after the service stopped")
	}
	said := errOut.String()
	m := regexp.MustCompile(`: (delegation-\S+) goes on at its next start \(subagents dev, or a pi's next delegation starts it\), and then subagents wait (\S+) picks it up\n$`).FindStringSubmatch(said)
	if code := run.ProcessState.ExitCode(); code != 3 || m == nil || m[1] != m[2] ||
		!strings.HasPrefix(said, "subagents: the subagents service stopped during this call") || strings.Contains(said, "EOF") || strings.Contains(said, "make run") {
		t.Fatalf("the run as the service stopped: exit %d\nstdout: %s\nstderr: %s", code, out.String(), said)
	}

	p = e.startDev(args...)
	p.waitReady(t)
	code, stdout, stderr := runSubagents(t, e.cliEnv(), append(append([]string{"wait"}, conn...), m[1])...)
	if code != 0 || !strings.Contains(stdout, "done after the restart") {
		t.Fatalf("wait %s after the next start: exit %d\nstdout: %s\nstderr: %s", m[1], code, stdout, stderr)
	}
}
