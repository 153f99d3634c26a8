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

// events is a `go test -json` stream, one JSON object a line.
func events(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestProgress(t *testing.T) {
	const m = "example.com/mod"
	for _, tc := range []struct {
		name     string
		in       string
		exit     int      // go test's exit code
		wantExit int      // testprogress's
		want     []string // lines (or parts of them) in this order
		not      []string // never shown
	}{
		{
			name: "passes show one line each, their output stays out",
			in: events(
				`{"Action":"start","Package":"example.com/mod/a"}`,
				`{"Action":"run","Package":"example.com/mod/a","Test":"TestOne"}`,
				`{"Action":"output","Package":"example.com/mod/a","Test":"TestOne","Output":"=== RUN   TestOne\n"}`,
				`{"Action":"output","Package":"example.com/mod/a","Test":"TestOne","Output":"    a_test.go:9: chatter\n"}`,
				`{"Action":"run","Package":"example.com/mod/a","Test":"TestOne/sub"}`,
				`{"Action":"pass","Package":"example.com/mod/a","Test":"TestOne/sub","Elapsed":0.1}`,
				`{"Action":"pass","Package":"example.com/mod/a","Test":"TestOne","Elapsed":1.25}`,
				`{"Action":"output","Package":"example.com/mod/a","Output":"ok  \texample.com/mod/a\t1.3s\n"}`,
				`{"Action":"pass","Package":"example.com/mod/a","Elapsed":1.3}`,
				`{"Action":"start","Package":"example.com/mod"}`,
				`{"Action":"skip","Package":"example.com/mod","Elapsed":0}`,
			),
			want: []string{"ok   a TestOne (1.25s)", "ok   a (1.3s)"},
			not:  []string{"chatter", "TestOne/sub", "no test files"},
		},
		{
			name: "a failing subtest shows its parent's whole output",
			in: events(
				`{"Action":"run","Package":"example.com/mod/b","Test":"TestTwo"}`,
				`{"Action":"output","Package":"example.com/mod/b","Test":"TestTwo","Output":"=== RUN   TestTwo\n"}`,
				`{"Action":"run","Package":"example.com/mod/b","Test":"TestTwo/x"}`,
				`{"Action":"output","Package":"example.com/mod/b","Test":"TestTwo/x","Output":"    b_test.go:12: got 1, want 2\n"}`,
				`{"Action":"output","Package":"example.com/mod/b","Test":"TestTwo/x","Output":"--- FAIL: TestTwo/x (0.00s)\n"}`,
				`{"Action":"fail","Package":"example.com/mod/b","Test":"TestTwo/x","Elapsed":0}`,
				`{"Action":"output","Package":"example.com/mod/b","Test":"TestTwo","Output":"--- FAIL: TestTwo (0.01s)\n"}`,
				`{"Action":"fail","Package":"example.com/mod/b","Test":"TestTwo","Elapsed":0.01}`,
				`{"Action":"output","Package":"example.com/mod/b","Output":"FAIL\n"}`,
				`{"Action":"fail","Package":"example.com/mod/b","Elapsed":0.02}`,
			),
			exit: 1, wantExit: 1,
			want: []string{"FAIL b TestTwo (0.01s)", "=== RUN   TestTwo", "b_test.go:12: got 1, want 2", "--- FAIL: TestTwo/x", "--- FAIL: TestTwo (0.01s)", "FAIL b (0.0s)", "Where they failed", "b TestTwo: b_test.go:12: got 1, want 2", "FAIL: 1 failed: b TestTwo"},
		},
		{
			name: "a failure go test did not report as an exit code still fails",
			in: events(
				`{"Action":"run","Package":"example.com/mod/b","Test":"TestTwo"}`,
				`{"Action":"fail","Package":"example.com/mod/b","Test":"TestTwo","Elapsed":0.01}`,
			),
			wantExit: 1,
			want:     []string{"FAIL b TestTwo", "FAIL: 1 failed: b TestTwo"},
		},
		{
			name: "a crash mid-test shows the test's and the package's output",
			in: events(
				`{"Action":"run","Package":"example.com/mod/c","Test":"TestHang"}`,
				`{"Action":"output","Package":"example.com/mod/c","Test":"TestHang","Output":"=== RUN   TestHang\n"}`,
				`{"Action":"output","Package":"example.com/mod/c","Test":"TestHang","Output":"    c_test.go:5: waiting\n"}`,
				`{"Action":"output","Package":"example.com/mod/c","Output":"panic: test timed out after 1s\n"}`,
				`{"Action":"output","Package":"example.com/mod/c","Output":"FAIL\texample.com/mod/c\t1.0s\n"}`,
				`{"Action":"fail","Package":"example.com/mod/c","Elapsed":1}`,
			),
			exit: 1, wantExit: 1,
			want: []string{"FAIL c (1.0s)", "--- TestHang did not finish; its output:", "c_test.go:5: waiting", "panic: test timed out after 1s", "FAIL: 1 failed: c (package)"},
		},
		{
			name: "build errors are shown as the compiler wrote them",
			in: events(
				`{"ImportPath":"example.com/mod/d [example.com/mod/d.test]","Action":"build-output","Output":"# example.com/mod/d [example.com/mod/d.test]\n"}`,
				`{"ImportPath":"example.com/mod/d [example.com/mod/d.test]","Action":"build-output","Output":"d/d_test.go:3:1: syntax error\n"}`,
				`{"ImportPath":"example.com/mod/d [example.com/mod/d.test]","Action":"build-fail"}`,
				`{"Action":"start","Package":"example.com/mod/d"}`,
				`{"Action":"output","Package":"example.com/mod/d","Output":"FAIL\texample.com/mod/d [build failed]\n"}`,
				`{"Action":"fail","Package":"example.com/mod/d","Elapsed":0,"FailedBuild":"example.com/mod/d [example.com/mod/d.test]"}`,
			),
			exit: 1, wantExit: 1,
			want: []string{"# example.com/mod/d", "d/d_test.go:3:1: syntax error", "[build failed]", "FAIL: 1 failed: d [example.com/mod/d.test] (build)"},
		},
		{
			name:     "go test failing before any test keeps its code",
			in:       "go: no such package\n",
			exit:     2,
			wantExit: 2,
			want:     []string{"go: no such package", "FAIL: go test exited 2"},
		},
		{
			name: "a skipped test says so with its reason",
			in: events(
				`{"Action":"run","Package":"example.com/mod/e","Test":"TestSkip"}`,
				`{"Action":"output","Package":"example.com/mod/e","Test":"TestSkip","Output":"    e_test.go:4: needs chromium\n"}`,
				`{"Action":"skip","Package":"example.com/mod/e","Test":"TestSkip","Elapsed":0}`,
			),
			want: []string{"skip e TestSkip", "needs chromium"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := newProgress(&out, m)
			p.read(strings.NewReader(tc.in))
			if got := p.finish(tc.exit); got != tc.wantExit {
				t.Errorf("exit %d, want %d", got, tc.wantExit)
			}
			s := out.String()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(s[at:], w)
				if i < 0 {
					t.Fatalf("no %q after offset %d in:\n%s", w, at, s)
				}
				at += i + len(w)
			}
			for _, n := range tc.not {
				if strings.Contains(s, n) {
					t.Fatalf("%q shown:\n%s", n, s)
				}
			}
		})
	}
}

