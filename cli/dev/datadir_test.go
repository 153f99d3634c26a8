package dev

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

// TestDevSecuresDataDir: `subagents dev` refuses a data dir another
// account owns, and makes an open one (0755, as an older service or a
// folder made by hand left it) its owner's alone, saying so in its log,
// before anything else: here the data dir's lock is held, so the run ends
// right after that step.
func TestDevSecuresDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test plays a second local user by chown: run it as root, as CI does")
	}
	tests := []struct {
		name  string
		owner int // -1: the test's own user
		code  errcode.Code
		log   string
	}{
		{name: "another account's data dir", owner: 65534, code: errcode.PermissionDenied, log: ""},
		{name: "an open data dir of the user's", owner: -1, code: errcode.InvalidInput, log: "its owner's alone (0700, was 0755)"},
	}
	pi, err := filepath.Abs(filepath.Join("..", "..", "extension", "node_modules", ".bin", "pi"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.owner >= 0 {
				if err := os.Chown(dir, tt.owner, tt.owner); err != nil {
					t.Fatal(err)
				}
			} else {
				unlock, err := lockDataDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer unlock()
				if err := os.Chmod(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			err := Main(context.Background(), []string{"--data-dir", dir, "--headless", "--pi", pi}, &stdout, &stderr)
			if !errcode.Is(err, tt.code) {
				t.Fatalf("dev: %v, want %s\n%s", err, tt.code, stderr.String())
			}
			fi, serr := os.Stat(dir)
			if serr != nil {
				t.Fatal(serr)
			}
			if tt.owner >= 0 {
				if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "uid 65534") {
					t.Fatalf("the refusal names neither the folder nor its owner: %v", err)
				}
				if fi.Mode().Perm() != 0o755 {
					t.Fatalf("another account's folder was changed to %04o", fi.Mode().Perm())
				}
				return
			}
			if fi.Mode().Perm() != 0o700 || !strings.Contains(stderr.String(), tt.log) {
				t.Fatalf("data dir %04o, log:\n%s", fi.Mode().Perm(), stderr.String())
			}
		})
	}
}
