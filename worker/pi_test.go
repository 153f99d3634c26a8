package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

// fakePi writes an executable named pi into dir that prints version.
func fakePi(t *testing.T, dir, version string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "pi")
	script := "#!/bin/sh\necho " + version + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindPiOrder(t *testing.T) {
	root := t.TempDir()
	flagPi := fakePi(t, filepath.Join(root, "flag"), "1.0.0-flag")
	envPi := fakePi(t, filepath.Join(root, "env"), "1.0.0-env")
	tree := filepath.Join(root, "tree")
	treeBin := fakePi(t, filepath.Join(tree, "extension", "node_modules", ".bin"), "1.0.0-tree")
	pathPi := fakePi(t, filepath.Join(root, "path"), "1.0.0-path")
	onPath := func(string) (string, error) { return pathPi, nil }
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }

	tests := []struct {
		name        string
		lookup      PiLookup
		wantPath    string
		wantVersion string
		wantSource  string
	}{
		{"flag first", PiLookup{Flag: flagPi, Env: envPi, TreeRoots: []string{tree}, LookPath: onPath}, flagPi, "1.0.0-flag", "--pi"},
		{"then env", PiLookup{Env: envPi, TreeRoots: []string{tree}, LookPath: onPath}, envPi, "1.0.0-env", "$SUBAGENTS_PI"},
		{"then the source tree", PiLookup{TreeRoots: []string{root, tree}, LookPath: onPath}, treeBin, "1.0.0-tree", "source tree"},
		{"then PATH", PiLookup{TreeRoots: []string{root}, LookPath: onPath}, pathPi, "1.0.0-path", "PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pi, err := FindPi(context.Background(), tt.lookup)
			if err != nil {
				t.Fatal(err)
			}
			if pi.Path != tt.wantPath || pi.Version != tt.wantVersion || pi.Source != tt.wantSource {
				t.Fatalf("got %+v", pi)
			}
			if pi.PathPrefix != filepath.Dir(tt.wantPath) {
				t.Fatalf("PathPrefix %s: Node 22 beside pi would not come first", pi.PathPrefix)
			}
		})
	}

	t.Run("missing everywhere", func(t *testing.T) {
		_, err := FindPi(context.Background(), PiLookup{TreeRoots: []string{root}, LookPath: notOnPath})
		if !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "pi not found") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestFindPiThatDoesNotRun(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "pi")
	script := "#!/bin/sh\necho 'pi requires Node.js >= 22.19.0' >&2\nexit 1\n"
	if err := os.WriteFile(broken, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"fails", broken, "pi requires Node.js >= 22.19.0"},
		{"missing file", filepath.Join(dir, "nope"), "does not exist"},
		{"a folder", dir, "does not exist or is not a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FindPi(context.Background(), PiLookup{Flag: tt.path})
			if !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestDefaultDataDir(t *testing.T) {
	t.Setenv("SUBAGENTS_DATA_DIR", "relative/data")
	d, err := DefaultDataDir()
	if err != nil || !filepath.IsAbs(d) || !strings.HasSuffix(d, "relative/data") {
		t.Fatalf("DefaultDataDir = %q, %v", d, err)
	}
	t.Setenv("SUBAGENTS_DATA_DIR", "")
	t.Setenv("HOME", "/home/someone")
	if d, err := DefaultDataDir(); err != nil || d != "/home/someone/.pi/subagents" {
		t.Fatalf("DefaultDataDir = %q, %v", d, err)
	}
}
