package activities

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestReaper: once the worker's end of the pipe closes (as it does when the
// worker dies), the reaper ends every process marked as that worker's
// child, even one in a session of its own, as pi's bash tool starts them,
// and leaves a process marked for another worker alone.
func TestReaper(t *testing.T) {
	r := newReaper()
	mine, other := r.mark(), "other-worker.1"
	if r.w == nil {
		t.Fatal("the reaper did not start")
	}
	start := func(mark string) int {
		// setsid: the tool's shell is out of pi's process group and
		// session, as pi's bash tool runs it.
		cmd := exec.Command("setsid", "/bin/sh", "-c", "sleep 300 & echo $!; wait")
		cmd.Env = []string{"PATH=/usr/bin:/bin", ProcMarkEnv + "=" + mark}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 32)
		n, _ := out.Read(buf)
		pid, err := strconv.Atoi(string(buf[:n-1]))
		if err != nil {
			t.Fatalf("no pid: %q", buf[:n])
		}
		t.Cleanup(func() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return pid
	}
	tool, foreign := start(mine), start(other)
	r.close()
	deadline := time.Now().Add(10 * time.Second)
	for alive(tool) {
		if time.Now().After(deadline) {
			t.Fatalf("the tool (pid %d) outlived its worker's reaper", tool)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !alive(foreign) {
		t.Fatal("the reaper killed another worker's child")
	}
}

// alive: pid runs and is not a zombie waiting for its parent.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	fields := statFields("/proc/" + strconv.Itoa(pid))
	return len(fields) > 0 && fields[0] != "Z"
}
