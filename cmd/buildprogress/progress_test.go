package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIsPackage(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"go.temporal.io/server/service/history", true},
		{"github.com/durable-pi/subagents/cmd/subagents-dev", true},
		{"internal/abi", true},
		{"runtime", true},
		{"command-line-arguments", true},
		{"gopkg.in/yaml.v3", true},
		{"# github.com/durable-pi/subagents/cli", false},
		{"cli/cli.go:12:3: undefined: foo", false},
		{"./main.go:1:1: expected 'package', found x", false},
		{"go: downloading go.temporal.io/server v1.32.1", false},
		{"note: module requires Go 1.27", false},
		{"", false},
		{"  indented", false},
	} {
		if got := isPackage(tc.line); got != tc.want {
			t.Errorf("isPackage(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

func TestStatus(t *testing.T) {
	const pkg = "go.temporal.io/server/service/history"
	full := "compiling package 312: go.temporal.io/server/service/history (2m10s)"
	for _, tc := range []struct {
		name    string
		elapsed time.Duration
		width   int
		want    string
	}{
		{"no terminal: never cut", 2*time.Minute + 10*time.Second + 400*time.Millisecond, 0, full},
		{"a wide terminal", 2*time.Minute + 10*time.Second, 200, full},
		{"one column to spare", 2*time.Minute + 10*time.Second, len(full) + 1, full},
		{"as wide as the line: cut, so it cannot wrap", 2*time.Minute + 10*time.Second, len(full), full[:len(full)-2] + "…"},
		{"a narrow terminal", 2*time.Minute + 10*time.Second, 30, full[:28] + "…"},
		{"seconds round", 9*time.Second + 600*time.Millisecond, 0, "compiling package 312: " + pkg + " (10s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := status(312, pkg, tc.elapsed, tc.width)
			if got != tc.want {
				t.Fatalf("status = %q, want %q", got, tc.want)
			}
			if tc.width > 0 && len([]rune(got)) >= tc.width {
				t.Fatalf("status is %d columns on a terminal of %d", len([]rune(got)), tc.width)
			}
		})
	}
	if got := summary(1, 1500*time.Millisecond); got != "compiled 1 package in 2s" {
		t.Errorf("summary = %q", got)
	}
	if got := summary(1480, 7*time.Minute+2*time.Second); got != "compiled 1480 packages in 7m2s" {
		t.Errorf("summary = %q", got)
	}
}

// step is one thing go build or the clock does, at an offset from the
// build's start: a line of go build's stderr, a tick, or the end.
type step struct {
	at   time.Duration
	line string // "" with tick or end
	tick bool
	end  bool
}

func TestProgress(t *testing.T) {
	// pkgs are n package lines, one every gap from at.
	pkgs := func(at, gap time.Duration, names ...string) []step {
		var s []step
		for i, n := range names {
			s = append(s, step{at: at + time.Duration(i)*gap, line: n})
		}
		return s
	}
	ticks := func(from, to, gap time.Duration) []step {
		var s []step
		for at := from; at <= to; at += gap {
			s = append(s, step{at: at, tick: true})
		}
		return s
	}
	cat := func(parts ...[]step) []step {
		var s []step
		for _, p := range parts {
			s = append(s, p...)
		}
		return s
	}
	end := func(at time.Duration) []step { return []step{{at: at, end: true}} }
	const s = time.Second

	for _, tc := range []struct {
		name  string
		tty   bool
		width int
		steps []step
		want  string
	}{
		{
			name:  "a warm cache: nothing to compile, nothing shown",
			tty:   true,
			width: 80,
			steps: cat(ticks(s, 3*s, s), end(3*s)),
			want:  "",
		},
		{
			name:  "warm, no terminal",
			steps: cat(ticks(s, 40*s, s), end(40*s)),
			want:  "",
		},
		{
			name:  "a rebuild of a few packages, over before the line is due",
			tty:   true,
			width: 80,
			steps: cat(pkgs(200*time.Millisecond, 100*time.Millisecond, "example.com/m/cli", "example.com/m/cmd/a"), ticks(s, s, s), end(1500*time.Millisecond)),
			want:  "",
		},
		{
			name:  "a terminal: the line is redrawn in place, then replaced by the summary",
			tty:   true,
			width: 80,
			steps: cat(
				pkgs(500*time.Millisecond, 0, "runtime"),
				ticks(s, 2*s, s),
				pkgs(2500*time.Millisecond, 0, "a/b"),
				ticks(3*s, 3*s, s),
				end(3500*time.Millisecond),
			),
			want: "\rcompiling package 1: runtime (2s)" +
				"\rcompiling package 2: a/b (3s)    " +
				"\r" + strings.Repeat(" ", len("compiling package 2: a/b (3s)")) + "\r" +
				"compiled 2 packages in 4s\n",
		},
		{
			name:  "a terminal: an error clears the line and is shown whole",
			tty:   true,
			width: 80,
			steps: cat(
				pkgs(0, 0, "example.com/m/cli"),
				ticks(2*s, 2*s, s),
				[]step{{at: 2100 * time.Millisecond, line: "# example.com/m/cli"}, {at: 2100 * time.Millisecond, line: "cli/x.go:1:1: undefined: y"}},
				end(2200*time.Millisecond),
			),
			want: "\rcompiling package 1: example.com/m/cli (2s)" +
				"\r" + strings.Repeat(" ", len("compiling package 1: example.com/m/cli (2s)")) + "\r" +
				"# example.com/m/cli\n" +
				"cli/x.go:1:1: undefined: y\n" +
				"compiled 1 package in 2s\n",
		},
		{
			name:  "a terminal: package lines redraw at most every 100 ms",
			tty:   true,
			width: 80,
			steps: cat(
				pkgs(0, 0, "p0"),
				ticks(2*s, 2*s, s),
				pkgs(2050*time.Millisecond, 10*time.Millisecond, "p1", "p2", "p3", "p4", "p5", "p6"),
			),
			want: "\rcompiling package 1: p0 (2s)" +
				"\rcompiling package 7: p6 (2s)",
		},
		{
			name: "no terminal: a line every 30 s, then the summary",
			steps: cat(
				pkgs(s, s, "p1", "p2", "p3"),
				ticks(s, 70*s, s),
				pkgs(71*s, 0, "p4"),
				end(75*s),
			),
			want: "compiling package 3: p3 (30s)\n" +
				"compiling package 3: p3 (1m0s)\n" +
				"compiled 4 packages in 1m15s\n",
		},
		{
			name: "no terminal: go's own lines pass through, a short build adds nothing",
			steps: cat(
				[]step{{at: 0, line: "go: downloading example.com/x v1.0.0"}},
				pkgs(s, s, "p1", "p2"),
				ticks(s, 20*s, s),
				[]step{{at: 21 * s, line: "# p2"}, {at: 21 * s, line: "p2/a.go:1:1: bad"}},
				end(21*s),
			),
			want: "go: downloading example.com/x v1.0.0\n# p2\np2/a.go:1:1: bad\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
			p := newProgress(&out, tc.tty, tc.width, start)
			for _, st := range tc.steps {
				now := start.Add(st.at)
				switch {
				case st.end:
					p.finish(now)
				case st.tick:
					p.tick(now)
				default:
					p.line(st.line, now)
				}
			}
			if got := out.String(); got != tc.want {
				t.Fatalf("output\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestRunPassesExitCodeAndErrors: buildprogress leaves with the command's
// exit code, its stdout untouched and its stderr's other lines whole, and
// adds nothing to a quick build.
func TestRunPassesExitCodeAndErrors(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	script := filepath.Join(t.TempDir(), "build.sh")
	body := "echo out\necho example.com/m/cli >&2\necho '# example.com/m/cli' >&2\necho 'cli/x.go:1:1: undefined: y' >&2\nexit 3\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{sh, script}, &stdout, &stderr, false, 0)
	if code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if stdout.String() != "out\n" {
		t.Errorf("stdout %q", stdout.String())
	}
	if want := "# example.com/m/cli\ncli/x.go:1:1: undefined: y\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	stderr.Reset()
	if code := run([]string{filepath.Join(t.TempDir(), "no-such-go")}, &stdout, &stderr, false, 0); code != 2 || !strings.Contains(stderr.String(), "buildprogress: start") {
		t.Errorf("a command that does not start: exit %d, %q", code, stderr.String())
	}
}
