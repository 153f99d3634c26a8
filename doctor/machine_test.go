package doctor

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckUI(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		err    error
		from   uiSource
		status Status
		has    string
		fix    string
	}{
		{"answers", 200, nil, uiFromService, OK, "the Temporal UI answers at http://127.0.0.1:8233 (`subagents ui`", ""},
		{"answers where guessed", 200, nil, uiGuessed, OK, "answers at http://127.0.0.1:8233 (the frontend's port + 1000: the service does not say", ""},
		{"nothing where the service says", 0, errors.New("connection refused"), uiFromService, Fail, "does not answer at http://127.0.0.1:8233: connection refused", "subagents stop"},
		{"nothing where guessed", 0, errors.New("connection refused"), uiGuessed, Fail, "does not answer at http://127.0.0.1:8233: connection refused", "--ui-url"},
		{"nothing there, given", 0, errors.New("connection refused"), uiGiven, Fail, "does not answer", "--ui-url"},
		{"unhealthy", 503, nil, uiGiven, Warn, "HTTP 503", "--ui-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked string
			r := checkUI(context.Background(), func(_ context.Context, url string) (int, error) { asked = url; return tt.code, tt.err }, "http://127.0.0.1:8233/", tt.from)
			if asked != "http://127.0.0.1:8233/healthz" {
				t.Fatalf("asked %s", asked)
			}
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) || !strings.Contains(r.Fix, tt.fix) || r.Details["url"] != "http://127.0.0.1:8233" {
				t.Fatalf("%+v", r)
			}
		})
	}
}

func TestCheckDisk(t *testing.T) {
	data := filepath.Join(t.TempDir(), "not", "made", "yet")
	tests := []struct {
		name   string
		free   uint64
		err    error
		status Status
		has    string
	}{
		{"room", 64 << 30, nil, OK, "64.0 GiB free for the data dir"},
		{"tight", 1 << 30, nil, Warn, "only 1.0 GiB free"},
		{"full", 100 << 20, nil, Fail, "only 100.0 MiB free for the data dir " + data + ", below the 512.0 MiB"},
		{"unknown", 0, errors.New("permission denied"), Warn, "cannot tell"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var at string
			r := checkDisk(func(p string) (uint64, error) { at = p; return tt.free, tt.err }, data, DefaultMinFree)
			if at != filepath.Dir(filepath.Dir(filepath.Dir(data))) {
				t.Fatalf("looked at %s, want the nearest folder that exists", at)
			}
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) {
				t.Fatalf("%+v", r)
			}
			if r.Status == Fail && !strings.Contains(r.Fix, "SUBAGENTS_DATA_DIR") {
				t.Fatalf("fix %q", r.Fix)
			}
		})
	}
}

func TestBytesText(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 512 << 20: "512.0 MiB", 3 << 40: "3.0 TiB"} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}
