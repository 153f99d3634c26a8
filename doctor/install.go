package doctor

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/durable-pi/subagents/worker"
)

// PinnedPi is the pi release this project is built and tested with
// (extension/package.json; a test keeps the two in step).
const PinnedPi = "0.87.1"

// MinNode is the oldest Node pi runs on (pi's engines field).
const MinNode = "22.19.0"

// installFix is how pi and its Node come: both from the lockfile.
const installFix = "run `make` in the source tree (`npm ci` in extension/ installs pi " + PinnedPi +
	" and the Node 22 it runs on), or set SUBAGENTS_PI to a pi " + PinnedPi

// checkPi: pi is found where the service looks for it, runs, and is the
// release this project pins.
func checkPi(ctx context.Context, find func(context.Context) (worker.Pi, error)) Result {
	pi, err := find(ctx)
	if err != nil {
		return fail(CheckPi, oneLine(err.Error()), installFix)
	}
	where := fmt.Sprintf("at %s (%s)", pi.Path, pi.Source)
	r := ok(CheckPi, fmt.Sprintf("pi %s %s", pi.Version, where))
	if pi.Version != PinnedPi {
		r = warn(CheckPi, fmt.Sprintf("pi %q %s is not pi %s, the release this project is tested with", pi.Version, where, PinnedPi), installFix)
	}
	return r.with("path", pi.Path).with("version", pi.Version).with("source", pi.Source)
}

// checkNode: the Node pi runs on (the first on a PATH that starts with
// pi's own folder, as the worker spawns pi) is new enough.
func checkNode(ctx context.Context, version func(context.Context, string) (string, string, error), prefix string) Result {
	const fix = "run `make` in the source tree: `npm ci` in extension/ installs Node 22 beside pi, which the service puts first on pi's PATH; or install Node " + MinNode + " or newer"
	path, v, err := version(ctx, prefix)
	if err != nil {
		return fail(CheckNode, "no Node to run pi on: "+oneLine(err.Error()), fix)
	}
	r := ok(CheckNode, fmt.Sprintf("Node %s at %s", v, path))
	if !atLeast(v, MinNode) {
		r = fail(CheckNode, fmt.Sprintf("Node %s at %s is older than %s, which pi needs", v, path, MinNode), fix)
	}
	return r.with("path", path).with("version", v)
}

// atLeast reports whether version ("v22.23.3", "22.19") is min or newer;
// a version that does not read as numbers is not.
func atLeast(version, min string) bool {
	a, okA := parseVersion(version)
	b, okB := parseVersion(min)
	if !okA || !okB {
		return false
	}
	for i := range 3 {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+ "); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// oneLine joins a message's lines: a verdict is one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
