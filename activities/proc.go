package activities

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is a started child pi: its stdout as records, the tail of its
// stderr, and its end. A cold run starts one with the task's arguments; a
// warm one was started by the pool in RPC mode before the task came.
type proc struct {
	// child is pi as the reaper started it (reaper.go).
	child *child
	pid   int
	// mark is its ProcMarkEnv value, inherited by all it starts.
	mark string
	// toolsRan is set once pi started a tool: only then may processes
	// outside its group be left to end (see reap).
	toolsRan atomic.Bool
	// stdin is a warm child's RPC command channel; a cold run in JSON mode
	// writes its prompt there and closes it (pi reads the prompt to EOF).
	stdin io.WriteCloser
	// outPipe and errPipe are the read ends of pi's output, closed once
	// read to the end and pi reaped.
	outPipe, errPipe *os.File
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
	// status is how pi ended, once reaped; known is false when the
	// reaper died before it told.
	status syscall.WaitStatus
	known  bool
}

// startProc starts pi with args in dir through the worker's reaper: its
// own process group, a mark in its environment, and SIGTERM should the
// reaper die. Its stdin is a pipe: a cold run writes its prompt there, a
// warm child reads RPC commands from it.
func startProc(r *reaper, pi string, args []string, dir string, env []string, limit int64) (*proc, error) {
	mark := r.mark()
	// exec.Cmd only resolves pi on PATH and builds the environment (the
	// last of a duplicated variable wins), as it would to start it.
	cmd := exec.Command(pi, args...)
	cmd.Dir = dir
	cmd.Env = append(env[:len(env):len(env)], ProcMarkEnv+"="+mark)
	var ends [6]*os.File // stdin's, stdout's and stderr's read and write ends
	for i := 0; i < len(ends); i += 2 {
		var err error
		if ends[i], ends[i+1], err = os.Pipe(); err != nil {
			closeAll(ends[:i])
			return nil, err
		}
	}
	c, err := r.spawn(cmd, mark, [3]*os.File{ends[0], ends[3], ends[5]})
	// pi holds its ends now (or never will).
	closeAll([]*os.File{ends[0], ends[3], ends[5]})
	if err != nil {
		closeAll([]*os.File{ends[1], ends[2], ends[4]})
		return nil, err
	}
	p := &proc{child: c, mark: mark, stdin: ends[1], outPipe: ends[2], errPipe: ends[4],
		lines: make(chan []byte, 64), readDone: make(chan error, 1), errDone: make(chan struct{}),
		overflow: make(chan struct{}), exited: make(chan struct{})}
	stdout, stderr := p.outPipe, p.errPipe
	p.pid = c.pid
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
// left in its process group; if it ran tools, the reaper then ends what they
// left below it (detached from pi, they may outlive it). Safe to call more
// than once.
func (p *proc) reap() error {
	p.reapOnce.Do(func() {
		p.readErr = <-p.readDone
		<-p.errDone
		p.status, p.waitErr = p.child.wait(p.toolsRan.Load())
		p.known = p.waitErr == nil
		if p.known && (!p.status.Exited() || p.status.ExitStatus() != 0) {
			p.waitErr = exitError(p.status)
		}
		closeAll([]*os.File{p.outPipe, p.errPipe})
		_ = p.stdin.Close()
		if p.linked != "" {
			// Before exited closes: the session's lock is released
			// after it, and the next run finds an ordinary file.
			_ = settleSlot(p.linked, p.slot)
		}
		close(p.exited)
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	})
	return p.waitErr
}

// exitError is how os/exec reports a child that did not exit 0.
type exitError syscall.WaitStatus

func (e exitError) Error() string {
	ws := syscall.WaitStatus(e)
	if ws.Signaled() {
		return "signal: " + ws.Signal().String()
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
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

// exitCode is pi's exit code once reaped (-1 when a signal ended it, or
// its status was lost with the reaper).
func (p *proc) exitCode() int {
	if p.known && p.status.Exited() {
		return p.status.ExitStatus()
	}
	return -1
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

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

// stderrTailBytes keeps the end of pi's stderr for error messages; pi writes
// its diagnostics there and the last lines say what went wrong.
const stderrTailBytes = 8 << 10

// tailBuffer keeps the last stderrTailBytes written to it.
type tailBuffer struct {
	buf []byte
	cut bool // bytes before buf were dropped
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

// String is what the buffer kept, from its first whole word: the word the
// cut went through may be the end of a token, which without its start has
// no shape the sanitizer knows.
func (t *tailBuffer) String() string {
	if !t.cut {
		return string(t.buf)
	}
	if i := bytes.IndexAny(t.buf, " \t\r\n"); i >= 0 {
		return string(t.buf[i:])
	}
	return ""
}

// lastLine is the last line of s, trimmed: of pi's stderr, the one that
// says what went wrong.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
