package activities

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testReaper is a reaper of the test's own, closed when the test ends.
func testReaper(t *testing.T) *reaper {
	t.Helper()
	r := newReaper()
	t.Cleanup(r.close)
	return r
}

// spawnShell starts script under sh through r, marked as r's next child,
// and returns the child and the pids the script prints, one a line, until
// it printed want of them.
func spawnShell(t *testing.T, r *reaper, script string, want int) (*child, []int) {
	t.Helper()
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	mark := r.mark()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin", ProcMarkEnv + "=" + mark}
	c, err := r.spawn(cmd, mark, [3]*os.File{null, w, null})
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(out)
	for len(pids) < want && sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil {
			t.Fatalf("not a pid: %q", sc.Text())
		}
		pids = append(pids, pid)
	}
	if len(pids) < want {
		t.Fatalf("the script printed %d pids, want %d", len(pids), want)
	}
	for _, pid := range pids {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	t.Cleanup(func() { _ = syscall.Kill(c.pid, syscall.SIGKILL) })
	return c, pids
}

// Scripts of tools as pi's bash tool runs them: a command detached in a
// session of its own, and one that also clears its mark; each leaves its
// shell (a subshell that exits at once), so that the sleep is an orphan.
const (
	detachedTool = `(setsid sleep 300 >/dev/null 2>&1 & echo $!)`
	unmarkedTool = `(env -u ` + ProcMarkEnv + ` setsid sleep 300 >/dev/null 2>&1 & echo $!)`
)

// startOutside starts a sleep that is not below the reaper: the test's own
// child, in a session of its own, with mark in its environment.
func startOutside(t *testing.T, mark string) (pid int, died <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = []string{ProcMarkEnv + "=" + mark}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	return cmd.Process.Pid, done
}

// TestReaperOnWorkerDeath: once the worker's end of the socket closes (as it
// does when the worker dies), the reaper ends every process below it, a
// child and its tools, detached or not, marked or not; a process outside its
// tree that carries the worker's own mark lives on.
func TestReaperOnWorkerDeath(t *testing.T) {
	r := testReaper(t)
	c, pids := spawnShell(t, r, detachedTool+"; "+unmarkedTool+"; sleep 300 & echo $!; wait", 3)
	_, died := startOutside(t, r.id+".999")
	r.close()
	for _, pid := range append(pids, c.pid) {
		waitDead(t, pid)
	}
	select {
	case <-died:
		t.Fatal("the reaper killed a process outside its tree that carried the worker's mark")
	case <-time.After(time.Second):
	}
}

// TestReaperSweepsWhenAChildIsReaped: when the worker reaps a child that ran
// tools, the reaper ends the loose processes its tree holds that no running
// child claims (the reaped child's, and those that cleared their mark), and
// keeps the ones a running child's mark claims until that child is reaped
// in turn. A process outside its tree, even marked as the reaped child, is
// never touched.
func TestReaperSweepsWhenAChildIsReaped(t *testing.T) {
	r := testReaper(t)
	ended, endedTools := spawnShell(t, r, detachedTool, 1)
	running, runningTools := spawnShell(t, r, detachedTool+"; "+unmarkedTool+"; exec sleep 300", 2)
	outsidePid, died := startOutside(t, r.id+".1")
	// Loose once their subshells exited: the reaper's own children.
	l, err := r.current()
	if err != nil {
		t.Fatal(err)
	}
	// Loose and already sleep: a tool whose exec chain (env, setsid, sleep)
	// has not finished still shows the environment it was forked with, the
	// mark the unmarked tool clears included, and a sweep then keeps it.
	for _, pid := range append(endedTools, runningTools...) {
		for deadline := time.Now().Add(10 * time.Second); !looseSleep(pid, l.cmd.Process.Pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d never came to the reaper as a sleep", pid)
			}
		}
	}

	if ws, err := ended.wait(true); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("wait: %v %v", ws, err)
	}
	waitDead(t, endedTools[0])
	waitDead(t, runningTools[1]) // cleared its mark: no running child claims it
	time.Sleep(300 * time.Millisecond)
	if !alive(runningTools[0]) {
		t.Fatal("the reaper killed a loose process of a child still running")
	}
	select {
	case <-died:
		t.Fatalf("the reaper killed a process outside its tree (pid %d)", outsidePid)
	default:
	}

	_ = syscall.Kill(running.pid, syscall.SIGTERM)
	ws, err := running.wait(true)
	if err != nil || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("wait: %v %v", ws, err)
	}
	waitDead(t, runningTools[0])
}

