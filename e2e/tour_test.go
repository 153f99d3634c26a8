package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tourBudget is what the tour may take on this two-core machine: "every
// capability in five minutes" (issue [tour]). It takes about a minute and a
// half here.
const tourBudget = 5 * time.Minute

// tourStepLine is a step's first line: "3/8 a plan ✓ (12.1s)".
var tourStepLine = regexp.MustCompile(`^(\d+)/(\d+) (.+?) (✓|✕|– skipped) \(`)

// TestTour runs `subagents demo --tour --stay=false` as a newcomer would,
// with nothing but the scripted model: every capability's line reports
// success, the whole tour stays within its budget, and the commands it
// prints to try each step by hand are well formed. Three of them run
// against the tour's service while it is still up (a delegation, the
// apply of the worktree's change, the schedule's describe showing its
// result waiting for a pi session); the rest are given to the command once
// the service is gone, whose flag parsing then answers SERVICE_UNAVAILABLE
// (exit 3) for a well-formed command and INVALID_INPUT (exit 2) for a bad
// one. The tour's folder is gone when it ends.
func TestTour(t *testing.T) {
	// Beside the other tests: the tour takes about 30 s alone here, a tenth
	// of its budget, which holds with the suite's load around it.
	t.Parallel()
	bin := subagentsBinary(t)
	pi := findPi(t)
	ctx, cancel := context.WithTimeout(context.Background(), tourBudget+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--tour", "--stay=false")
	// The extension of the tree under test, for the nested delegation: the
	// e2e binaries lie in a folder of their own, not beside extension/.
	cmd.Env = append(os.Environ(), "SUBAGENTS_PI="+pi.Path, "SUBAGENTS_EXTENSION_DIR="+parentExtension(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// A tour killed at the deadline leaves its worker process, which holds
	// stderr open: the test ends all the same.
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var env []string
	var project, tourDir string
	var tries []tourTry
	step := 0
	live := map[int]string{} // step → what its live command printed
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, "The tour's folder: "):
			tourDir = strings.TrimPrefix(line, "The tour's folder: ")
		case strings.HasPrefix(line, "  export "):
			env = tourExports(t, strings.TrimPrefix(line, "  export "))
		case strings.HasPrefix(line, "  cd "):
			project = strings.Join(shellWords(t, strings.TrimPrefix(line, "  cd ")), "")
		case tourStepLine.MatchString(line):
			step++
		case strings.HasPrefix(line, "    try it: "):
			try := tourTry{step: step, line: strings.TrimPrefix(line, "    try it: ")}
			tries = append(tries, try)
			// Files a command names are in the tour's folder while it runs.
			for _, f := range regexp.MustCompile(`--(?:input|plan) (\S+)`).FindAllStringSubmatch(try.line, -1) {
				if _, err := os.Stat(filepath.Join(project, f[1])); err != nil {
					t.Errorf("step %d's command names %s, which is not there: %v", step, f[1], err)
				}
			}
			if want, ok := tourLiveChecks[step]; ok && live[step] == "" && strings.Contains(try.line, want.command) {
				live[step] = runTry(t, ctx, try.line, project, env, want.output)
			}
		}
	}
	waitErr := cmd.Wait()
	took := time.Since(began)
	if waitErr != nil {
		t.Fatalf("the tour: %v\n%s\nstderr:\n%s", waitErr, out.String(), stderr.String())
	}
	t.Logf("the tour took %s:\n%s", took.Round(time.Second), out.String())
	if took > tourBudget {
		t.Errorf("the tour took %s, past its budget of %s", took.Round(time.Second), tourBudget)
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Errorf("the tour wrote to stderr:\n%s", s)
	}

	var titles []string
	for _, line := range strings.Split(out.String(), "\n") {
		m := tourStepLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		titles = append(titles, m[3])
		if m[4] != "✓" || m[2] != "8" {
			t.Errorf("step %s/%s %s: %s", m[1], m[2], m[3], m[4])
		}
	}
	want := []string{"a delegation", "a batch", "a plan", "a worktree", "a question", "a nested delegation", "a schedule", "a crash"}
	if strings.Join(titles, ", ") != strings.Join(want, ", ") {
		t.Errorf("the tour's steps: %q, want %q", titles, want)
	}
	perStep := map[int]int{}
	for _, try := range tries {
		perStep[try.step]++
	}
	for i := range want {
		if perStep[i+1] == 0 {
			t.Errorf("step %d (%s) printed no command to try it by hand", i+1, want[i])
		}
	}
	for s, check := range tourLiveChecks {
		if live[s] == "" {
			t.Errorf("step %d printed no %q to run while the tour was up", s, check.command)
		}
	}
	if env == nil || project == "" || tourDir == "" {
		t.Fatalf("the tour named no folder, exports or project:\n%s", out.String())
	}
	if _, err := os.Stat(tourDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the tour's folder %s is still there: %v", tourDir, err)
	}

	// Every subagents command printed, given to the command with the
	// service gone: its flags and arguments parse. Port 1 answers nothing
	// (the tour's port may be another server's by now).
	dir := t.TempDir()
	env = append(env, "TEMPORAL_ADDRESS=127.0.0.1:1")
	for _, try := range tries {
		cmdline, _, _ := strings.Cut(try.line, "   # ")
		for _, part := range strings.Split(cmdline, " && ") {
			words := shellWords(t, part)
			switch words[0] {
			case "git", "pi":
				continue
			case "subagents":
			default:
				t.Errorf("step %d: %q runs %s, neither subagents, pi nor git", try.step, try.line, words[0])
				continue
			}
			c := exec.CommandContext(ctx, bin, words[1:]...)
			c.Dir, c.Env = dir, append(os.Environ(), env...)
			outb, err := c.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 3) {
				t.Errorf("step %d: %s: %v (exit 3, SERVICE_UNAVAILABLE, is a command that parsed)\n%s", try.step, part, err, outb)
			}
		}
	}
}

