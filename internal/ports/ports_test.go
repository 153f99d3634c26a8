package ports

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// A port Free handed out is not handed out again while its reservation
// holds, in this process or another one of this account: two servers that
// pick ports at once never pick the same one.
func TestFreeReserves(t *testing.T) {
	p, err := Free("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{p, p + 1} {
		if f, ok := reserve(port); ok || f != nil {
			t.Fatalf("port %d was reserved again while its first reservation holds", port)
		}
	}
	// Another process of this account sees the reservation too.
	dir, err := reservations()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("flock", "-n", filepath.Join(dir, strconv.Itoa(p)), "true").CombinedOutput()
	if err == nil {
		t.Fatalf("another process took port %d's reservation: %s", p, out)
	}
	// A port whose reservation is free is reserved, once.
	q := p + 2
	f, ok := reserve(q)
	if !ok || f == nil {
		t.Fatalf("port %d, reserved by nobody, could not be reserved", q)
	}
	if _, again := reserve(q); again {
		t.Fatalf("port %d reserved twice", q)
	}
	_ = f.Close()
	if f, ok := reserve(q); !ok || f == nil {
		t.Fatalf("port %d's reservation did not end with its file", q)
	} else {
		_ = f.Close()
	}
}

// TestHoldReservesUntilReleased: a held port stays reserved against every
// other Free, in this process and others, until its release, however long
// that is (Free's reservation ends after reserveFor); release twice is one.
func TestHoldReservesUntilReleased(t *testing.T) {
	p, release, err := Hold("127.0.0.1", 1000)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := reservations()
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{p, p + 1000} {
		if f, ok := reserve(port); ok || f != nil {
			t.Fatalf("port %d was reserved again while it is held", port)
		}
		if out, err := exec.Command("flock", "-n", filepath.Join(dir, strconv.Itoa(port)), "true").CombinedOutput(); err == nil {
			t.Fatalf("another process took held port %d's reservation: %s", port, out)
		}
	}
	release()
	release()
	for _, port := range []int{p, p + 1000} {
		f, ok := reserve(port)
		if !ok || f == nil {
			t.Fatalf("port %d is still reserved after its release", port)
		}
		_ = f.Close()
	}
}

// A reservation folder of the right name that others may write is not
// used: whoever made it could hold every port.
func TestReservationsRefusesAForeignFolder(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := filepath.Join(os.TempDir(), "subagents-ports-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := reservations(); err == nil {
		t.Fatal("a folder others may write was used for reservations")
	}
	// Free still works, with the free check alone.
	if _, err := Free("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
}