// TestReaperHoldsTheZombie: a child that exited keeps its pid (a zombie)
// until the worker waits for it, as a child of the worker's own would.
func TestReaperHoldsTheZombie(t *testing.T) {
	r := testReaper(t)
	c, _ := spawnShell(t, r, "echo $$; exit 3", 1)
	deadline := time.Now().Add(10 * time.Second)
	for statFields("/proc/" + strconv.Itoa(c.pid))[0] != "Z" {
		if time.Now().After(deadline) {
			t.Fatal("the child did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if f := statFields("/proc/" + strconv.Itoa(c.pid)); len(f) == 0 || f[0] != "Z" {
		t.Fatalf("the exited child was reaped before the worker waited: %v", f)
	}
	ws, err := c.wait(false)
	if err != nil || ws.ExitStatus() != 3 {
		t.Fatalf("wait: %v %v", ws, err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(c.pid)); err == nil {
		t.Fatal("still there after the wait")
	}
}

// TestReaperSpawnErrors: what cannot start fails as os/exec says it, and a
// reaper that died is started again for the next child.
func TestReaperSpawnErrors(t *testing.T) {
	r := testReaper(t)
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	files := [3]*os.File{null, null, null}
	cmd := exec.Command("/nonexistent/pi")
	if _, err := r.spawn(cmd, r.mark(), files); err == nil || err.Error() != "fork/exec /nonexistent/pi: no such file or directory" {
		t.Fatalf("spawn error %v", err)
	}
	if _, err := r.spawn(exec.Command("no-such-command-here"), r.mark(), files); err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Fatalf("spawn error %v", err)
	}

	l, err := r.current()
	if err != nil {
		t.Fatal(err)
	}
	c, _ := spawnShell(t, r, "echo $$; exec sleep 300", 1)
	_ = l.cmd.Process.Kill()
	// Its children got SIGTERM (Pdeathsig); their status went with it.
	waitDead(t, c.pid)
	if _, err := c.wait(false); err == nil {
		t.Fatal("a wait on a dead reaper's child succeeded")
	}
	c, _ = spawnShell(t, r, "echo $$", 1)
	if ws, err := c.wait(false); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("a child of the new reaper: %v %v", ws, err)
	}
}

// firstLine starts cmd in a process group of its own, which the test's
// cleanup kills whole, and returns the first line it prints.
func firstLine(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// TestDescendantsProof: the tree below a process, each member proven and
// held by a pidfd that signals it and, once it was reaped, nothing.
func TestDescendantsProof(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & sleep 300 & echo ready; wait")
	firstLine(t, cmd)
	var below []member
	for _, m := range descendants(os.Getpid()) {
		if m.top == cmd.Process.Pid {
			below = append(below, m)
		} else {
			m.close()
		}
	}
	if len(below) != 3 || below[0].pid != cmd.Process.Pid || below[1].ppid != cmd.Process.Pid || below[2].ppid != cmd.Process.Pid {
		t.Fatalf("below the shell: %+v", below)
	}
	for _, m := range below {
		if m.fd < 0 {
			t.Fatalf("no pidfd for %d (kernel before 5.3?)", m.pid)
		}
	}
	sleep := below[1]
	if !sleep.signal(syscall.SIGKILL) {
		t.Fatal("no signal through the pidfd")
	}
	// The shell reaps it: its pid is free, and the pidfd signals nothing.
	waitDead(t, sleep.pid)
	for deadline := time.Now().Add(5 * time.Second); sleep.alive(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pidfd of a reaped process still signals")
		}
	}
	for _, m := range below {
		m.close()
	}
	// A process is proven only below the parent it names.
	if _, ok := prove(below[2].pid, member{pid: os.Getpid(), fd: -1}, os.Getpid()); ok {
		t.Fatal("a grandchild was proven as a child")
	}
}

// TestChildrenListedMatchesAScan: the kernel's lists of a process's
// children name the ones a scan of /proc finds, zombies included, for a
// process of many threads (this test's, with a child that exited and is
// not waited for yet), a shell, and a process gone.
func TestChildrenListedMatchesAScan(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & sleep 300 & echo ready; wait")
	firstLine(t, cmd)
	zombie := exec.Command("/bin/true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if f := statFields("/proc/" + strconv.Itoa(zombie.Process.Pid)); len(f) > 0 && f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/bin/true did not exit")
		}
	}
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	scan := func(pid int) []int { return scanChildren()[pid] }
	for _, c := range []struct {
		name string
		pid  int
		// want is how many children, or -1: any number, has among them.
		want int
		has  int
	}{
		{"this test's process", os.Getpid(), -1, zombie.Process.Pid},
		{"a shell with two sleeping children", cmd.Process.Pid, 2, 0},
		{"a process gone", gone.Process.Pid, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := childrenListed(c.pid)
			if !ok {
				t.Fatal("no children lists in /proc/PID/task/TID/children (kernel built without CONFIG_PROC_CHILDREN?)")
			}
			want := scan(c.pid)
			slices.Sort(got)
			slices.Sort(want)
			if c.want < 0 {
				// Other tests' processes may come and go between the two
				// reads: each listed one is a child, and the zombie is one.
				for _, kid := range got {
					if f := statFields("/proc/" + strconv.Itoa(kid)); len(f) > 1 && f[1] != strconv.Itoa(c.pid) {
						t.Fatalf("listed %d, whose parent is %s", kid, f[1])
					}
				}
				if !slices.Contains(got, c.has) {
					t.Fatalf("listed %v, a scan %v: %d is not among them", got, want, c.has)
				}
				return
			}
			if !slices.Equal(got, want) || len(got) != c.want {
				t.Fatalf("listed %v, a scan %v, want %d children", got, want, c.want)
			}
		})
	}
	t.Run("a kernel with no lists: the scan", func(t *testing.T) {
		old := childrenFile
		childrenFile = "no-such-list"
		t.Cleanup(func() { childrenFile = old })
		if kids, ok := childrenListed(cmd.Process.Pid); ok {
			t.Fatalf("listed %v from lists that do not exist", kids)
		}
		got := childrenOf(cmd.Process.Pid)
		var below []int
		for _, m := range descendants(os.Getpid()) {
			if m.ppid == cmd.Process.Pid {
				below = append(below, m.pid)
			}
			m.close()
		}
		want := scan(cmd.Process.Pid)
		slices.Sort(got)
		slices.Sort(below)
		slices.Sort(want)
		if len(want) != 2 || !slices.Equal(got, want) || !slices.Equal(below, want) {
			t.Fatalf("children %v, descendants below the shell %v, a scan %v", got, below, want)
		}
	})
}

