package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestFree(t *testing.T) {
	for _, tc := range []struct {
		name string
		also []int
	}{
		{"one port", nil},
		{"with its UI port", []int{1000}},
		{"with two more", []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Free("127.0.0.1", tc.also...)
			if err != nil {
				t.Fatal(err)
			}
			if p < Low || p+maxOf(tc.also) > High {
				t.Fatalf("port %d (+%v) outside [%d, %d]", p, tc.also, Low, High)
			}
			for _, d := range append([]int{0}, tc.also...) {
				ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+d)))
				if err != nil {
					t.Fatalf("port %d is not free: %v", p+d, err)
				}
				_ = ln.Close()
			}
		})
	}
}

// A port in use is never reported free.
func TestFreeSkipsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	if free("127.0.0.1", taken) {
		t.Fatalf("port %d is in use but reported free", taken)
	}
}
