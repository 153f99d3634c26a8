// Package ports picks free TCP ports on 127.0.0.1 for the servers the tests,
// the bench and `subagents dev` start on this machine.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Ports are picked below Linux's ephemeral range (32768-60999 by default).
// A port the kernel hands out for ":0" is closed again before the server
// binds it, and in that window any outgoing connection on the machine (a pi
// child calling its model, a test's client) may be given the same port as
// its local end: the server then fails with "address already in use".
// Outgoing connections never take a port below the range. PostgreSQL, for
// one, needs this too: it stores Temporal's membership ports as smallint.
const (
	Low  = 20000
	High = 32767
	// tries: a busy port is rare there; after this many, give up.
	tries = 256
	// reserveFor is how long a port Free handed out stays reserved for
	// its caller against every other Free on the machine: the caller
	// binds it seconds later (an embedded Temporal's services listen
	// only after its SQLite schema is set up, up to about 20 s on a
	// loaded two-core machine); a minute covers that with room.
	reserveFor = time.Minute
)

// Free returns a port in [Low, High] that is free on ip, and whose port+d is
// free too for every d in also (e.g. 1000 for a UI beside a frontend).
//
// The port is free when Free looks, and the server binds it later: in
// between, another server on the machine picking ports the same way could
// pick it too, and one of them would fail to bind (an embedded Temporal
// then exits: "Failed to start gRPC listener"). So Free also reserves the
// ports it returns, for reserveFor, against every other Free of this
// account on the machine: the tests start dozens of servers at once, each
// in a process of its own or not.
func Free(ip string, also ...int) (int, error) {
	port, release, err := Hold(ip, also...)
	if err != nil {
		return 0, err
	}
	time.AfterFunc(reserveFor, release)
	return port, nil
}

// Hold is Free for a caller that gives its ports up and binds them again
// later (a cluster whose services are stopped and started, a service
// killed and restarted on the same ports): the reservation lasts until
// release, not reserveFor, so that no other Free on the machine picks a
// port while nothing listens on it. It ends with the process too.
func Hold(ip string, also ...int) (port int, release func(), err error) {
	for range tries {
		p := Low + rand.IntN(High-Low+1-maxOf(also))
		if !free(ip, p) || !allFree(ip, p, also) {
			continue
		}
		if held, ok := reserveAll(p, also); ok {
			var once sync.Once
			return p, func() {
				once.Do(func() {
					for _, f := range held {
						_ = f.Close()
					}
				})
			}, nil
		}
	}
	return 0, nil, fmt.Errorf("no free port on %s between %d and %d after %d tries", ip, Low, High, tries)
}

func allFree(ip string, port int, also []int) bool {
	for _, d := range also {
		if !free(ip, port+d) {
			return false
		}
	}
	return true
}

func free(ip string, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

// reserveAll reserves port and port+d for each d in also, or none of them,
// and returns the reservations it holds.
func reserveAll(port int, also []int) ([]*os.File, bool) {
	var held []*os.File
	for _, d := range append([]int{0}, also...) {
		f, ok := reserve(port + d)
		if !ok {
			for _, h := range held {
				_ = h.Close()
			}
			return nil, false
		}
		if f != nil {
			held = append(held, f)
		}
	}
	return held, true
}

// reserve takes port's reservation: an exclusive lock on its file in this
// account's reservation folder, which the kernel drops when the file
// closes or the process ends. ok false when another Free holds it (in
// this process too: each open is a lock of its own). Where no folder of
// this account's own can be had, it reserves nothing and says ok: the
// free check alone is what Free did before.
func reserve(port int) (f *os.File, ok bool) {
	dir, err := reservations()
	if err != nil {
		return nil, true
	}
	f, err = os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
}

// reservations is this account's folder of port reservations, under the
// temporary folder every process of the account shares. A folder of that
// name that another account made, or that others may write, is not used:
// its owner could hold every port's lock.
func reservations() (string, error) {
	uid := os.Getuid()
	dir := filepath.Join(os.TempDir(), "subagents-ports-"+strconv.Itoa(uid))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != uid || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is not this account's own folder", dir)
	}
	return dir, nil
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