// headlessEnv makes this test binary a process whose main thread ends
// while another of its threads runs on with a child (headless, in init).
const headlessEnv = "ACTIVITIES_TEST_HEADLESS"

// headless starts `sleep 300` from a thread of its own, prints its pid,
// and ends the process's first thread alone: the process's stat then
// says Z while it runs on.
func init() {
	if os.Getenv(headlessEnv) == "" {
		return
	}
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		sleep := exec.Command("sleep", "300")
		if err := sleep.Start(); err != nil {
			os.Exit(3)
		}
		fmt.Println(sleep.Process.Pid)
		close(started)
		select {}
	}()
	<-started
	// init runs on the process's first thread: SYS_EXIT (not exit_group)
	// ends that thread only.
	_, _, _ = syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
}

// TestDescendantsFindAHeadlessProcess: a process that ended its first
// thread reads Z in its stat, as a zombie does, while its other threads
// run on; the reaper's tree still holds it and what it started, so a sweep
// and the last kill reach them (they passed it by as a zombie before).
func TestDescendantsFindAHeadlessProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), headlessEnv+"=1")
	line := firstLine(t, cmd)
	sleepPid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the headless process printed %q", line)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if f := statFields("/proc/" + strconv.Itoa(cmd.Process.Pid)); len(f) > 0 && f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process's first thread did not end")
		}
	}
	found := map[int]member{}
	for _, m := range descendants(os.Getpid()) {
		if m.top == cmd.Process.Pid {
			found[m.pid] = m
		} else {
			m.close()
		}
	}
	head, sleep := found[cmd.Process.Pid], found[sleepPid]
	if head.pid == 0 || sleep.pid == 0 || sleep.ppid != cmd.Process.Pid {
		t.Fatalf("below this test: %+v; want the headless process %d and its sleep %d", found, cmd.Process.Pid, sleepPid)
	}
	// Killed through its pidfd, the whole process goes, its threads too.
	if !head.signal(syscall.SIGKILL) || !sleep.signal(syscall.SIGKILL) {
		t.Fatal("no signal through the pidfds")
	}
	for _, m := range found {
		m.close()
	}
	waitDead(t, sleepPid)
	if err := cmd.Wait(); err == nil {
		t.Fatal("the headless process exited 0 after SIGKILL")
	}
}

// TestExitError: a child that did not exit 0 reads as os/exec reports it.
func TestExitError(t *testing.T) {
	for _, tc := range []struct {
		status syscall.WaitStatus
		want   string
	}{
		{3 << 8, "exit status 3"},
		{syscall.WaitStatus(syscall.SIGKILL), "signal: killed"},
		{syscall.WaitStatus(syscall.SIGTERM), "signal: terminated"},
	} {
		if got := exitError(tc.status).Error(); got != tc.want {
			t.Errorf("%#x: %q, want %q", int(tc.status), got, tc.want)
		}
	}
}

// waitDead waits until pid no longer runs (gone, or a zombie).
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still runs", pid)
		}
	}
}

// looseSleep: pid has exec'd sleep and its parent is the reaper (ppid).
func looseSleep(pid, ppid int) bool {
	dir := "/proc/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(dir + "/comm")
	fields := statFields(dir)
	return err == nil && strings.TrimSpace(string(comm)) == "sleep" && len(fields) > 1 && fields[1] == strconv.Itoa(ppid)
}

// alive: pid runs and is not a zombie waiting for its parent.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	fields := statFields("/proc/" + strconv.Itoa(pid))
	return len(fields) > 0 && fields[0] != "Z"
}
