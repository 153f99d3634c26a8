package version

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestPackageVersion: the extension's package.json carries the same version
// as the binaries, so that the npm packages `make dist` writes from it and
// the service the extension starts agree.
func TestPackageVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "extension", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Version != Version {
		t.Fatalf("extension/package.json is version %q, the binaries %q: change both together", pkg.Version, Version)
	}
}

func TestString(t *testing.T) {
	s := String()
	for _, want := range []string{"subagents " + Version, runtime.GOOS + "/" + runtime.GOARCH, runtime.Version()} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}
