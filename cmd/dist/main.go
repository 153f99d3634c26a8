// Command dist builds a release: stripped binaries of subagents and
// subagents-dev for each platform (CGO off, the version stamped in) and the
// npm packages a pi user installs them with, in dist/npm/: the extension
// package (MainPackage) and one package per platform that npm picks through
// the extension's optionalDependencies and their os and cpu fields (as
// esbuild, biome and swc ship theirs). dist/SHA256SUMS lists every binary.
//
//	go run ./cmd/dist [-platforms linux-amd64,...] [-out dist]
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/durable-pi/subagents/internal/version"
)

// binaries are the commands every platform package holds: the light one
// the extension and users run, and the one that links the embedded server
// (`subagents dev`), which the light one runs from beside itself.
var binaries = []string{"subagents", "subagents-dev"}

// release and tags are -version and -tags: what every binary and package
// of this run says it is, and how its binaries are built.
var release, tags string

func main() {
	platforms := flag.String("platforms", strings.Join(AllPlatforms, ","), "comma-separated platforms to build (GOOS-GOARCH)")
	out := flag.String("out", "dist", "folder the release is written to")
	flag.StringVar(&release, "version", version.Version, "the release to stamp in (a test's next release; a real one changes internal/version)")
	flag.StringVar(&tags, "tags", "", "build tags (the upgrade test's next release builds with upgradeprobe)")
	flag.Parse()
	if err := run(strings.Split(*platforms, ","), *out); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(names []string, out string) error {
	var platforms []Platform
	for _, n := range names {
		p, err := ParsePlatform(strings.TrimSpace(n))
		if err != nil {
			return err
		}
		platforms = append(platforms, p)
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	npm := filepath.Join(out, "npm")
	var sums []string
	for _, p := range platforms {
		dir := filepath.Join(npm, "subagents-"+p.String())
		for _, b := range binaries {
			path := filepath.Join(dir, "bin", b)
			fmt.Fprintf(os.Stderr, "dist: building %s for %s\n", b, p)
			if err := build(p, b, path); err != nil {
				return err
			}
			sum, err := sha256File(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(out, path)
			sums = append(sums, sum+"  "+filepath.ToSlash(rel))
		}
		m, err := platformManifest(p, release)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "package.json"), m, 0o644); err != nil {
			return err
		}
		if err := writeReadme(dir, fmt.Sprintf("# %s\n\nThe `subagents` and `subagents-dev` binaries of durable subagents for pi for %s/%s. Install %s instead: npm installs this package with it on this platform.\n", p.PackageName(), p.GOOS, p.GOARCH, MainPackage)); err != nil {
			return err
		}
	}
	if err := writeMain(filepath.Join(npm, "subagents"), platforms); err != nil {
		return err
	}
	slices.Sort(sums)
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(strings.Join(sums, "\n")+"\n"), 0o644)
}

// build compiles cmd/<name> for p into path: no cgo (the binaries run on
// any glibc or macOS), no paths of this machine, no symbol tables (a third
// of their size), the release stamped in.
func build(p Platform, name, path string) error {
	ldflags := "-s -w -X github.com/durable-pi/subagents/internal/version.Version=" + release
	cmd := exec.Command("go", "build", "-trimpath", "-tags", tags, "-ldflags", ldflags, "-o", path, "./cmd/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.GOOS, "GOARCH="+p.GOARCH)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s for %s: %w", name, p, err)
	}
	return nil
}

// writeMain writes the extension package: the files extension/package.json
// lists, its npm manifest (mainManifest) and the command's shim.
func writeMain(dir string, platforms []Platform) error {
	ext, err := os.ReadFile(filepath.Join("extension", "package.json"))
	if err != nil {
		return err
	}
	if release != version.Version {
		// A test's next release (-version): the extension says it is that
		// release too, as a real release's package.json would.
		var pkg map[string]any
		if err := json.Unmarshal(ext, &pkg); err != nil {
			return fmt.Errorf("extension/package.json: %w", err)
		}
		pkg["version"] = release
		if ext, err = json.Marshal(pkg); err != nil {
			return err
		}
	}
	m, err := mainManifest(ext, release, platforms)
	if err != nil {
		return err
	}
	for _, f := range []string{"index.ts", "dist", "src", "child", "prompts"} {
		if err := copyTree(filepath.Join("extension", f), filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	// The project's README is the package's page on the registry.
	if err := copyTree("README.md", filepath.Join(dir, "README.md")); err != nil {
		return err
	}
	if err := copyTree(filepath.Join("cmd", "dist", "shim.js"), filepath.Join(dir, "bin", "subagents.js")); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(dir, "bin", "subagents.js"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "package.json"), m, 0o644)
}

func writeReadme(dir, text string) error {
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(text), 0o644)
}

// copyTree copies a file, or a folder with everything in it.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = in.Close() }()
		info, err := in.Stat()
		if err != nil {
			return err
		}
		o, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(o, in); err != nil {
			_ = o.Close()
			return err
		}
		return o.Close()
	})
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
