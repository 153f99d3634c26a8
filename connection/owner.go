package connection

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"strings"
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

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

func ownerIn(table string, want []net.IP, port int) (int, bool) {
	f, err := os.Open(table)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	lines.Scan() // the header
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 8 || fields[3] != tcpListen {
			continue
		}
		ip, p, ok := parseProcAddr(fields[1])
		if !ok || p != port {
			continue
		}
		match := ip.IsUnspecified()
		for _, w := range want {
			match = match || ip.Equal(w)
		}
		if !match {
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
