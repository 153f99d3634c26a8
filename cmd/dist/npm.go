package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Scope is the npm scope every package dist writes is published under.
const Scope = "@durable-pi"

// MainPackage is the package a pi user installs: the extension, with a
// `subagents` command that runs its platform's binary.
const MainPackage = Scope + "/subagents"

// Platform is a release target: Go's names for it, and npm's (package.json's
// os and cpu fields, which npm matches against the installing machine).
type Platform struct {
	GOOS, GOARCH string
}

// ParsePlatform reads "linux-amd64" (Go's os and arch).
func ParsePlatform(s string) (Platform, error) {
	goos, goarch, ok := strings.Cut(s, "-")
	p := Platform{GOOS: goos, GOARCH: goarch}
	if !ok || npmOS[goos] == "" || npmCPU[goarch] == "" {
		return Platform{}, fmt.Errorf("platform %q: want one of %s", s, strings.Join(AllPlatforms, ", "))
	}
	return p, nil
}

// AllPlatforms are what `make dist` builds: the machines pi runs on that
// Temporal's server builds for with CGO off.
var AllPlatforms = []string{"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"}

var (
	npmOS  = map[string]string{"linux": "linux", "darwin": "darwin"}
	npmCPU = map[string]string{"amd64": "x64", "arm64": "arm64"}
)

func (p Platform) String() string { return p.GOOS + "-" + p.GOARCH }

// PackageName is the npm package holding p's binaries, named as npm names
// the machine (process.platform and process.arch): the extension and the
// command's shim find it by those.
func (p Platform) PackageName() string {
	return fmt.Sprintf("%s/subagents-%s-%s", Scope, npmOS[p.GOOS], npmCPU[p.GOARCH])
}

// platformManifest is the package.json of p's binaries package.
func platformManifest(p Platform, version string) ([]byte, error) {
	return marshal(map[string]any{
		"name":        p.PackageName(),
		"version":     version,
		"description": fmt.Sprintf("The subagents binaries of durable subagents for pi, for %s/%s: installed by %s as its optional dependency.", p.GOOS, p.GOARCH, MainPackage),
		"license":     "MIT",
		"os":          []string{npmOS[p.GOOS]},
		"cpu":         []string{npmCPU[p.GOARCH]},
		"files":       []string{"bin/"},
	})
}

// mainManifest is the extension package's package.json for npm, from the
// extension's own (ext): public, named MainPackage, with the `subagents`
// command and one optional dependency per platform; no scripts, no
// development dependencies (pi and esbuild are the parent's and the
// build's).
func mainManifest(ext []byte, version string, platforms []Platform) ([]byte, error) {
	var pkg map[string]any
	if err := json.Unmarshal(ext, &pkg); err != nil {
		return nil, fmt.Errorf("extension/package.json: %w", err)
	}
	if v, _ := pkg["version"].(string); v != version {
		return nil, fmt.Errorf("extension/package.json is version %q, the release %q", v, version)
	}
	for _, k := range []string{"private", "devDependencies", "scripts", "allowScripts"} {
		delete(pkg, k)
	}
	pkg["name"] = MainPackage
	pkg["bin"] = map[string]string{"subagents": "bin/subagents.js"}
	files, _ := pkg["files"].([]any)
	if !slices.Contains(files, any("bin/")) {
		files = append(files, "bin/")
	}
	pkg["files"] = files
	deps := map[string]string{}
	for _, p := range platforms {
		deps[p.PackageName()] = version
	}
	pkg["optionalDependencies"] = deps
	// pi supplies its own packages to the extensions it loads, and installs
	// them with --legacy-peer-deps; marked optional, an `npm install -g` does
	// not fetch them either.
	if peers, ok := pkg["peerDependencies"].(map[string]any); ok {
		meta := map[string]any{}
		for name := range peers {
			meta[name] = map[string]bool{"optional": true}
		}
		pkg["peerDependenciesMeta"] = meta
	}
	return marshal(pkg)
}

// marshal writes a manifest as npm does: two-space indents (Go sorts the
// keys), a final newline.
// Every package is public (npm before 9 publishes a scoped package as
// restricted otherwise) and names the repository (the registry's page
// links to it, and --provenance needs it). No HTML escaping: ">=22.19.0"
// stays as written.
func marshal(v map[string]any) ([]byte, error) {
	v["publishConfig"] = map[string]string{"access": "public"}
	v["repository"] = map[string]string{"type": "git", "url": "git+https://github.com/durable-pi/subagents.git"}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
