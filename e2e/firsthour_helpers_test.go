package e2e

// Helpers of the first-hour tests: a new user's shell (an empty HOME, no
// pi on PATH, the machine's own node first), make run the way a user runs
// it, and docs/walkthrough.md read as the commands it shows and what they
// print.

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// firstHourMakeTimeout bounds one make run of a test: a cold build of the embedded
// Temporal server (bin/subagents-dev) takes about five minutes on a CI
// machine; a warm one seconds.
const firstHourMakeTimeout = 15 * time.Minute

// checkoutRoot is the repository, above the e2e package.
func checkoutRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// freshShellEnv is the environment of a new user's shell on this machine:
// HOME is home (empty), PATH is this one without the folder of the pi that
// npm ci installed (and without any other pi), so the machine's own node
// comes first, and none of the settings tests or make set for themselves.
// Go's caches stay where they are: a user's Go has them in the real HOME,
// and a cold build of the Temporal server would take minutes.
func freshShellEnv(t *testing.T, home string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "HOME" || name == "PATH" || name == "PWD" || name == "OLDPWD",
			strings.HasPrefix(name, "SUBAGENTS_"), strings.HasPrefix(name, "TEMPORAL_"), strings.HasPrefix(name, "PI_"),
			// make test runs this test: its make must not take the
			// outer make's flags or jobserver.
			name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL" || name == "MAKE_TERMOUT" || name == "MAKE_TERMERR",
			name == "GOCACHE" || name == "GOMODCACHE" || name == "GOPATH":
			continue
		}
		env = append(env, kv)
	}
	var dirs []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || strings.Contains(dir, filepath.Join("node_modules", ".bin")) || isExecutableFile(filepath.Join(dir, "pi")) {
			continue
		}
		dirs = append(dirs, dir)
	}
	env = append(env, "HOME="+home, "PATH="+strings.Join(dirs, string(os.PathListSeparator)))
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		env = append(env, name+"="+strings.TrimSpace(string(out)))
	}
	return env
}

func isExecutableFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// lookPathInEnv finds name on the PATH of env, "" when it is not there.
func lookPathInEnv(env []string, name string) string {
	for _, dir := range filepath.SplitList(envValueOf(env, "PATH")) {
		if p := filepath.Join(dir, name); dir != "" && isExecutableFile(p) {
			return p
		}
	}
	return ""
}

// envValueOf is the last value of name in env.
func envValueOf(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// runMakeIn runs make with args in the repository and returns its output
// (stdout and stderr as a terminal shows them) and error.
func runMakeIn(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), firstHourMakeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = checkoutRoot(t)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, ended whole if the test's time runs out.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	return out.String(), err
}

// walkthroughCommand is one command docs/walkthrough.md shows.
type walkthroughCommand struct {
	line  int    // in the doc, for messages
	text  string // what the reader types
	shown string // what the doc shows it printing (a console block's lines after it)
	// compare: a console block's command, whose output the doc shows
	// (nothing shown means it prints nothing); an sh block's command is run
	// but what it prints is not shown.
	compare bool
}

// walkthroughCommands reads the fenced blocks of a markdown file: in a ```console
// block a line "$ cmd" is a command and the lines up to the next one are
// what it prints; in a ```sh block every line that is not blank or a
// comment is a command. Blocks of any other kind are illustrations.
func walkthroughCommands(t *testing.T, path string) []walkthroughCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out   []walkthroughCommand
		kind  string // "" outside a fence
		fence string
		cur   *walkthroughCommand
		shown []string
	)
	flush := func() {
		if cur != nil {
			cur.shown = strings.Join(shown, "\n")
			out = append(out, *cur)
		}
		cur, shown = nil, nil
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if kind == "" {
			if strings.HasPrefix(trimmed, "```") {
				fence = "```"
				kind = strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
				if kind == "" {
					kind = "text"
				}
			}
			continue
		}
		if trimmed == fence {
			flush()
			kind = ""
			continue
		}
		switch kind {
		case "console":
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				flush()
				cur = &walkthroughCommand{line: n, text: cmd, compare: true}
			} else if cur != nil {
				shown = append(shown, line)
			}
		case "sh":
			if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
				out = append(out, walkthroughCommand{line: n, text: trimmed})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	walkUUIDPattern     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	walkTimePattern     = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?Z?`)
	walkPortPattern     = regexp.MustCompile(`(127\.0\.0\.1|localhost):\d+`)
	walkDurationPattern = regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ms|s)\b`)
	walkPidPattern      = regexp.MustCompile(`\bpid \d+`)
	walkSpacePattern    = regexp.MustCompile(`[ \t]+`)
)

