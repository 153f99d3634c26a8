package activities

// The reaper ends what a worker's children leave behind, and it decides what
// to end from the process tree, never from what a process says of itself.
//
// Every child pi is started by the reaper, not by the worker: a process of
// its own (this same binary, in a session of its own) that is the parent of
// each pi and a child subreaper (PR_SET_CHILD_SUBREAPER), so that whatever
// pi's tools leave orphaned (pi's bash tool runs each command detached, with
// setsid, and a shell that exits leaves its background jobs) is re-parented
// to the reaper instead of to init. Everything below the reaper therefore
// descends from the worker's children, and nothing a child runs can leave
// that tree by changing its session, its process group or its environment.
// When the worker dies, however (its end of the socket closes, even on
// SIGKILL), the reaper kills every process below itself and exits.
//
// A kill needs proof, not a pid read a moment before: the reaper reads
// /proc for each process's parent, and keeps a process only if it opened a
// pidfd on it, then read its parent, and found both still alive through
// their pidfds afterwards (a pid is not reused while its process exists), so
// the parent it read is the one it had proven to be below itself. Signals go
// through those pidfds: a process that exited and whose pid was reused is
// never signalled (pid_max is 32768 on some machines: reuse is not rare).
//
// Options weighed:
//   - A cgroup v2 sub-tree per worker holds every descendant too, but only
//     where the user may write one: root, or a systemd user manager's
//     delegated slice; a terminal's session scope is root's. On this machine
//     the unified hierarchy is a hybrid mount (/sys/fs/cgroup/unified),
//     writable by root only. The tree below a subreaper works for every user
//     on every Linux since 3.4 (pidfds since 5.3), so it is the one mechanism;
//     a cgroup would add a second path to test for no case this one misses.
//   - The worker as the subreaper, with the reaper keeping snapshots of its
//     tree: on the worker's SIGKILL its children go to init with whatever
//     they started since the last snapshot, and pi's own death (its
//     Pdeathsig, a write to its closed stdout) orphans its tools within
//     milliseconds. Only a subreaper that outlives the worker and is an
//     ancestor of every pi holds them all: hence pi is the reaper's child.
//   - A subreaper per pi (a shim between the worker and pi) would also know
//     which run each orphan came from, but costs a process of this binary per
//     child, and its package initialisation (0.25 s here, 0.8 s for the dev
//     binary) before every pi.
//
// What a run's end kills while the worker lives: an orphan below the reaper
// is a "loose" process; the reaper tells whose it is by the ProcMarkEnv it
// inherited. When a pi is reaped, the loose processes whose mark names no
// pi still running (its own mark, none, or a made-up one) are killed with
// everything below them; those marked for a pi still running wait for that
// pi's end. So the mark only ever spares a process of the worker's own tree
// for a while; it never makes the reaper touch a process outside it, and a
// tool that clears it is ended at the next run's end instead of its own.
//
// The worker keeps the semantics of os/exec: it makes the pipes, the reaper
// passes them to pi (SCM_RIGHTS), and a pi that exited stays a zombie, its
// pid reserved, until the worker asks for its status, so that the worker's
// own signals to pi's pid and process group (SIGTERM on cancel, SIGKILL
// after the grace) can never reach a process that reused it.

import (
	"encoding/gob"
	"errors"
	"fmt"
	"net"
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
// per pi process. It tells the reaper which run a loose process of its tree
// belongs to, and a retry which processes a dead attempt left (see
// killLeftovers); it never decides whether a process is the worker's.
const ProcMarkEnv = "PI_SUBAGENT_PROC"

// reaperEnv, set in the environment of this same binary, makes it the
// worker's reaper (see init) instead of what it would run.
const reaperEnv = "SUBAGENTS_REAPER"

// ReaperName is a reaper's command line: what ps shows for it.
const ReaperName = "subagents-reaper"

// init turns this process into a reaper when started as one: any binary
// that links the activities (the worker's, and every test binary that runs
// children) can then be its own reaper, with no command or file to ship.
func init() {
	if os.Getenv(reaperEnv) != "" {
		os.Exit(serveReaper(os.Stdin))
	}
}

// errReaperGone: the reaper process died (or was closed) while a child it
// started was still owed an answer.
var errReaperGone = errors.New("the worker's reaper is gone")

// reaper is the worker's side of its reaper process: it starts the reaper
// (again, if the last one died), asks it to start children, and to reap
// them.
type reaper struct {
	id  string
	seq atomic.Int64

	mu     sync.Mutex
	link   *reaperLink // nil before the first start or after close
	closed bool
}

// newReaper starts a reaper process in the background: its package
// initialisation takes a quarter of a second (0.8 s in the dev binary),
// spent beside the worker's start instead of before its first child.
func newReaper() *reaper {
	r := &reaper{id: fmt.Sprintf("%d-%x", os.Getpid(), time.Now().UnixNano())}
	go func() { _, _ = r.current() }()
	return r
}

// mark is a new process's mark.
func (r *reaper) mark() string {
	return r.id + "." + strconv.FormatInt(r.seq.Add(1), 10)
}

// current is the live reaper, started now if there is none or the last
// one died.
func (r *reaper) current() (*reaperLink, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errReaperGone
	}
	if r.link != nil && !r.link.broken() {
		return r.link, nil
	}
	l, err := startReaper(r.id)
	if err != nil {
		return nil, err
	}
	r.link = l
	return l, nil
}

