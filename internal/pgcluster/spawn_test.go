package pgcluster

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestProcessesOutliveTheThreadThatAskedForThem: a process the cluster
// starts (with Pdeathsig, as all of them) lives on when the goroutine that
// asked for it ends on a locked thread, which the runtime then ends; a
// stopped cluster starts nothing.
func TestProcessesOutliveTheThreadThatAskedForThem(t *testing.T) {
	c := &Cluster{services: map[string]*process{}, spawns: make(chan spawnRequest), stopSpawner: make(chan struct{})}
	t.Cleanup(c.Stop)
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	type asked struct {
		tid int
		err error
	}
	var a asked
	for a.tid == 0 {
		done := make(chan asked, 1)
		go func() {
			// Ends locked: the runtime ends this thread with the
			// goroutine, as it does a warm pool's spawner that stops;
			// but never the process's main thread, so not on that one.
			runtime.LockOSThread()
			if tid := unix.Gettid(); tid != os.Getpid() {
				done <- asked{tid, c.start(cmd)}
				return
			}
			runtime.UnlockOSThread()
			done <- asked{}
		}()
		a = <-done
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	task := "/proc/self/task/" + strconv.Itoa(a.tid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the asking goroutine's thread did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The thread is gone, so its Pdeathsig went out (the kernel sends it
	// before the thread's /proc entry goes); a child it reached dies
	// within milliseconds. Half a second of life says it was not reached.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the process ended with the thread that asked for it: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	_ = cmd.Process.Kill()
	<-exited

	c.Stop()
	if err := c.start(exec.Command("true")); err == nil {
		t.Fatal("a stopped cluster started a process")
	}
}
