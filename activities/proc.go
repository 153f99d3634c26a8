package activities

import (
	"errors"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is a started child pi: its stdout as records, the tail of its
// stderr, and its end. A cold run starts one with the task's arguments; a
// warm one was started by the pool in RPC mode before the task came.
type proc struct {
	cmd *exec.Cmd
	pid int
	// mark is its ProcMarkEnv value, inherited by all it starts.
	mark string
	// toolsRan is set once pi started a tool: only then may processes
	// outside its group be left to end (see reap).
	toolsRan atomic.Bool
	// stdin is a warm child's RPC command channel; a cold run in JSON mode
	// writes its prompt there and closes it (pi reads the prompt to EOF).
	stdin io.WriteCloser
	// slot is a warm child's own session file; linked, the task's session
	// file made a link to it (slot.go), settled once pi exited.
	slot, linked string
	// lines carries stdout's records until it is closed at EOF; records
	// past the output cap are read and dropped.
	lines    chan []byte
	readDone chan error
	stderr   lockedTail
	errDone  chan struct{}
	// overflow is closed once stdout and stderr together passed the cap.
	overflow chan struct{}
	streamed atomic.Int64
	overOnce sync.Once

	reapOnce sync.Once
	exited   chan struct{} // closed once pi was reaped
	readErr  error
	waitErr  error
}

// startProc starts pi with args in dir, its own process group, SIGTERM when
// the thread that started it ends (the caller keeps it locked while pi
// runs), and mark in its environment. Its stdin is a pipe: a cold run
// writes its prompt there, a warm child reads RPC commands from it.
func startProc(pi string, args []string, dir string, env []string, limit int64, mark string) (*proc, error) {
	cmd := exec.Command(pi, args...)
	cmd.Dir = dir
	cmd.Env = append(env[:len(env):len(env)], ProcMarkEnv+"="+mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group, so that a kill reaches what pi started.
		Setpgid: true,
		// If the worker dies (SIGKILL, OOM), pi must not run on beside the
		// attempt that retries it on the same session file. SIGTERM, not
		// SIGKILL, so that pi still ends the tools it started.
		Pdeathsig: syscall.SIGTERM,
	}
	p := &proc{cmd: cmd, mark: mark, lines: make(chan []byte, 64), readDone: make(chan error, 1), errDone: make(chan struct{}),
		overflow: make(chan struct{}), exited: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	count := func(n int) bool {
		if p.streamed.Add(int64(n)) > limit {
			p.overOnce.Do(func() { close(p.overflow) })
			return false
		}
		return true
	}
	go func() {
		// No line may be longer than what the whole stream may hold.
		err := readLines(stdout, int(min(limit, maxLineBytes)), func(line []byte) {
			if count(len(line)) {
				p.lines <- line
			}
		})
		if errors.Is(err, errLineTooLong) {
			// The run stops the child; what it writes until then is
			// read and dropped, so that it never blocks on a full pipe.
			p.overOnce.Do(func() { close(p.overflow) })
			_, _ = io.Copy(io.Discard, stdout)
		}
		p.readDone <- err
		close(p.lines)
	}()
	go func() {
		defer close(p.errDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := stderr.Read(buf)
			count(n)
			_, _ = p.stderr.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	return p, nil
}

// reap waits for pi once its output is read to the end, then kills what is
// left in its process group and, if it ran tools, what they started
// (detached from pi, they may outlive it). Safe to call more than once.
func (p *proc) reap() error {
	p.reapOnce.Do(func() {
		p.readErr = <-p.readDone
		<-p.errDone
		p.waitErr = p.cmd.Wait()
		if p.linked != "" {
			// Before exited closes: the session's lock is released
			// after it, and the next run finds an ordinary file.
			_ = settleSlot(p.linked, p.slot)
		}
		close(p.exited)
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		if p.toolsRan.Load() {
			// A sweep of /proc costs a few milliseconds: off the
			// result's path.
			go killMarked(markEntry(p.mark))
		}
	})
	return p.waitErr
}

// exitInBackground lets a child whose run settled exit on its own (pi in
// JSON mode exits after its turn, a warm child once its stdin is closed),
// reading what it still prints, and kills its group if it has not exited
// within the kill grace. The returned channel closes once it was reaped.
func (a *Activities) exitInBackground(p *proc) <-chan struct{} {
	a.exiting.Add(1)
	go func() {
		defer a.exiting.Done()
		late := time.AfterFunc(a.cfg.KillGrace, func() { _ = syscall.Kill(-p.pid, syscall.SIGKILL) })
		defer late.Stop()
		go func() {
			for range p.lines {
			}
		}()
		_ = p.reap()
	}()
	return p.exited
}

// discard kills pi and everything it started, and reaps it in the
// background: for a warm child nobody will use.
func (p *proc) discard() {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	go func() {
		for range p.lines {
		}
		_ = p.reap()
	}()
}

// ended reports whether pi has exited and been reaped.
func (p *proc) ended() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// exitCode is pi's exit code once reaped (-1 when a signal ended it).
func (p *proc) exitCode() int { return p.cmd.ProcessState.ExitCode() }

// lockedTail is a tailBuffer written by the stderr reader while a run or
// the pool may read it.
type lockedTail struct {
	mu  sync.Mutex
	buf tailBuffer
}

func (t *lockedTail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.Write(b)
}

func (t *lockedTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