// close lets the reaper end whatever is left below it and exit, as the
// worker's death would. Safe to call more than once.
func (r *reaper) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.link != nil {
		r.link.close()
		r.link = nil
	}
}

// spawn starts cmd's program through the reaper with stdin, stdout and
// stderr from files, mark in its environment (the caller put it there) and
// a process group of its own.
func (r *reaper) spawn(cmd *exec.Cmd, mark string, files [3]*os.File) (*child, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	l, err := r.current()
	if err != nil {
		return nil, err
	}
	return l.spawn(reaperMsg{Op: opSpawn, Path: cmd.Path, Argv: cmd.Args, Dir: cmd.Dir, Env: cmd.Environ(), Mark: mark}, files)
}

// reaperLink is one reaper process and the socket to it.
type reaperLink struct {
	conn *fdConn
	cmd  *exec.Cmd

	wmu sync.Mutex // one message at a time on the socket
	enc *gob.Encoder

	mu      sync.Mutex
	seq     int64
	pending map[int64]chan reaperMsg
	err     error // set once the socket broke: every later call fails
}

func startReaper(id string) (*reaperLink, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reaper socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "reaper"), os.NewFile(uintptr(fds[1]), "reaper")
	defer theirs.Close()
	fc, err := net.FileConn(mine)
	_ = mine.Close()
	if err != nil {
		_ = theirs.Close()
		return nil, fmt.Errorf("reaper socket: %w", err)
	}
	// /proc/self/exe, not the path: it runs this binary even after an
	// upgrade replaced the file.
	cmd := exec.Command("/proc/self/exe")
	// Named for what it is in ps and /proc/PID/cmdline.
	cmd.Args = []string{ReaperName}
	cmd.Env = append(os.Environ(), reaperEnv+"="+id)
	// Its stdout and stderr stay /dev/null: holding the worker's would keep
	// whoever reads them (a terminal's pipe, a test) waiting for EOF.
	cmd.Stdin = theirs
	// A session of its own, so that a signal to the worker's process group
	// (a terminal's Ctrl-C) spares it and the children it holds.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = fc.Close()
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	l := &reaperLink{conn: newFdConn(fc.(*net.UnixConn)), cmd: cmd, pending: map[int64]chan reaperMsg{}}
	l.enc = gob.NewEncoder(l.conn)
	go l.read()
	return l, nil
}

// read hands each answer of the reaper to the call waiting for it; once the
// socket breaks, every waiting call and every later one fails.
func (l *reaperLink) read() {
	dec := gob.NewDecoder(l.conn)
	for {
		var m reaperMsg
		if err := dec.Decode(&m); err != nil {
			l.fail(err)
			return
		}
		l.mu.Lock()
		reply := l.pending[m.ID]
		delete(l.pending, m.ID)
		l.mu.Unlock()
		if reply != nil {
			reply <- m
		}
	}
}

func (l *reaperLink) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = fmt.Errorf("%w: %v", errReaperGone, err)
	}
	for id, reply := range l.pending {
		close(reply)
		delete(l.pending, id)
	}
}

func (l *reaperLink) broken() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err != nil
}

// close closes the worker's end: the reaper ends what is below it and
// exits.
func (l *reaperLink) close() {
	_ = l.conn.Close()
	l.fail(errors.New("closed"))
}

// call sends m, with files passed along, and waits for the answer to it.
func (l *reaperLink) call(m reaperMsg, files []*os.File) (reaperMsg, error) {
	reply := make(chan reaperMsg, 1)
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return reaperMsg{}, err
	}
	if m.ID == 0 {
		l.seq++
		m.ID = l.seq
	}
	l.pending[m.ID] = reply
	l.mu.Unlock()

	l.wmu.Lock()
	l.conn.passNext(files)
	err := l.enc.Encode(m)
	// Sent with the message's first write, or not at all.
	l.conn.oob = nil
	l.wmu.Unlock()
	if err != nil {
		l.fail(err)
	}
	ans, ok := <-reply
	if !ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		return reaperMsg{}, l.err
	}
	return ans, nil
}

func (l *reaperLink) spawn(m reaperMsg, files [3]*os.File) (*child, error) {
	ans, err := l.call(m, files[:])
	if err != nil {
		return nil, err
	}
	if ans.Errno != 0 {
		// As os/exec says it.
		return nil, &os.PathError{Op: "fork/exec", Path: m.Path, Err: syscall.Errno(ans.Errno)}
	}
	return &child{link: l, id: ans.ID, pid: ans.Pid}, nil
}

// child is a process the reaper started for the worker.
type child struct {
	link *reaperLink
	id   int64
	pid  int
}

// wait waits for the child to exit and returns how it ended; until it is
// called, an exited child stays a zombie (its pid reserved). sweep asks the
// reaper to end, once it has reaped the child, the loose processes of its
// tree that no running child claims (see the file's opening comment).
func (c *child) wait(sweep bool) (syscall.WaitStatus, error) {
	ans, err := c.link.call(reaperMsg{Op: opWait, ID: c.id, Sweep: sweep}, nil)
	if err != nil {
		return 0, err
	}
	return syscall.WaitStatus(ans.Status), nil
}
