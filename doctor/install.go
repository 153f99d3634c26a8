package doctor

import (
	"context"
	"fmt"
	"regexp"
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

// piJudged says whose pi the pi check judged.
type piJudged struct {
	// servicePid: the running service's, its lookup read from its process.
	servicePid int
	// unreadPid: a service runs whose lookup cannot be read: the doctor's
	// own was judged, and the verdict says so.
	unreadPid int
}

// notRunning reads worker.FindPi's error for a pi that was found and does
// not run: its path and how it was found (a test holds the two in step).
var notRunning = regexp.MustCompile(`^pi at (.+?) \((--pi|\$SUBAGENTS_PI|source tree|PATH)\) does not run: `)

// checkPi: pi is found where the service looks for it, runs, and is the
// release this project pins. Its details hold its path whenever one was
// found, also one that does not run: the node check looks beside it.
func checkPi(pi worker.Pi, err error, judged piJudged) Result {
	fix := installFix
	if judged.servicePid > 0 {
		fix += "; then restart the service (`subagents stop`, then `subagents dev`), which finds pi again at its start"
	}
	if err != nil {
		msg := oneLine(err.Error())
		if judged.servicePid > 0 {
			msg = fmt.Sprintf("the running service's pi (pid %d): %s", judged.servicePid, msg)
		}
		r := fail(CheckPi, msg+judged.unread(), fix)
		if m := notRunning.FindStringSubmatch(oneLine(err.Error())); m != nil {
			r = r.with("path", m[1]).with("source", m[2])
		}
		return r
	}
	where := fmt.Sprintf("at %s (%s)", pi.Path, pi.Source)
	if judged.servicePid > 0 {
		where = fmt.Sprintf("at %s, the running service's (pid %d; found by %s)", pi.Path, judged.servicePid, pi.Source)
	}
	r := ok(CheckPi, fmt.Sprintf("pi %s %s%s", pi.Version, where, judged.unread()))
	if pi.Version != PinnedPi {
		r = warn(CheckPi, fmt.Sprintf("pi %q %s is not pi %s, the release this project is tested with%s", pi.Version, where, PinnedPi, judged.unread()), fix)
	}
	r = r.with("path", pi.Path).with("version", pi.Version).with("source", pi.Source)
	if judged.servicePid > 0 {
		r = r.with("service_pid", judged.servicePid)
	}
	return r
}

// unread says, when the running service's pi could not be read, that the
// doctor judged its own.
func (j piJudged) unread() string {
	if j.unreadPid == 0 {
		return ""
	}
	return fmt.Sprintf(": the pi this doctor finds; the running service (pid %d) found its own at its start, which its log names: compare the two", j.unreadPid)
}

// piMissing is whether the pi check found no pi at all (not one that
// does not run, nor one it gave up waiting for).
func piMissing(r Result) bool {
	_, found := r.Details["path"]
	return r.Status == Fail && !found && !r.late
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
	if !NodeNewEnough(v) {
		r = fail(CheckNode, fmt.Sprintf("Node %s at %s is older than %s, which pi needs", v, path, MinNode), fix)
	}
	return r.with("path", path).with("version", v)
}

// NodeNewEnough is whether a Node of version ("v22.23.3") runs pi.
func NodeNewEnough(version string) bool { return atLeast(version, MinNode) }

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
