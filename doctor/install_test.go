package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/worker"
)

func TestCheckPi(t *testing.T) {
	tests := []struct {
		name   string
		pi     worker.Pi
		err    error
		judged piJudged
		status Status
		has    string
		path   string
	}{
		{"the pinned one", worker.Pi{Path: "/t/pi", Version: PinnedPi, Source: "source tree"}, nil, piJudged{}, OK, "pi 0.87.1 at /t/pi (source tree)", "/t/pi"},
		{"another release", worker.Pi{Path: "/usr/bin/pi", Version: "0.99.0", Source: "PATH"}, nil, piJudged{}, Warn, `pi "0.99.0" at /usr/bin/pi (PATH) is not pi 0.87.1`, "/usr/bin/pi"},
		{"none", worker.Pi{}, errors.New("pi not found: pass --pi PATH"), piJudged{}, Fail, "pi not found", ""},
		{"one that does not run", worker.Pi{}, errors.New("pi at /o/pi (PATH) does not run: boom (pi needs Node >= 22.19)"), piJudged{}, Fail, "pi at /o/pi (PATH) does not run", "/o/pi"},
		{"the service's", worker.Pi{Path: "/s/pi", Version: PinnedPi, Source: "$SUBAGENTS_PI"}, nil, piJudged{servicePid: 42}, OK,
			"pi 0.87.1 at /s/pi, the running service's (pid 42; found by $SUBAGENTS_PI)", "/s/pi"},
		{"the service's, gone", worker.Pi{}, errors.New("pi ($SUBAGENTS_PI): /s/pi does not exist or is not a file"), piJudged{servicePid: 42}, Fail,
			"the running service's pi (pid 42): pi ($SUBAGENTS_PI): /s/pi does not exist", ""},
		{"a service whose pi is not known", worker.Pi{Path: "/t/pi", Version: PinnedPi, Source: "source tree"}, nil, piJudged{unreadPid: 42}, OK,
			"pi 0.87.1 at /t/pi (source tree): the pi this doctor finds; the running service (pid 42) found its own at its start, which its log names", "/t/pi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkPi(tt.pi, tt.err, tt.judged)
			if r.Name != CheckPi || r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) {
				t.Fatalf("%+v", r)
			}
			if tt.status != OK && !strings.Contains(r.Fix, "npm ci") {
				t.Fatalf("fix %q says nothing of npm ci", r.Fix)
			}
			if tt.judged.servicePid > 0 && tt.status != OK && !strings.Contains(r.Fix, "restart the service") {
				t.Fatalf("fix %q says nothing of restarting the service", r.Fix)
			}
			if got, _ := r.Details["path"].(string); got != tt.path || piMissing(r) != (tt.path == "") {
				t.Fatalf("path %q (missing %v), want %q", got, piMissing(r), tt.path)
			}
		})
	}
}

// TestCheckPiReadsFindPi: the check reads worker.FindPi's own errors: a pi
// that is not there is missing, one that does not run is found, at its
// path (the node check looks beside it).
func TestCheckPiReadsFindPi(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "pi")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho broken >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		flag string
		path string
	}{{broken, broken}, {filepath.Join(dir, "none"), ""}} {
		_, err := worker.FindPi(context.Background(), worker.PiLookup{Flag: tt.flag})
		r := checkPi(worker.Pi{}, err, piJudged{})
		if got, _ := r.Details["path"].(string); r.Status != Fail || got != tt.path || piMissing(r) != (tt.path == "") {
			t.Fatalf("--pi %s: %+v, want path %q", tt.flag, r, tt.path)
		}
	}
}

func TestCheckNode(t *testing.T) {
	tests := []struct {
		name    string
		version string
		err     error
		status  Status
	}{
		{"npm's Node 22", "v22.23.3", nil, OK},
		{"just new enough", "v22.19.0", nil, OK},
		{"a newer major", "v24.1.0", nil, OK},
		{"the machine's Node 20", "v20.20.2", nil, Fail},
		{"22 but too early", "v22.18.9", nil, Fail},
		{"none", "", errors.New("node is neither beside pi nor on PATH"), Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotPrefix string
			r := checkNode(context.Background(), func(_ context.Context, prefix string) (string, string, error) {
				gotPrefix = prefix
				return prefix + "/node", tt.version, tt.err
			}, "/tree/node_modules/.bin")
			if gotPrefix != "/tree/node_modules/.bin" {
				t.Fatalf("looked with prefix %q", gotPrefix)
			}
			if r.Status != tt.status {
				t.Fatalf("%+v", r)
			}
			if r.Status == Fail && (!strings.Contains(r.Fix, "npm ci") || !strings.Contains(r.Verdict+r.Fix, MinNode)) {
				t.Fatalf("%+v", r)
			}
		})
	}
}

func TestAtLeast(t *testing.T) {
	tests := []struct {
		v, min string
		want   bool
	}{
		{"v22.19.0", "22.19.0", true}, {"22.19", "22.19.0", true}, {"v22.9.0", "22.19.0", false},
		{"v23.0.0-nightly", "22.19.0", true}, {"0.87.1", "0.87.1", true}, {"garbage", "1.0.0", false}, {"", "1", false},
	}
	for _, tt := range tests {
		if got := atLeast(tt.v, tt.min); got != tt.want {
			t.Errorf("atLeast(%q, %q) = %v", tt.v, tt.min, got)
		}
	}
}
