package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

// lockHolderEnv makes this test binary a process that holds a data dir's
// lock as `subagents dev` does (the file locked, its pid in it) and waits
// for a signal: a stand-in whose command line each test chooses.
const lockHolderEnv = "SUBAGENTS_TEST_LOCK_HOLDER"

func init() {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		return
	}
	f, err := os.OpenFile(ServiceLockPath(dir), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil || syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		os.Exit(3)
	}
	if os.Getenv("SUBAGENTS_TEST_LOCK_WRITE") != "0" {
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	_, _ = os.Stdout.WriteString("locked\n")
	// Until a signal ends it (SIGTERM's default), or the test's bound.
	time.Sleep(time.Minute)
	os.Exit(4)
}

// holdLock starts a lock holder on dir whose command line is argv; write
// says whether it writes its pid into the file.
func holdLock(t *testing.T, dir string, argv []string, write bool) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Args = argv
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	if !write {
		cmd.Env = append(cmd.Env, "SUBAGENTS_TEST_LOCK_WRITE=0")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 7)
	if n, _ := out.Read(buf); string(buf[:n]) != "locked\n" {
		t.Fatalf("the lock holder said %q", buf[:n])
	}
	return cmd
}

func alive(cmd *exec.Cmd) bool {
	return cmd.ProcessState == nil && syscall.Kill(cmd.Process.Pid, 0) == nil
}

// TestStop: stop ends the process that holds the data dir's lock when it
// is this user's `subagents dev`, and nothing else: not a process the file
// names that does not hold the lock (a pid reused after a SIGKILL), not a
// holder that is no `subagents dev`, not a holder the file does not name.
// Nothing running is no error.
func TestStop(t *testing.T) {
	dev := []string{"/opt/bin/subagents-dev", "dev", "--data-dir", "x"}
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string) *exec.Cmd // the process that must (not) be stopped
		stopped  bool
		wantOut  string
		wantCode string // the error's code; "" for none
	}{
		{name: "no lock file", wantOut: "no subagents service runs for data dir"},
		{name: "a stopped service's note", setup: func(t *testing.T, dir string) *exec.Cmd {
			writeFile(t, ServiceLockPath(dir), StoppedNote(12345, time.Now()))
			return nil
		}, wantOut: "no subagents service runs for data dir"},
		{name: "a pid that no longer holds the lock", setup: func(t *testing.T, dir string) *exec.Cmd {
			// A `sleep` under the pid a killed service left in the file.
			cmd := exec.Command("sleep", "60")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			writeFile(t, ServiceLockPath(dir), strconv.Itoa(cmd.Process.Pid)+"\n")
			return cmd
		}, wantOut: "no subagents service runs for data dir"},
		{name: "a dead service's lock still held a moment", setup: func(t *testing.T, dir string) *exec.Cmd {
			// The file names a service that died; a child it forked as it
			// died holds the lock until its exec closes the descriptor.
			dead := exec.Command("true")
			if err := dead.Run(); err != nil {
				t.Fatal(err)
			}
			child := holdLock(t, dir, []string{"/opt/bin/pi"}, false)
			writeFile(t, ServiceLockPath(dir), strconv.Itoa(dead.Process.Pid)+"\n")
			time.AfterFunc(300*time.Millisecond, func() { _ = child.Process.Kill() })
			return nil
		}, wantOut: "no subagents service runs for data dir"},
		{name: "this user's subagents dev", setup: func(t *testing.T, dir string) *exec.Cmd {
			return holdLock(t, dir, dev, true)
		}, stopped: true, wantOut: "stopped the subagents service of data dir"},
		{name: "a holder that is no subagents dev", setup: func(t *testing.T, dir string) *exec.Cmd {
			return holdLock(t, dir, []string{"/usr/bin/vim", "dev.lock"}, true)
		}, wantCode: string(errcode.PermissionDenied)},
		{name: "a holder the file does not name", setup: func(t *testing.T, dir string) *exec.Cmd {
			cmd := holdLock(t, dir, dev, false)
			writeFile(t, ServiceLockPath(dir), "1\n")
			return cmd
		}, wantCode: string(errcode.InvalidInput)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var proc *exec.Cmd
			if tt.setup != nil {
				proc = tt.setup(t, dir)
			}
			var out bytes.Buffer
			err := stopService(context.Background(), dir, 10*time.Second, &out)
			if tt.wantCode != "" {
				if !errcode.Is(err, errcode.Code(tt.wantCode)) {
					t.Fatalf("err = %v, want %s", err, tt.wantCode)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.wantOut != "" && (!strings.Contains(out.String(), tt.wantOut) || !strings.Contains(out.String(), dir)) {
				t.Errorf("said %q, want %q and the data dir", out.String(), tt.wantOut)
			}
			if proc == nil {
				return
			}
			if tt.stopped {
				// Its exit, as its parent sees it: SIGTERM's.
				err := proc.Wait()
				if ws, ok := proc.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
					t.Fatalf("the service ended with %v, want SIGTERM", err)
				}
			} else if !alive(proc) {
				t.Fatal("stop signalled a process it had to spare")
			}
		})
	}
}

// TestStopIsIdempotent: a second stop finds nothing to stop and says so,
// exit 0.
func TestStopIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	proc := holdLock(t, dir, []string{filepath.Join(t.TempDir(), "subagents-dev"), "dev"}, true)
	for i, want := range []string{"stopped the subagents service", "no subagents service runs"} {
		var out bytes.Buffer
		if err := Run(context.Background(), []string{"stop", "--data-dir", dir}, &out, &out, nil); err != nil {
			t.Fatalf("stop %d: %v", i+1, err)
		}
		if !strings.Contains(out.String(), want) {
			t.Fatalf("stop %d said %q, want %q", i+1, out.String(), want)
		}
		if i == 0 {
			_ = proc.Wait()
		}
	}
}

// TestStoppedNoteIsNoPid: once a service stopped, its lock file holds no
// word a shell's `kill $(cat dev.lock)` could take for a process.
func TestStoppedNoteIsNoPid(t *testing.T) {
	note := StoppedNote(4242, time.Date(2026, 11, 26, 4, 10, 0, 0, time.UTC))
	if note != "stopped pid=4242 at=2026-11-26T04:10:00Z\n" {
		t.Fatalf("note %q", note)
	}
	for _, w := range strings.Fields(note) {
		if _, err := strconv.Atoi(w); err == nil {
			t.Errorf("%q is a number", w)
		}
	}
	if lockedPid([]byte(note)) != 0 || lockedPid([]byte("4242\n")) != 4242 {
		t.Error("lockedPid")
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
