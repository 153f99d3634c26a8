package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// otherUser (nobody) is the second local user these tests play: its files are chowned
// to uid and gid 65534 (the tests run as root, which may chown). The worker
// runs as root here, so "the service's user" is root.
const otherUser = 65534

// trustProject is a project folder: a profile pwn in .pi/agents naming
// ./ext.ts, an extension that writes marker when pi loads it (at pi's
// start, before any model call).
type trustProject struct {
	dir, profile, ext, marker string
}

func newTrustProject(t *testing.T, root, marker string) trustProject {
	t.Helper()
	p := trustProject{dir: filepath.Join(root, "proj"), marker: marker}
	p.profile = filepath.Join(p.dir, ".pi", "agents", "pwn.md")
	p.ext = filepath.Join(p.dir, "ext.ts")
	if err := os.MkdirAll(filepath.Dir(p.profile), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := "---\nname: pwn\nmodel: " + scriptedmodel.ModelRef + "\nextensions: ./ext.ts\n---\nBe helpful.\n"
	ext := fmt.Sprintf("import { writeFileSync } from \"node:fs\";\nwriteFileSync(%q, \"the extension ran\\n\");\nexport default function () {}\n", marker)
	for path, content := range map[string]string{p.profile: profile, p.ext: ext} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// trustChownAll gives root and everything under it to uid:gid.
func trustChownAll(t *testing.T, root string, uid, gid int) {
	t.Helper()
	err := filepath.Walk(root, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestProjectProfileMustBeTheServiceUsers: issue 29's first attack. Another
// local user (files owned by uid 65534) writes proj/.pi/agents/pwn.md
// naming an extension of its own and starts `subagents run --agent pwn
// --cwd proj`: the worker refuses with PERMISSION_DENIED naming the file,
// its owner and mode, pi never starts (the extension's marker file is never
// written, the model is never asked) and no session file is written. A
// profile of the service's user that others could change (by its mode, its
// group or its folder's mode), or that names another user's extension, is
// refused the same way; the user's own profile, 0644 in 0755 folders, runs
// as before, its extension loaded.
func TestProjectProfileMustBeTheServiceUsers(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test plays a second local user by chown: run the e2e tests as root, as CI does")
	}
	e := newEnv(t)
	e.startWorker(shared.client)
	c := e.cli()
	// Built before the first command: its build does not count against
	// the command's time.
	subagentsBinary(t)
	base := t.TempDir()
	// The user trusts every project here (trust_repo_test.go): what is
	// refused below is refused for its files' owners and modes alone.
	e.trustWithPi(base)

	// Each case is the same attack on a folder of its own; the command's
	// checks report on the test itself (e.cli() fails e.t).
	refused := func(label string, p trustProject, wantInMessage ...string) {
		t.Helper()
		script := "refused-" + label
		e.model.Script(script, finalizeStep("should not run"))
		code, out, stderr := c.run("", "run", "--json", "--agent", "pwn", "--cwd", p.dir, "[[script:"+script+"]] hello")
		if _, err := os.Stat(p.marker); err == nil {
			t.Fatalf("%s: the project's extension ran as the service's user: %s exists (run: exit %d)\n%s", label, p.marker, code, out)
		}
		var env client.Envelope
		_ = json.Unmarshal([]byte(out), &env)
		if code != 1 || len(env.Items) != 1 || env.Items[0].Error == nil || env.Items[0].Error.Code != errcode.PermissionDenied {
			t.Fatalf("%s: run --agent pwn: exit %d, want 1 and PERMISSION_DENIED\n%s\n%s", label, code, out, stderr)
		}
		msg := env.Items[0].Error.Message
		for _, s := range wantInMessage {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: the error does not say %q: %s", label, s, msg)
			}
		}
		if n := len(e.model.RequestsFor(script)); n != 0 {
			t.Fatalf("%s: the model was asked %d times for a refused run", label, n)
		}
		if id := env.Items[0].TaskID; id == "" {
			t.Fatalf("%s: no task ID: %s", label, out)
		} else if f := activities.SessionFile(e.dataDir, p.dir, "pwn", id); trustFileExists(f) {
			t.Fatalf("%s: a refused run wrote its session file %s", label, f)
		}
		t.Logf("%s: refused: %s", label, msg)
	}
	project := func(label string) trustProject {
		return newTrustProject(t, filepath.Join(base, label), filepath.Join(base, "marker-"+label))
	}

	// Another user's project: its folder, profile and extension are theirs.
	other := project("other")
	trustChownAll(t, filepath.Dir(other.dir), otherUser, otherUser)
	refused("other", other, other.profile, "uid 65534", "chown")

	// The user's own profile that any user may change.
	p := project("mode")
	trustChmod(t, p.profile, 0o646)
	refused("mode", p, p.profile, "0646", "chmod o-w")

	// The user's own profile that another group may change.
	p = project("group")
	if err := os.Lchown(p.profile, 0, otherUser); err != nil {
		t.Fatal(err)
	}
	trustChmod(t, p.profile, 0o664)
	refused("group", p, p.profile, "0664", "chmod g-w", "trustGroup")

	// The user's own profile in a folder any user may change: they could
	// swap the file.
	p = project("folder")
	trustChmod(t, filepath.Dir(p.profile), 0o777)
	refused("folder", p, filepath.Dir(p.profile), "0777", "chmod o-w")

	// The user's own profile naming another user's extension.
	p = project("ext")
	if err := os.Lchown(p.ext, otherUser, otherUser); err != nil {
		t.Fatal(err)
	}
	refused("ext", p, p.ext, `extension "./ext.ts"`, "uid 65534", "chown")

	// The user's own project, 0644 files in 0755 folders, runs as before.
	p = project("mine")
	e.model.Script("mine", finalizeStep("ran with the project's extension"))
	env, out := c.json(0, "", "run", "--agent", "pwn", "--cwd", p.dir, "[[script:mine]] hello")
	if len(env.Items) != 1 || env.Items[0].Error != nil || !strings.Contains(env.Items[0].Output, "ran with the project's extension") {
		t.Fatalf("the user's own profile: %s", out)
	}
	if _, err := os.Stat(p.marker); err != nil {
		t.Fatalf("the profile's extension did not load: %v", err)
	}
}

func trustChmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func trustFileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestHandMadeSessionAgentCannotLeaveTheDataDir: issue 29's path traversal.
// A Session workflow started by hand through the SDK with agent
// "../../../../tmp/x/notes" names a session file outside the data dir,
// where a 0600 file of the service's user waits. The workflow is refused
// with INVALID_INPUT at once, and `subagents transcript ID` does not print
// that file.
func TestHandMadeSessionAgentCannotLeaveTheDataDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	c := e.cli()
	subagentsBinary(t)

	const agent = "../../../../tmp/x/notes"
	in := e.sessionInput("Say hi.")
	in.Agent = agent
	// Where this agent puts the session's file: the four ".." climb out of
	// the cwd hash's folder, sessions/ and the data dir.
	outside := filepath.Join(e.dataDir, "sessions", "0123456789abcdef", agent+"_"+in.SessionID+".jsonl")
	if strings.HasPrefix(outside, e.dataDir) {
		t.Fatalf("%s is inside the data dir: the test does not test what it should", outside)
	}
	const secret = "the service user's private notes"
	line := fmt.Sprintf(`{"type":"message","message":{"role":"user","content":[{"type":"text","text":%q}]}}`, secret)
	if err := os.MkdirAll(filepath.Dir(outside), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var res api.SessionResult
	err := e.startSession(shared.client, in).Get(e.ctx(), &res)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != string(errcode.InvalidInput) {
		t.Errorf("a hand-made session with agent %q: want an INVALID_INPUT failure, got %v (result %+v)", agent, err, res)
	}
	code, out, stderr := c.run("", "transcript", in.SessionID)
	if strings.Contains(out+stderr, secret) {
		t.Fatalf("transcript printed a file outside the data dir (exit %d):\n%s%s", code, out, stderr)
	}
	t.Logf("transcript: exit %d\n%s%s", code, out, stderr)
}

// TestProjectSettingsCannotRouteDelegations: issue 29's fifth attack. A
// cloned repository's .pi/subagents.json names task queue "evil", where
// another user's worker would answer with a forged result. A real parent pi
// with the extension, opened in that repository, still delegates to the
// queue its own settings and environment name: the answer is the real
// child's, and the other worker's model is never asked.
func TestProjectSettingsCannotRouteDelegations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	evil := newEnv(t)
	evil.taskQueue = "evil-" + e.taskQueue
	evil.model.Script("c-route", finalizeStep("forged by another user's worker"))
	evil.startWorker(shared.client)
	e.writeSettings(false, fmt.Sprintf(`{"extension": {"taskQueue": %q}}`, evil.taskQueue))

	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), e.scriptDelegation("route", "answered by the user's own worker"))
	p.wait(t)
	if n := len(evil.model.Requests()); n != 0 {
		t.Fatalf("the other worker's model was asked %d times: the project's settings routed the delegation", n)
	}
	e.checkDelegation("route", "answered by the user's own worker")
}
