package activities

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
)

// What a worker and its reaper say to each other (gob, which keeps an
// argument's or a variable's bytes as they are, on a stream socket).
const (
	// opSpawn (worker): start Path with Argv, Dir and Env, the three
	// descriptors passed with the message as its stdin, stdout and stderr.
	opSpawn = "spawn"
	// opStarted (reaper): the answer, Pid or Errno.
	opStarted = "started"
	// opWait (worker): reap child ID once it exited, then sweep if asked.
	opWait = "wait"
	// opWaited (reaper): child ID was reaped, with Status.
	opWaited = "waited"
)

// reaperMsg is one message, either way; fields an op does not use are
// empty.
type reaperMsg struct {
	Op string
	ID int64

	Path string
	Argv []string
	Dir  string
	Env  []string
	Mark string

	Pid   int
	Errno int

	Sweep  bool
	Status int

	// files are the descriptors a spawn brought, in the reaper (gob
	// leaves unexported fields alone).
	files []*os.File
}

// spawnFiles is how many descriptors a spawn passes.
const spawnFiles = 3

// fdConn is a Unix stream socket that carries descriptors beside the bytes:
// those given to passNext go with the next write, and those received wait,
// in order, until taken. A message's descriptors travel with its first
// bytes (or an earlier write's), so they are there once it is decoded.
type fdConn struct {
	c *net.UnixConn

	oob []byte // rights for the next write; the writer holds the link's lock

	mu  sync.Mutex
	fds []int // received, not yet taken
}

func newFdConn(c *net.UnixConn) *fdConn { return &fdConn{c: c} }

// passNext sends files with the next write.
func (f *fdConn) passNext(files []*os.File) {
	if len(files) == 0 {
		return
	}
	fds := make([]int, len(files))
	for i, file := range files {
		// Fd also puts each in blocking mode, as a child expects its
		// standard streams (os/exec passes them the same way).
		fds[i] = int(file.Fd())
	}
	f.oob = syscall.UnixRights(fds...)
}

func (f *fdConn) Write(p []byte) (int, error) {
	if f.oob == nil {
		return f.c.Write(p)
	}
	oob := f.oob
	f.oob = nil
	n, _, err := f.c.WriteMsgUnix(p, oob, nil)
	if err != nil || n == len(p) {
		return n, err
	}
	// A stream socket may take part of a large message: the rest goes
	// without the rights, which went with its first bytes.
	m, err := f.c.Write(p[n:])
	return n + m, err
}

// maxPassed bounds the descriptors one read may bring: the kernel gives one
// message's rights per read, and a spawn passes three.
const maxPassed = 16

func (f *fdConn) Read(p []byte) (int, error) {
	oob := make([]byte, syscall.CmsgSpace(maxPassed*4))
	n, oobn, flags, _, err := f.c.ReadMsgUnix(p, oob)
	n = max(n, 0) // -1 with some errors
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			return n, perr
		}
		for _, m := range msgs {
			fds, perr := syscall.ParseUnixRights(&m)
			if perr != nil {
				return n, perr
			}
			f.mu.Lock()
			f.fds = append(f.fds, fds...)
			f.mu.Unlock()
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 {
		// Descriptors were dropped: which spawn they belonged to is lost.
		return n, errors.New("reaper socket: descriptors truncated")
	}
	return n, err
}

// take returns the next n received descriptors, as files, or nil if fewer
// came.
func (f *fdConn) take(n int) []*os.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.fds) < n {
		return nil
	}
	files := make([]*os.File, n)
	for i, fd := range f.fds[:n] {
		files[i] = os.NewFile(uintptr(fd), "passed")
	}
	f.fds = f.fds[n:]
	return files
}

func (f *fdConn) Close() error { return f.c.Close() }
