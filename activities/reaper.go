package activities

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ProcMarkEnv marks every process a child run starts, and everything those
// start in turn (the environment is inherited): "<worker>.<n>", one value
// per pi process. pi's bash tool starts each command in a session of its
// own (detached), so a process group does not hold a child's tools; the
// mark does, unless a tool clears its environment.
const ProcMarkEnv = "PI_SUBAGENT_PROC"

// reaperEnv, set in the environment of this same binary, makes it the
// worker's reaper (see init) instead of what it would run.
const reaperEnv = "SUBAGENTS_REAPER"

// ReaperName is a reaper's command line: what ps shows for it.
const ReaperName = "subagents-reaper"

// reaperPasses bounds the reaper's sweeps of /proc: a process being killed
// may have forked an instant before, and its child shows up in the next
// sweep; a tenth of a second apart, five sweeps outlast any such race.
const (
	reaperPasses = 5
	reaperPause  = 100 * time.Millisecond
)

// init turns this process into a reaper when started as one: any binary
// that links the activities (the worker's, and every test binary that runs
// children) can then be its own reaper, with no command or file to ship.
func init() {
	if id := os.Getenv(reaperEnv); id != "" {
		os.Exit(reap(id, os.Stdin))
	}
}

// reap waits until the worker that started it is gone (its end of the pipe
// closes, however it died), then kills every process marked as one of that
// worker's children.
func reap(worker string, pipe io.Reader) int {
	_, _ = io.Copy(io.Discard, pipe)
	prefix := []byte("\x00" + ProcMarkEnv + "=" + worker + ".")
	for range reaperPasses {
		if killMarked(prefix) == 0 {
			return 0
		}
		time.Sleep(reaperPause)
	}
	return 0
}

// reaper is the worker's guard against its own death: a process of its own
// (a session of its own, so a signal to the worker's group spares it) that
// holds the read end of a pipe whose write end only the worker holds. When
// the worker dies, even by SIGKILL, the kernel closes that end and the
// reaper ends the worker's children and their tools: Pdeathsig reaches pi
// alone, and pi's tools run detached from it.
type reaper struct {
	id   string
	seq  atomic.Int64
	once sync.Once
	w    *os.File
}

func newReaper() *reaper {
	return &reaper{id: fmt.Sprintf("%d-%x", os.Getpid(), time.Now().UnixNano())}
}

// mark is a new process's mark; the first one starts the reaper.
func (r *reaper) mark() string {
	r.once.Do(r.start)
	return r.id + "." + strconv.FormatInt(r.seq.Add(1), 10)
}

func (r *reaper) start() {
	rd, w, err := os.Pipe()
	if err != nil {
		return
	}
	defer rd.Close()
	// /proc/self/exe, not the path: it runs this binary even after an
	// upgrade replaced the file.
	cmd := exec.Command("/proc/self/exe")
	// Named for what it is in ps and /proc/PID/cmdline.
	cmd.Args = []string{ReaperName}
	cmd.Env = append(os.Environ(), reaperEnv+"="+r.id)
	// Its stdout and stderr stay /dev/null: holding the worker's would keep
	// whoever reads them (a terminal's pipe, a test) waiting for EOF.
	cmd.Stdin = rd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return
	}
	r.w = w
	go func() { _ = cmd.Wait() }()
}

// close lets the reaper sweep and end, as the worker's death would.
func (r *reaper) close() {
	if r.w != nil {
		_ = r.w.Close()
	}
}

// killMarked SIGKILLs every process whose environment holds entry (NUL
// first, to match a whole variable; a prefix of its value when it ends in
// "." and the whole value when it ends in NUL) and returns how many it
// found. Processes of other users cannot be read and are left alone.
func killMarked(entry []byte) int {
	self := os.Getpid()
	n := 0
	eachProc(func(pid int, dir string) {
		if pid == self {
			return
		}
		if environHas(dir, entry) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	})
	return n
}

// environHas is whether the environment of the process at dir holds entry
// (see killMarked); false when it cannot be read.
func environHas(dir string, entry []byte) bool {
	env, err := os.ReadFile(dir + "/environ")
	return err == nil && bytes.Contains(append(append([]byte{0}, env...), 0), entry)
}

// markEntry is what killMarked looks for to find one process's tree.
func markEntry(mark string) []byte {
	return []byte("\x00" + ProcMarkEnv + "=" + mark + "\x00")
}

// eachProc calls fn for every process in /proc.
func eachProc(fn func(pid int, dir string)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			fn(pid, "/proc/"+e.Name())
		}
	}
}
