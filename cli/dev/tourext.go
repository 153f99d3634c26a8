package dev

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/durable-pi/subagents/worker"
)

// extensionDirs are the folders where the pi extension may lie, for a
// child that delegates (its src/nested.ts, docs/pi.md#nesting), in the
// order the tour looks: $SUBAGENTS_EXTENSION_DIR (what the extension tells
// the service it starts), the source tree this binary was built in
// (bin/subagents-dev beside extension/, as the worker itself looks), and
// the npm package beside the platform package that holds this binary
// (node_modules/@durable-pi/subagents-<platform>/bin/subagents-dev, with
// @durable-pi/subagents next to it, or above it when npm nested it).
func extensionDirs(env, exe string) []string {
	var dirs []string
	if env != "" {
		dirs = append(dirs, env)
	}
	if exe != "" {
		bin := filepath.Dir(exe)
		dirs = append(dirs, filepath.Join(bin, "..", "extension"))
		// Only where npm put the binary: elsewhere these name folders
		// that have nothing to do with it (/ for a binary in /tmp/x).
		platform := filepath.Dir(bin)
		if strings.HasPrefix(filepath.Base(platform), "subagents-") && filepath.Base(filepath.Dir(platform)) == "@durable-pi" {
			dirs = append(dirs,
				filepath.Join(bin, "..", "..", "subagents"),
				filepath.Join(bin, "..", "..", "..", ".."))
		}
	}
	for i, d := range dirs {
		dirs[i] = filepath.Clean(d)
	}
	return dirs
}

// findExtension is the first of dirs that holds the extension's nested
// entry (worker.NestedEntry) and the compiled extension it loads, as an
// absolute path; "" when none does.
func findExtension(dirs []string) string {
	for _, d := range dirs {
		if !isFile(filepath.Join(d, worker.NestedEntry)) || !isFile(filepath.Join(d, "dist", "extension.js")) {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
	}
	return ""
}

func isFile(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir()
}
