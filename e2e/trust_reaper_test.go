package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// The reaper ends what descends from a dead worker's children, proven by the
// process tree, not by a variable a process can set or clear. Both tests
// SIGKILL a `subagents worker` process while its real pi child runs a tool;
// no second local user is needed: the attacks come from the same user (a
// tool of the child, a process the test starts beside the worker).

// TestReaperSparesProcessOutsideTree: a process that the test starts, outside
// the worker's tree, carrying the worker's own mark (PI_SUBAGENT_PROC=
// <worker>.999, as a child's tool could tell it) lives on when the worker
// dies, while the worker's child and its tool are ended.
func TestReaperSparesProcessOutsideTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.crashMidTool("outside", "sleep 120")
	mark := strings.TrimSpace(fileText(t, filepath.Join(e.workDir, "mark.txt")))
	worker, _, ok := strings.Cut(mark, ".")
	if !ok || worker == "" {
		t.Fatalf("the child's mark %q names no worker", mark)
	}
	seconds := strconv.Itoa(6000 + os.Getpid()%1000)
	forged := exec.Command("sleep", seconds)
	forged.Env = append(os.Environ(), activities.ProcMarkEnv+"="+worker+".999")
	// A session of its own, as an unrelated program of the user runs.
	forged.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := forged.Start(); err != nil {
		t.Fatal(err)
	}
	died := make(chan struct{})
	go func() { _ = forged.Wait(); close(died) }()
	t.Cleanup(func() { _ = forged.Process.Kill(); <-died })

	c.kill()
	// The reaper did its work: the child's tool is gone ...
	waitPidGone(t, c.tool, "the killed worker's tool")
	// ... and its sweeps (half a second, see reaperPasses) are over.
	select {
	case <-died:
		t.Fatalf("the reaper killed a process outside the worker's tree (sleep %s, marked %s.999)", seconds, worker)
	case <-time.After(2 * time.Second):
	}
}

// TestReaperKillsToolThatDroppedMark: a child's tool that clears
// PI_SUBAGENT_PROC from its environment and detaches (its own session, its
// shell gone) is still ended when the worker dies.
func TestReaperKillsToolThatDroppedMark(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seconds := strconv.Itoa(7000 + os.Getpid()%1000)
	c := e.crashMidTool("dropped", "(env -u "+activities.ProcMarkEnv+" setsid sleep "+seconds+" >/dev/null 2>&1 &); sleep 120")
	// As /proc's cmdline holds it once env and setsid have exec'd it.
	detached := "sleep\x00" + seconds + "\x00"
	var sleep int
	for deadline := time.Now().Add(5 * time.Second); sleep == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tool's sleep %s did not start", seconds)
		}
		sleep = processRunning(detached)
	}
	t.Cleanup(func() { _ = syscall.Kill(sleep, syscall.SIGKILL) })
	if env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", sleep)); strings.Contains(string(env), activities.ProcMarkEnv+"=") {
		t.Fatalf("the tool's sleep (pid %d) still carries the mark", sleep)
	}
	c.kill()
	for deadline := time.Now().Add(5 * time.Second); pidRunning(sleep); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a tool that dropped its mark (sleep %s, pid %d) outlived its dead worker", seconds, sleep)
		}
	}
	waitPidGone(t, c.tool, "the killed worker's tool")
}

// crashed is a worker process whose child runs a tool, about to be killed.
type crashed struct {
	worker *exec.Cmd
	// tool is the pid of the tool's shell (a child of pi).
	tool int
	// session is the session's workflow, terminated when the test ends: no
	// worker is left to retry it.
	session string
}

func (c crashed) kill() {
	_ = c.worker.Process.Signal(syscall.SIGKILL)
}

// crashMidTool starts a worker process and a session whose child runs
// command through pi's bash tool, after writing the tool shell's pid to
// tool.txt and its PI_SUBAGENT_PROC to mark.txt, and returns once the tool
// runs.
func (e *env) crashMidTool(script, command string) crashed {
	e.t.Helper()
	e.model.Script(script,
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: fmt.Sprintf(
			`{"command":"echo $%s > mark.txt; echo $$ > tool.txt; %s"}`, activities.ProcMarkEnv, command)}}},
		finalizeStep("never reached"),
	)
	w := e.startWorkerProcess()
	in := e.sessionInput("[[script:" + script + "]] Work for a long time.")
	e.startSession(shared.client, in)
	e.t.Cleanup(func() {
		_ = shared.client.TerminateWorkflow(e2eCtx(e.t), in.SessionID, "", "test over: no worker retries it")
	})
	tool := filepath.Join(e.workDir, "tool.txt")
	waitForFile(e.t, tool)
	// The file exists once the shell opened it: wait for its content.
	for deadline := time.Now().Add(5 * time.Second); strings.TrimSpace(fileText(e.t, tool)) == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatal("tool.txt stayed empty")
		}
	}
	return crashed{worker: w, tool: readPid(e.t, tool), session: in.SessionID}
}

// waitPidGone waits until pid no longer runs (gone, or a zombie).
func waitPidGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); pidRunning(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
	}
}

// processRunning is the pid of a running process whose command line is
// cmdline, 0 if none.
func processRunning(cmdline string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil && string(b) == cmdline && pidRunning(pid) {
			return pid
		}
	}
	return 0
}

// pidRunning: pid exists and is not a zombie.
func pidRunning(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startedHere is whether a process whose parent is ppid was started by this
// process: by itself, or by the reaper of one of its workers, which starts
// every child pi (activities/reaper.go).
func startedHere(ppid string) bool {
	self := strconv.Itoa(os.Getpid())
	if ppid == self {
		return true
	}
	cmdline, _ := os.ReadFile("/proc/" + ppid + "/cmdline")
	stat, _ := os.ReadFile("/proc/" + ppid + "/stat")
	_, fields := statFields(stat)
	return strings.TrimRight(string(cmdline), "\x00") == activities.ReaperName && len(fields) > 1 && fields[1] == self
}
