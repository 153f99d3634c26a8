package activities

import (
	"encoding/gob"
	"errors"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sweepPasses and sweepPause bound the passes over the reaper's tree that
// follow a pass that killed something: a process being killed may have
// forked an instant before, and its child, re-parented to the reaper, shows
// up in the next pass. Twenty milliseconds apart, ten passes outlast any
// such race while a fork loop cannot keep the reaper busy for longer.
const (
	sweepPasses = 10
	sweepPause  = 20 * time.Millisecond
)

// reaped is a child of the reaper started for the worker, until the worker
// reaped it.
type reaped struct {
	id   int64
	pid  int
	mark string
	// waiting: the worker asked for its status; sweep: and for a sweep
	// once it is reaped.
	waiting, sweep bool
}

// reaperServer is the reaper process's state; one goroutine (the main one,
// on its own thread) runs it.
type reaperServer struct {
	self     int
	enc      *gob.Encoder
	children map[int64]*reaped
	byPid    map[int]*reaped
	// passes left of the sweep under way, 0 when none is.
	passes int
	timer  *time.Timer
}

// serveReaper is the reaper's main: it starts the worker's children as it
// asks, reaps them when it asks, sweeps loose processes, and once the
// worker is gone (the socket on stdin closes) kills everything below
// itself and returns the exit code.
func serveReaper(stdin *os.File) int {
	// Each child's Pdeathsig fires when the thread that started it ends:
	// this goroutine starts them all and keeps its thread for good, so it
	// fires only if the reaper itself dies (then SIGTERM: pi ends its
	// tools' process groups, the most that can still be done).
	runtime.LockOSThread()
	// Orphans below the reaper come to it, not to init: see reaper.go.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 1
	}
	fc, err := net.FileConn(stdin)
	_ = stdin.Close()
	uc, ok := fc.(*net.UnixConn)
	if err != nil || !ok {
		return 1
	}
	conn := newFdConn(uc)
	s := &reaperServer{self: os.Getpid(), enc: gob.NewEncoder(conn), children: map[int64]*reaped{}, byPid: map[int]*reaped{},
		timer: time.NewTimer(time.Hour)}
	s.timer.Stop()
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	requests := make(chan reaperMsg)
	go func() {
		defer close(requests)
		dec := gob.NewDecoder(conn)
		for {
			var m reaperMsg
			if err := dec.Decode(&m); err != nil {
				return
			}
			if m.Op == opSpawn {
				// Nil when the descriptors did not come: the spawn fails.
				m.files = conn.take(spawnFiles)
			}
			requests <- m
		}
	}()
	// What the package initialisation of this binary allocated is not the
	// reaper's to keep.
	debug.FreeOSMemory()
	dropBinaryPages()
	for {
		select {
		case m, ok := <-requests:
			if !ok {
				killBelow(s.self)
				return 0
			}
			s.handle(m)
		case <-sigchld:
			s.reap()
		case <-s.timer.C:
			s.sweepPass()
		}
	}
}

func (s *reaperServer) handle(m reaperMsg) {
	switch m.Op {
	case opSpawn:
		s.spawn(m)
	case opWait:
		if c := s.children[m.ID]; c != nil {
			c.waiting, c.sweep = true, m.Sweep
			s.reap()
		}
	}
}

func (s *reaperServer) spawn(m reaperMsg) {
	ans := reaperMsg{Op: opStarted, ID: m.ID}
	if m.files == nil {
		ans.Errno = int(syscall.EBADF)
	} else {
		pid, err := syscall.ForkExec(m.Path, m.Argv, &syscall.ProcAttr{
			Dir:   m.Dir,
			Env:   m.Env,
			Files: []uintptr{m.files[0].Fd(), m.files[1].Fd(), m.files[2].Fd()},
			Sys: &syscall.SysProcAttr{
				// Its own process group, so that a kill reaches what pi
				// started.
				Setpgid:   true,
				Pdeathsig: syscall.SIGTERM,
			},
		})
		for _, f := range m.files {
			_ = f.Close()
		}
		var errno syscall.Errno
		switch {
		case errors.As(err, &errno):
			ans.Errno = int(errno)
		case err != nil:
			ans.Errno = int(syscall.EINVAL)
		default:
			c := &reaped{id: m.ID, pid: pid, mark: m.Mark}
			s.children[m.ID], s.byPid[pid] = c, c
			ans.Pid = pid
		}
	}
	_ = s.enc.Encode(ans)
}

// reap reaps the children the worker waits for that exited, and the loose
// processes that exited (orphans re-parented to the reaper), then sweeps if
// a reaped child asked for it.
func (s *reaperServer) reap() {
	sweep := false
	for id, c := range s.children {
		if !c.waiting {
			continue
		}
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(c.pid, &ws, syscall.WNOHANG, nil)
		if pid != c.pid && !errors.Is(err, syscall.ECHILD) {
			continue
		}
		delete(s.children, id)
		delete(s.byPid, c.pid)
		sweep = sweep || c.sweep
		_ = s.enc.Encode(reaperMsg{Op: opWaited, ID: id, Status: int(ws)})
	}
	// The other children of the reaper are loose processes: nobody else
	// waits for them. The worker's children are left as zombies until it
	// asks, so that their pids stay theirs.
	for _, pid := range childrenOf(s.self) {
		if s.byPid[pid] == nil {
			_, _ = syscall.Wait4(pid, nil, syscall.WNOHANG, nil)
		}
	}
	if sweep {
		s.passes = sweepPasses
		s.sweepPass()
	}
}

// sweepPass kills the loose processes that no running child claims, and
// what is below them; while it finds some, another pass follows.
func (s *reaperServer) sweepPass() {
	if s.passes <= 0 {
		return
	}
	s.passes--
	live := map[string]bool{}
	for _, c := range s.children {
		live[c.mark] = true
	}
	killed := killLoose(s.self, func(pid int) bool { return s.byPid[pid] != nil }, func(mark string) bool { return live[mark] })
	if killed > 0 && s.passes > 0 {
		s.timer.Reset(sweepPause)
	} else {
		s.passes = 0
	}
}

// killBelow kills every process below the reaper, pass after pass while it
// finds some (their children come to the reaper as they die), and reaps
// them all.
func killBelow(self int) {
	for range sweepPasses * 5 {
		n := 0
		for _, m := range descendants(self) {
			if m.signal(syscall.SIGKILL) {
				n++
			}
			m.close()
		}
		for {
			if pid, _ := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(sweepPause)
	}
}
