// Package version is the release a build is: one number, kept here. `make
// dist` stamps it into the release binaries (-ldflags -X) and writes it into
// every npm package it makes; `subagents version` prints it; the pi
// extension compares it with the running service's.
package version

import (
	"fmt"
	"runtime"
)

// Version is the release. A build from the tree reports the release it is
// on; `make dist` sets it with -X for what it builds (the same value, unless
// a release is cut). TestPackageVersion keeps extension/package.json's
// version equal to it.
var Version = "0.1.0"

// String is what `subagents version` prints: the release, and the platform
// and Go toolchain of the build.
func String() string {
	return fmt.Sprintf("subagents %s (%s/%s, %s)", Version, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
