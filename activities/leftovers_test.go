package activities

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestKillLeftovers: the process group a dead attempt's pi left (its tools,
// still running) is ended; a group that holds no child run's process is
// left alone.
func TestKillLeftovers(t *testing.T) {
	start := func(env []string) *exec.Cmd {
		cmd := exec.Command("/bin/sh", "-c", "sleep 300 & sleep 300")
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
		return cmd
	}
	tools := start([]string{"PATH=/usr/bin:/bin", "PI_SUBAGENT_CHILD=1"})
	other := start([]string{"PATH=/usr/bin:/bin"})
	// Both groups hold the shell and its background sleep once it forked.
	deadline := time.Now().Add(5 * time.Second)
	for len(groupMembers(tools.Process.Pid)) < 2 || len(groupMembers(other.Process.Pid)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the groups did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := killLeftovers(runRecord{Pgid: other.Process.Pid}); n != 0 {
		t.Fatalf("killed %d processes of a group that is no child run's", n)
	}
	if n := killLeftovers(runRecord{Pgid: tools.Process.Pid}); n < 2 {
		t.Fatalf("found %d processes of the dead attempt's group", n)
	}
	_ = tools.Wait()
	for time.Now().Before(deadline) && len(groupMembers(tools.Process.Pid)) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if left := groupMembers(tools.Process.Pid); len(left) > 0 {
		t.Fatalf("still running: %v", left)
	}
	if len(groupMembers(other.Process.Pid)) < 2 {
		t.Fatal("the other group was touched")
	}
	if killLeftovers(runRecord{}) != 0 || killLeftovers(runRecord{Pgid: syscall.Getpgrp()}) != 0 {
		t.Fatal("no group, or the worker's own, is never killed")
	}
}

// TestKillMarkedSparesOtherUsers: a worker run as root ends the leftovers of
// a dead attempt by their mark, and never another user's process that
// carries the same mark (uid 65534 by setpriv; as any other user the kernel
// keeps those environments unreadable, which the check repeats).
func TestKillMarkedSparesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("not root: another user's environment is unreadable here, so there is nothing to spare")
		return
	}
	mark := "spare-test." + strconv.Itoa(os.Getpid())
	other := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30")
	other.Env = append(os.Environ(), ProcMarkEnv+"="+mark)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	mine := exec.Command("sleep", "30")
	mine.Env = append(os.Environ(), ProcMarkEnv+"="+mark)
	if err := mine.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mine.Process.Kill(); _ = mine.Wait() }()
	// setpriv execs sleep: wait until the other user's process runs as it.
	deadline := time.Now().Add(5 * time.Second)
	for !ownedBy("/proc/"+strconv.Itoa(other.Process.Pid), 65534) {
		if time.Now().After(deadline) {
			t.Fatal("the other user's process did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := killMarked(markEntry(mark)); n != 1 {
		t.Fatalf("killMarked found %d processes, want 1 (this user's)", n)
	}
	if err := mine.Wait(); err == nil {
		t.Fatal("this user's marked process was not killed")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the other user's marked process was killed: %v", err)
	}
}
