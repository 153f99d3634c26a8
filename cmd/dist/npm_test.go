package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/version"
)

func TestParsePlatform(t *testing.T) {
	tests := []struct {
		in, pkg, err string
	}{
		{in: "linux-amd64", pkg: "@durable-pi/subagents-linux-x64"},
		{in: "linux-arm64", pkg: "@durable-pi/subagents-linux-arm64"},
		{in: "darwin-amd64", pkg: "@durable-pi/subagents-darwin-x64"},
		{in: "darwin-arm64", pkg: "@durable-pi/subagents-darwin-arm64"},
		{in: "windows-amd64", err: "want one of linux-amd64"},
		{in: "linux", err: "want one of"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParsePlatform(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || p.PackageName() != tc.pkg || p.String() != tc.in {
				t.Fatalf("%+v %q %v", p, p.PackageName(), err)
			}
		})
	}
}

// TestManifests: the platform packages say which machine they fit (npm
// installs only that one), and the extension package, made from the
// extension's own package.json, is public, runs `subagents` from its shim,
// lists every platform package as an optional dependency of the same
// version, and ships no development dependencies or scripts.
func TestManifests(t *testing.T) {
	var platforms []Platform
	for _, n := range AllPlatforms {
		p, err := ParsePlatform(n)
		if err != nil {
			t.Fatal(err)
		}
		platforms = append(platforms, p)
	}
	var plat struct {
		Name, Version string
		OS, CPU       []string
		Files         []string
	}
	b, err := platformManifest(platforms[1], "1.2.3")
	if err != nil || json.Unmarshal(b, &plat) != nil {
		t.Fatalf("%s %v", b, err)
	}
	if plat.Name != "@durable-pi/subagents-linux-arm64" || plat.Version != "1.2.3" || !slices.Equal(plat.OS, []string{"linux"}) ||
		!slices.Equal(plat.CPU, []string{"arm64"}) || !slices.Equal(plat.Files, []string{"bin/"}) {
		t.Fatalf("platform manifest %s", b)
	}

	ext, err := os.ReadFile(filepath.Join("..", "..", "extension", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err = mainManifest(ext, version.Version, platforms)
	if err != nil {
		t.Fatal(err)
	}
	var main map[string]any
	if err := json.Unmarshal(b, &main); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"private", "devDependencies", "scripts", "allowScripts"} {
		if _, ok := main[gone]; ok {
			t.Errorf("the published manifest keeps %q", gone)
		}
	}
	deps, _ := main["optionalDependencies"].(map[string]any)
	if main["name"] != MainPackage || main["version"] != version.Version || len(deps) != 4 || deps["@durable-pi/subagents-darwin-x64"] != version.Version {
		t.Fatalf("main manifest %s", b)
	}
	for _, m := range [][]byte{b, mustPlatform(t, platforms[0])} {
		if strings.Contains(string(m), `\u00`) || !strings.Contains(string(m), `"access": "public"`) || !strings.Contains(string(m), `"repository"`) {
			t.Fatalf("a manifest is not public, names no repository, or escapes characters npm would not: %s", m)
		}
	}
	if bin, _ := main["bin"].(map[string]any); bin["subagents"] != "bin/subagents.js" {
		t.Fatalf("bin %v", main["bin"])
	}
	if meta, _ := main["peerDependenciesMeta"].(map[string]any); len(meta) != 4 || meta["typebox"] == nil {
		t.Fatalf("peers not optional: %v", main["peerDependenciesMeta"])
	}
	if pi, _ := main["pi"].(map[string]any); pi == nil || main["peerDependencies"] == nil {
		t.Fatalf("the pi manifest or the peers are gone: %s", b)
	}
	if files, _ := main["files"].([]any); !slices.Contains(files, any("bin/")) || !slices.Contains(files, any("dist/")) {
		t.Fatalf("files %v", main["files"])
	}
	if _, err := mainManifest(ext, "9.9.9", platforms); err == nil || !strings.Contains(err.Error(), "the release") {
		t.Fatalf("a manifest of another version than the release: %v", err)
	}
}

func mustPlatform(t *testing.T, p Platform) []byte {
	t.Helper()
	b, err := platformManifest(p, "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
