package activities

import (
	"os/exec"
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