// tourTry is one command the tour printed, and its step.
type tourTry struct {
	step int
	line string
}

// tourLiveChecks are the commands TestTour runs while the tour is up, by
// step, and what each must print.
var tourLiveChecks = map[int]struct{ command, output string }{
	1: {"subagents run --agent scout", "greet.sh prints the greeting with: echo"},
	4: {"subagents apply", "applied 1 file"},
	7: {"subagents schedule describe", "waiting for a pi session"},
}

// runTry runs a printed command line as a user would, in a shell in the
// tour's project with its variables, and returns what it printed.
func runTry(t *testing.T, ctx context.Context, line, dir string, env []string, want string) string {
	t.Helper()
	cmdline, _, _ := strings.Cut(line, "   # ")
	c := exec.CommandContext(ctx, "sh", "-c", cmdline)
	c.Dir, c.Env = dir, append(os.Environ(), env...)
	b, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(b), want) {
		t.Errorf("%s: %v, want %q in:\n%s", cmdline, err, want, b)
	}
	return cmp.Or(string(b), "(ran)")
}

// tourExports reads the tour's export line into variables; PATH's
// "$PATH" is this process's.
func tourExports(t *testing.T, line string) []string {
	t.Helper()
	var env []string
	for _, w := range shellWords(t, line) {
		env = append(env, strings.ReplaceAll(w, "$PATH", os.Getenv("PATH")))
	}
	return env
}

// shellWords splits a command line as a POSIX shell does for the quoting
// the tour uses: words apart at spaces, '...' kept as it is, "..." with
// \ before " $ ` \ taken, and $PATH left as it is.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unclosed ' in %s", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"$`\\", line[i+1]) >= 0 {
					i++
				}
				w.WriteByte(line[i])
			}
			if i >= len(line) {
				t.Fatalf(`unclosed " in %s`, line)
			}
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
