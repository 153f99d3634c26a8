package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

// maxSocketPath is the longest path a Unix socket can bind to on Linux
// (sun_path holds 108 bytes with its NUL).
const maxSocketPath = 107

// dialProbeTimeout bounds the check whether a socket file has a live
// service behind it: a local accept takes microseconds.
const dialProbeTimeout = time.Second

// ListenSocket listens on path for the local service, reachable by this
// user only: the folder is made 0700, the socket is 0600, and a path that
// another user owns is refused (PERMISSION_DENIED), so nobody can put a
// socket of theirs where our clients connect. A socket file with nothing
// behind it (a service that was killed) is replaced; one with a live
// service behind it is an error, as is a path that is not a socket.
func ListenSocket(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, errcode.Errorf(errcode.InvalidInput,
			"socket path %s is %d bytes, longer than the %d a Unix socket allows: use a shorter --data-dir", path, len(path), maxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("socket folder %s: %v", dir, err))
	}
	if err := ownedByMe(dir); err != nil {
		return nil, err
	}
	if info, err := os.Lstat(path); err == nil {
		if err := ownedByMe(path); err != nil {
			return nil, err
		}
		if info.Mode()&fs.ModeSocket == 0 {
			return nil, errcode.Errorf(errcode.InvalidInput, "%s exists and is not a socket: remove it, or use another --data-dir", path)
		}
		if c, err := net.DialTimeout("unix", path, dialProbeTimeout); err == nil {
			_ = c.Close()
			return nil, errcode.Errorf(errcode.InvalidInput, "a subagents service already answers on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("remove the stale socket %s: %v", path, err))
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("listen on %s: %v", path, err))
	}
	// The folder is ours and 0700 when we made it; the socket's own mode
	// keeps it private where the user made the folder more open.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("chmod %s: %v", path, err))
	}
	return ln, nil
}

// ownedByMe refuses a path another user owns.
func ownedByMe(path string) error {
	info, err := os.Lstat(path)
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Getuid() {
		return errcode.Errorf(errcode.PermissionDenied, "%s belongs to user %d, not to this user (%d): refusing to use it", path, st.Uid, os.Getuid())
	}
	return nil
}

// Serve accepts connections on ln and answers each with ServeConn (its
// calls cancelled when the client hangs up) until ctx ends; then it closes
// ln and waits for the connections' calls to end.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return errcode.Wrap(errcode.ServiceUnavailable, err, "accept: "+err.Error())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The connection closes when ctx ends too, so a blocked read
			// returns and the calls are cancelled.
			done := context.AfterFunc(ctx, func() { _ = conn.Close() })
			defer done()
			defer conn.Close()
			_ = s.ServeConn(ctx, conn, conn, ConnOptions{CancelOnEOF: true})
		}()
	}
}
