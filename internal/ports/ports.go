// Package ports picks free TCP ports on 127.0.0.1 for the servers the tests,
// the bench and `subagents dev` start on this machine.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
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
)

// Free returns a port in [Low, High] that is free on ip, and whose port+d is
// free too for every d in also (e.g. 1000 for a UI beside a frontend).
func Free(ip string, also ...int) (int, error) {
	for range tries {
		port := Low + rand.IntN(High-Low+1-maxOf(also))
		if free(ip, port) && allFree(ip, port, also) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s between %d and %d after %d tries", ip, Low, High, tries)
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

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
