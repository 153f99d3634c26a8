package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/durable-pi/subagents/doctor"
)

// A Node older than pi needs, for the doctor's node check.
type nodeFound struct {
	path, version string
	// real: a Node installed on this machine, not a stand-in.
	real bool
}

// oldNode is a real Node on this machine older than doctor.MinNode (a
// distribution's own, e.g. /usr/bin/node 20), found where such a Node is
// installed. Where the machine has none, a script that answers as Node 20
// does to --version stands in for it: the check reads no more of Node than
// that answer, and no real part can be older than what is installed.
func oldNode(t *testing.T) nodeFound {
	t.Helper()
	candidates := []string{"/usr/bin/node", "/usr/local/bin/node", "/bin/node"}
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(out))
		if !doctor.NodeNewEnough(v) {
			return nodeFound{path: p, version: v, real: true}
		}
	}
	fake := filepath.Join(t.TempDir(), "node")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho v20.11.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return nodeFound{path: fake, version: "v20.11.0"}
}

// hangingListener takes connections on a loopback port and never answers
// on them, as a service that hangs: its address.
func hangingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
