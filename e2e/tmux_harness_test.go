package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxPi is a real parent pi in its terminal UI, in a real terminal: a tmux
// server of the test's own (its socket in a folder of the test), driven
// with send-keys and read with capture-pane, as a person at the keyboard
// drives and reads it.
type tmuxPi struct {
	t      *testing.T
	socket string
	target string
}

// tmuxConfig keeps the terminal plain and quick: no status line (the pane
// is the whole window), Escape passed on at once (pi tells Escape from a key
// sequence by time), modified keys passed on as pi asks for them, and a
// pane that stays when pi exits, so that a test that failed can still read
// what pi printed last.
const tmuxConfig = `set -g status off
set -s escape-time 0
set -g extended-keys on
set -g remain-on-exit on
set -g history-limit 5000
`

// startTmuxPi starts pi interactively on sessionFile, with the parent's
// environment and this source tree's extension, in a terminal of width x
// height; prompt is pi's first message. The tmux server is killed when the
// test ends.
func (e *env) startTmuxPi(sessionFile string, width, height int, prompt string) *tmuxPi {
	e.t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		e.t.Fatalf("tmux is needed to drive pi's terminal UI (apt-get install tmux): %v", err)
	}
	// A short folder of its own: a Unix socket's path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "pi-tmux-")
	if err != nil {
		e.t.Fatal(err)
	}
	p := &tmuxPi{t: e.t, socket: filepath.Join(dir, "s"), target: "pi"}
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte(tmuxConfig), 0o600); err != nil {
		e.t.Fatal(err)
	}
	args := []string{"-S", p.socket, "-f", conf, "new-session", "-d", "-s", p.target, "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), "-c", e.workDir,
		"--", e.pi.Path, "--session", sessionFile, "-e", parentExtension(e.t), prompt}
	cmd := exec.Command(bin, args...)
	// The server that this starts keeps this environment for pi: the
	// parent's, in an xterm with no desktop (nothing opens a browser).
	cmd.Env = append(append(append(os.Environ(), e.parentEnv()...), e.parentEnvExtra...), "TERM=xterm-256color", "DISPLAY=", "WAYLAND_DISPLAY=")
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("pi's terminal at the end:\n%s", p.screen())
		}
		// Only the server this test started, by its socket; pi goes with it.
		_ = exec.Command(bin, "-S", p.socket, "kill-server").Run()
		_ = os.RemoveAll(dir)
	})
	return p
}

func (p *tmuxPi) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// keys presses keys by tmux's names (Enter, Escape, Down, Up, C-c).
func (p *tmuxPi) keys(keys ...string) {
	p.t.Helper()
	p.tmux(append([]string{"send-keys", "-t", p.target}, keys...)...)
}

// text types s as it is.
func (p *tmuxPi) text(s string) {
	p.t.Helper()
	p.tmux("send-keys", "-t", p.target, "-l", s)
}

// screen is what the terminal shows now, as text.
func (p *tmuxPi) screen() string {
	out, err := exec.Command("tmux", "-S", p.socket, "capture-pane", "-p", "-t", p.target).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(capture-pane: %v: %s)", err, out)
	}
	return string(out)
}

// resize makes the terminal width x height.
func (p *tmuxPi) resize(width, height int) {
	p.t.Helper()
	p.tmux("resize-window", "-t", p.target, "-x", fmt.Sprint(width), "-y", fmt.Sprint(height))
}

// waitScreen waits until the terminal shows what ok accepts, and returns it.
func (p *tmuxPi) waitScreen(what string, ok func(screen string) bool) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for {
		s := p.screen()
		if ok(s) {
			return s
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("the terminal never showed %s; it shows:\n%s", what, s)
		// pi redraws at most every 16 ms and the view's clock beats every
		// second: a capture every 100 ms sees a change within a tenth of a
		// second, and one capture-pane process ten times a second costs
		// the two-core machine little.
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitFor waits until the terminal shows every one of subs.
func (p *tmuxPi) waitFor(subs ...string) string {
	p.t.Helper()
	return p.waitScreen(fmt.Sprintf("%q", subs), func(s string) bool {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	})
}

// lineWith is the first line of screen that holds sub, and its index (-1: none).
func lineWith(screen, sub string) (string, int) {
	for i, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, sub) {
			return l, i
		}
	}
	return "", -1
}