// walkthroughNormalizer makes a command's output and the doc's shown output
// comparable: IDs, times, ports, durations and pids vary from run to run,
// and so do the folders the test stands in for the doc's (/tmp/demo-*, the
// clone at /home/you/subagents). Column widths follow the values, so runs
// of spaces count as one.
type walkthroughNormalizer struct {
	tmp, repo string
	// IDs in order of first appearance, on each side: the doc's n-th ID is
	// the run's n-th, which is how a later command's ID is translated.
	docIDs, runIDs map[string]int
	runByIndex     []string
}

// walkthroughRepo is where the doc's reader cloned the repository.
const walkthroughRepo = "/home/you/subagents"

func newWalkthroughNormalizer(tmp, repo string) *walkthroughNormalizer {
	return &walkthroughNormalizer{tmp: tmp, repo: repo, docIDs: map[string]int{}, runIDs: map[string]int{}}
}

// doc normalizes what the doc shows.
func (n *walkthroughNormalizer) doc(s string) string {
	s = walkUUIDPattern.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := n.docIDs[id]; !ok {
			n.docIDs[id] = len(n.docIDs) + 1
		}
		return "ID" + strconv.Itoa(n.docIDs[id])
	})
	return n.common(s)
}

// run normalizes what a command printed.
func (n *walkthroughNormalizer) run(s string) string {
	s = strings.ReplaceAll(s, n.tmp, "/tmp")
	s = strings.ReplaceAll(s, n.repo, walkthroughRepo)
	s = walkUUIDPattern.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := n.runIDs[id]; !ok {
			n.runIDs[id] = len(n.runIDs) + 1
			n.runByIndex = append(n.runByIndex, id)
		}
		return "ID" + strconv.Itoa(n.runIDs[id])
	})
	return n.common(s)
}

func (n *walkthroughNormalizer) common(s string) string {
	s = walkTimePattern.ReplaceAllString(s, "TIME")
	s = walkPortPattern.ReplaceAllString(s, "$1:PORT")
	s = walkDurationPattern.ReplaceAllString(s, "DURATION")
	s = walkPidPattern.ReplaceAllString(s, "pid PID")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(walkSpacePattern.ReplaceAllString(l, " "), " ")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

// command turns a command of the doc into the one the test runs: the
// doc's /tmp/demo-* folders into the test's, its ports into free ones, and
// an ID it shows into the one this run printed in its place.
func (n *walkthroughNormalizer) command(t *testing.T, text string, ports map[string]string) string {
	t.Helper()
	text = strings.ReplaceAll(text, "/tmp/demo-", n.tmp+"/demo-")
	for from, to := range ports {
		text = strings.ReplaceAll(text, from, to)
	}
	return walkUUIDPattern.ReplaceAllStringFunc(text, func(id string) string {
		i, ok := n.docIDs[id]
		if !ok || i > len(n.runByIndex) {
			t.Fatalf("the command %q names ID %s, which no output before it showed", text, id)
		}
		return n.runByIndex[i-1]
	})
}

// walkthroughShell runs a doc's commands one by one as one shell session would:
// each in bash, in the folder and with the environment the previous one
// left (cd and export carry over); a command ending in & runs in the
// background until the test ends.
type walkthroughShell struct {
	t     *testing.T
	env   []string
	dir   string
	state string // folder for what each command leaves behind
}

func newWalkthroughShell(t *testing.T, env []string, dir string) *walkthroughShell {
	return &walkthroughShell{t: t, env: env, dir: dir, state: t.TempDir()}
}

// run runs text to its end and returns what it printed and its error.
func (s *walkthroughShell) run(text string, timeout time.Duration) (string, error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pwd, env := filepath.Join(s.state, "pwd"), filepath.Join(s.state, "env")
	script := text + "\n__rc=$?; pwd >" + shellSingleQuote(pwd) + "; env -0 >" + shellSingleQuote(env) + "; exit $__rc\n"
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir, cmd.Env = s.dir, s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if b, rerr := os.ReadFile(pwd); rerr == nil {
		s.dir = strings.TrimSpace(string(b))
	}
	if b, rerr := os.ReadFile(env); rerr == nil {
		s.env = nil
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv != "" && !strings.HasPrefix(kv, "_=") && !strings.HasPrefix(kv, "__rc=") {
				s.env = append(s.env, kv)
			}
		}
	}
	_ = os.Remove(pwd)
	_ = os.Remove(env)
	return out.String(), err
}

// background starts text (without its trailing &) and ends it, with its
// process group, when the test ends; then it waits for the tree of a
// worker it started (subagents dev) to be gone.
func (s *walkthroughShell) background(text string) *syncBuffer {
	s.t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", "exec "+text)
	cmd.Dir, cmd.Env = s.dir, s.env
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.t.Cleanup(func() {
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(testTimeout):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-done
			s.t.Errorf("%q did not stop after SIGTERM", text)
		}
		waitTreeGone(s.t, pid)
	})
	return out
}

func shellSingleQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
