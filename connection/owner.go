package connection

import (
	"bufio"
	"context"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/durable-pi/subagents/internal/errcode"
)

// A key must never go to a frontend another account runs: with the local
// service stopped, any local user may listen on its port, take the key a
// client presents, and use it once the service is back. On Linux the
// kernel says who owns a listening socket (/proc/net/tcp); elsewhere the
// check finds nothing and the key goes as before.

// listenerOwner is the uid of the process listening on hostPort, a
// loopback address, and whether one was found.
func listenerOwner(hostPort string) (uid int, found bool) {
	host, portText, err := net.SplitHostPort(hostPort)
	if err != nil {
		return 0, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return 0, false
	}
	var want []net.IP
	if host == "localhost" {
		want = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	} else if ip := net.ParseIP(host); ip != nil {
		want = []net.IP{ip}
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, ok := ownerIn(table, want, port); ok {
			return uid, true
		}
	}
	return 0, false
}

// tcpListen and tcpEstablished are socket states in /proc/net/tcp.
const (
	tcpListen      = "0A"
	tcpEstablished = "01"
)

// peerOwner is the uid that owns the server's end of conn, a TCP connection
// on this machine, and whether it was found: the proof, taken after the
// connection is made, that no one took the port between a check and a dial.
func peerOwner(conn net.Conn) (uid int, found bool) {
	local, ok1 := conn.LocalAddr().(*net.TCPAddr)
	remote, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, false
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, ok := scanTable(table, func(state string, l, r net.IP, lport, rport int) bool {
			return state == tcpEstablished && lport == remote.Port && rport == local.Port && l.Equal(remote.IP) && r.Equal(local.IP)
		}); ok {
			return uid, true
		}
	}
	return 0, false
}

// ownedDialer dials addr and proves the server's end belongs to this user
// (on Linux): gRPC dials again after every lost connection, and each new
// one carries the key.
func ownedDialer(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if uid, found := peerOwner(conn); found && uid != os.Getuid() {
		_ = conn.Close()
		return nil, strangerError(addr, uid)
	}
	return conn, nil
}

func strangerError(addr string, uid int) error {
	return errcode.Errorf(errcode.PermissionDenied,
		"the Temporal listening on %s belongs to user %d, not to this user (%d): not sending it this user's API key; stop it, or start the local service on another --port",
		addr, uid, os.Getuid())
}

func ownerIn(table string, want []net.IP, port int) (int, bool) {
	return scanTable(table, func(state string, ip, _ net.IP, p, _ int) bool {
		if state != tcpListen || p != port {
			return false
		}
		match := ip.IsUnspecified()
		for _, w := range want {
			match = match || ip.Equal(w)
		}
		return match
	})
}

// scanTable is the uid of the first socket of a /proc/net/tcp table that
// match takes: its state, local and remote addresses and ports.
func scanTable(table string, match func(state string, local, remote net.IP, lport, rport int) bool) (int, bool) {
	f, err := os.Open(table)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	lines.Scan() // the header
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 8 {
			continue
		}
		local, lport, ok1 := parseProcAddr(fields[1])
		remote, rport, ok2 := parseProcAddr(fields[2])
		if !ok1 || !ok2 || !match(fields[3], local, remote, lport, rport) {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			continue
		}
		return uid, true
	}
	return 0, false
}

// parseProcAddr reads "0100007F:1C41": the address as the kernel stores it
// (32-bit words in host order, little-endian here), the port in hex.
func parseProcAddr(s string) (net.IP, int, bool) {
	addrHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, false
	}
	raw, err := hex.DecodeString(addrHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, 0, false
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return nil, 0, false
	}
	return net.IP(raw), int(port), true
}
