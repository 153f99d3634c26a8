package doctor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/worker"
)

func TestCheckPi(t *testing.T) {
	tests := []struct {
		name   string
		pi     worker.Pi
		err    error
		status Status
		has    string
	}{
		{"the pinned one", worker.Pi{Path: "/t/pi", Version: PinnedPi, Source: "source tree"}, nil, OK, "pi 0.87.1 at /t/pi (source tree)"},
		{"another release", worker.Pi{Path: "/usr/bin/pi", Version: "0.99.0", Source: "PATH"}, nil, Warn, `pi "0.99.0" at /usr/bin/pi (PATH) is not pi 0.87.1`},
		{"none", worker.Pi{}, errors.New("pi not found: pass --pi PATH"), Fail, "pi not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkPi(context.Background(), func(context.Context) (worker.Pi, error) { return tt.pi, tt.err })
			if r.Name != CheckPi || r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) {
				t.Fatalf("%+v", r)
			}
			if tt.status != OK && !strings.Contains(r.Fix, "npm ci") {
				t.Fatalf("fix %q says nothing of npm ci", r.Fix)
			}
		})
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
