package devserver

import "testing"

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8233":        true,
		"127.0.0.1":             true,
		"localhost:8233":        true,
		"LocalHost":             true,
		"[::1]:8233":            true,
		"[::1]":                 true,
		"127.9.9.9:80":          true,
		"rebind.example:8233":   false,
		"127.0.0.1.nip.io:8233": false,
		"10.0.0.1:8233":         false,
		"":                      false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
