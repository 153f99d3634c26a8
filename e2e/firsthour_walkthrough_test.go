package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFirstHourWalkthrough runs docs/walkthrough.md as its reader would:
// every command of its sh and console blocks, in order, in one shell
// session started in the clone with an empty HOME and no pi on PATH; the
// output of each console command must be what the doc shows, once IDs,
// times, ports, durations, pids and the test's folders are made alike. So
// the walkthrough and the code cannot drift apart.
func TestFirstHourWalkthrough(t *testing.T) {
	// Not parallel: the page's make build rewrites extension/dist and bin/
	// in the checkout, which the other tests' pi load and run.
	root := checkoutRoot(t)
	doc := filepath.Join(root, "docs", "walkthrough.md")
	cmds := walkthroughCommands(t, doc)
	if len(cmds) < 5 {
		t.Fatalf("%s shows %d commands: the reader's commands are in ```sh and ```console blocks", doc, len(cmds))
	}
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	env := freshShellEnv(t, home)
	if p := lookPathInEnv(env, "pi"); p != "" {
		t.Fatalf("the reader's shell finds pi at %s", p)
	}
	// The doc's ports (the service's, its UI's beside it) become free ones.
	port := freePortWithUI()
	ports := map[string]string{"17233": strconv.Itoa(port), "18233": strconv.Itoa(port + 1000)}
	norm := newWalkthroughNormalizer(tmp, root)
	sh := newWalkthroughShell(t, env, root)
	// A service the extension started itself (had the doc's one not been
	// up yet) is ended too.
	t.Cleanup(func() { localWorld{dataDir: filepath.Join(tmp, "demo-data")}.stopService(t) })

	for _, c := range cmds {
		text := norm.command(t, c.text, ports)
		where := "docs/walkthrough.md:" + strconv.Itoa(c.line) + ": $ " + c.text
		if bg, ok := strings.CutSuffix(strings.TrimSpace(text), "&"); ok {
			out := sh.background(strings.TrimSpace(bg))
			if c.compare {
				want := norm.doc(c.shown)
				var got string
				if want == "" {
					// A background command whose output goes elsewhere:
					// a moment for it to fail, if it does, before comparing.
					time.Sleep(time.Second)
					got = norm.run(out.String())
				} else {
					got = waitForLines(out, norm, strings.Count(want, "\n")+1)
				}
				if got != want {
					t.Errorf("%s\nprinted (normalized):\n%s\nthe doc shows (normalized):\n%s\nprinted:\n%s", where, got, want, out.String())
				}
			}
			continue
		}
		// A command of the page is quick, or starts the service and pi
		// (twice the harness's bound of one wait); make may build the
		// Temporal server.
		timeout := 2 * testTimeout
		if strings.HasPrefix(text, "make ") {
			timeout = firstHourMakeTimeout
		}
		out, err := sh.run(text, timeout)
		if err != nil {
			t.Fatalf("%s\nfailed: %v\n%s", where, err, out)
		}
		// The doc's delegation from pi ends with what the subagent tool
		// returned (the scripted parent quotes it), which names the
		// child's session: a line written in advance could not tell a
		// delegation from a pi without the extension.
		if strings.HasPrefix(text, "pi -p ") && !walkUUIDPattern.MatchString(out) {
			t.Errorf("%s\nprinted no session ID: its answer is not what a delegation returned:\n%s", where, out)
		}
		if !c.compare {
			continue
		}
		got, want := norm.run(out), norm.doc(c.shown)
		if got != want {
			t.Errorf("%s\nprinted (normalized):\n%s\nthe doc shows (normalized):\n%s\nprinted:\n%s", where, got, want, out)
		}
	}
}

// waitForLines waits until a background command printed n lines (or a
// minute passed) and returns its output normalized.
func waitForLines(out *syncBuffer, norm *walkthroughNormalizer, n int) string {
	deadline := time.Now().Add(testTimeout)
	for {
		s := out.String()
		if strings.Count(s, "\n") >= n || time.Now().After(deadline) {
			return norm.run(s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
