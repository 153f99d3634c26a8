package connection

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
)

func TestParseProcAddr(t *testing.T) {
	for _, tt := range []struct {
		in   string
		ip   string
		port int
		ok   bool
	}{
		{"0100007F:1C41", "127.0.0.1", 7233, true},
		{"00000000:1F91", "0.0.0.0", 8081, true},
		{"00000000000000000000000001000000:1C41", "::1", 7233, true},
		{"0100007F", "", 0, false},
		{"zz00007F:1C41", "", 0, false},
	} {
		ip, port, ok := parseProcAddr(tt.in)
		if ok != tt.ok || (ok && (!ip.Equal(net.ParseIP(tt.ip)) || port != tt.port)) {
			t.Errorf("parseProcAddr(%q) = %v %d %v, want %s %d %v", tt.in, ip, port, ok, tt.ip, tt.port, tt.ok)
		}
	}
}

// TestListenerOwner finds this process's own listener, as its own user's.
func TestListenerOwner(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, host := range []string{"127.0.0.1", "localhost"} {
		uid, found := listenerOwner(net.JoinHostPort(host, strconv.Itoa(port)))
		if _, err := os.Stat("/proc/net/tcp"); err != nil {
			if found {
				t.Fatalf("found an owner without /proc/net/tcp")
			}
			continue
		}
		if !found || uid != os.Getuid() {
			t.Fatalf("%s: owner %d found %v, want %d", host, uid, found, os.Getuid())
		}
	}
	ln.Close()
	if _, found := listenerOwner(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); found {
		t.Fatal("found a listener after it closed")
	}
}

// TestPeerOwner finds the server's end of a connection to this process's
// own listener as this user's, and the dialer lets it through.
func TestPeerOwner(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Log("no /proc/net/tcp: the check finds nothing here, by design")
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	conn, err := ownedDialer(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if uid, found := peerOwner(conn); !found || uid != os.Getuid() {
		t.Fatalf("peer owner %d found %v, want %d", uid, found, os.Getuid())
	}
}
