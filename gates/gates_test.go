package gates

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
)

func TestRunGate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("here"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", api.GateOutputChars+500) + "END"
	for _, tc := range []struct {
		name     string
		command  string
		timeout  int
		exit     int
		timedOut bool
		output   string
	}{
		{"passes in the step's folder", "cat marker", 10, 0, false, "here"},
		{"fails with its exit code and output", "echo 'FAIL: TestX' >&2; exit 3", 10, 3, false, "FAIL: TestX"},
		{"keeps the end of a long output", "printf '" + long + "'", 10, 0, false, "END"},
		{"is ended past its timeout", "echo started; sleep 30", 1, 0, true, "timed out after 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Activities{}
			res, err := a.RunGate(context.Background(), api.GateInput{Command: tc.command, Cwd: dir, TimeoutSeconds: tc.timeout, Step: "s"})
			if err != nil {
				t.Fatal(err)
			}
			if res.TimedOut != tc.timedOut || (!tc.timedOut && res.ExitCode != tc.exit) {
				t.Fatalf("exit %d timedOut %v, want %d %v (output %q)", res.ExitCode, res.TimedOut, tc.exit, tc.timedOut, res.Output)
			}
			if !strings.Contains(res.Output, tc.output) {
				t.Fatalf("output %q lacks %q", res.Output, tc.output)
			}
			if n := len([]rune(res.Output)); n > api.GateOutputChars+1 {
				t.Fatalf("output is %d characters, over the cap", n)
			}
			if res.Passed() != (tc.exit == 0 && !tc.timedOut) {
				t.Fatalf("Passed() = %v", res.Passed())
			}
		})
	}
}

func TestRunGateMissingFolder(t *testing.T) {
	a := &Activities{}
	_, err := a.RunGate(context.Background(), api.GateInput{Command: "true", Cwd: "/nonexistent/folder", TimeoutSeconds: 5, Step: "s"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/folder") {
		t.Fatalf("err = %v, want one naming the folder", err)
	}
}