func TestStillRunning(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, "m")
	start := time.Now()
	p.read(strings.NewReader(events(`{"Action":"run","Package":"m/e2e","Test":"TestLong","Time":"` + start.Format(time.RFC3339Nano) + `"}`)))
	p.stillRunning(start.Add(30*time.Second), time.Minute)
	if out.Len() != 0 {
		t.Fatalf("a line before a quiet minute: %q", out.String())
	}
	p.stillRunning(p.lastWrite.Add(90*time.Second), time.Minute)
	if got := out.String(); !strings.Contains(got, "running: e2e TestLong (") {
		t.Fatalf("got %q", got)
	}
}

// TestRunRealGoTest runs the formatter on a real `go test -json` of a
// module with a passing, a failing and a crashing package: the exit code
// is go test's, each pass is one line, each failure is shown in full.
func TestRunRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with go test")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module example.com/tp\n\ngo 1.22\n",
		"ok/ok_test.go":     "package ok\nimport \"testing\"\nfunc TestFine(t *testing.T) { t.Log(\"quiet\") }\n",
		"bad/bad_test.go":   "package bad\nimport \"testing\"\nfunc TestBroken(t *testing.T) { t.Run(\"inner\", func(t *testing.T) { t.Fatal(\"the reason it broke\") }) }\nfunc TestAlsoFine(t *testing.T) {}\n",
		"boom/boom_test.go": "package boom\nimport \"testing\"\nfunc TestPanics(t *testing.T) { panic(\"kaboom\") }\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	// The formatter names packages relative to the go.mod where it runs.
	t.Chdir(dir)
	var out, errOut bytes.Buffer
	code := run([]string{goBin, "test", "-json", "-count=1", "./..."}, &out, &errOut)
	s := out.String()
	if code == 0 {
		t.Fatalf("exit 0 with failing tests:\n%s", s)
	}
	for _, want := range []string{
		"ok   ok TestFine (", "ok   ok (", "ok   bad TestAlsoFine (",
		"FAIL bad TestBroken (", "the reason it broke", "--- FAIL: TestBroken/inner",
		"FAIL boom", "kaboom",
		"FAIL: 2 failed: ",
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s\nstderr:\n%s", want, s, errOut.String())
		}
	}
	t.Logf("the formatter's output:\n%s", s)
	if strings.Contains(s, "quiet") {
		t.Fatalf("a passing test's log was shown:\n%s", s)
	}
}
