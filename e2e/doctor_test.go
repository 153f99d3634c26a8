package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/doctor"
)

// The doctor (docs/doctor.md) against real things: a `subagents dev` in the
// test's data dir, real pi, real git. Each check is broken on purpose once,
// and the doctor must find it, with its fix; a healthy set-up passes.

// doctorService is a `subagents dev` the doctor tests check.
type doctorService struct {
	dev     *devProcess
	address string
	uiPort  int
}

// startDoctorService starts the local service for e's data dir and task
// queue, its UI on a --ui-port of its own, not its port + 1000: the doctor
// checks the UI where the service says it is (issue 42), and nothing
// answers where it would guess.
func (e *env) startDoctorService() doctorService {
	e.t.Helper()
	port := freePortWithUI()
	uiPort := freePort()
	for uiPort == port || uiPort == port+1000 {
		uiPort = freePort()
	}
	dev := e.startDev("--ephemeral", "--port", strconv.Itoa(port), "--ui-port", strconv.Itoa(uiPort), "--data-dir", e.dataDir, "--task-queue", e.taskQueue)
	dev.waitReady(e.t)
	return doctorService{dev: dev, address: fmt.Sprintf("127.0.0.1:%d", port), uiPort: uiPort}
}

// doctorEnv is the environment of a doctor run for e against address: pi
// from the lockfile, the scripted model's config dir, the test's data dir
// and queue, a HOME of its own, and nothing of the machine's settings that
// would send it elsewhere.
func (e *env) doctorEnv(address string) []string {
	return append(e.cliEnv(),
		"HOME="+e.home(),
		"TEMPORAL_ADDRESS="+address, "TEMPORAL_NAMESPACE=", "SUBAGENTS_TASK_QUEUE="+e.taskQueue,
		"SUBAGENTS_HOST=", "SUBAGENTS_UI_URL=", "ANTHROPIC_API_KEY=", "ANTHROPIC_OAUTH_TOKEN=")
}

// home is an empty HOME of the test's own: no temporal.toml or pi config
// of the machine's is read.
func (e *env) home() string {
	e.t.Helper()
	h := filepath.Join(filepath.Dir(e.dataDir), "home")
	if err := os.MkdirAll(h, 0o700); err != nil {
		e.t.Fatal(err)
	}
	return h
}

// runDoctor runs `subagents doctor --json` with env (later values win) and
// args, and reads its document.
func runDoctor(t *testing.T, env []string, args ...string) (int, doctor.Report) {
	t.Helper()
	code, stdout, stderr := runSubagents(t, env, append([]string{"doctor", "--json"}, args...)...)
	var r doctor.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("doctor printed no document (exit %d): %v\n%s\n%s", code, err, stdout, stderr)
	}
	if r.ExitCode != code {
		t.Fatalf("the document says exit %d, the command exited %d", r.ExitCode, code)
	}
	if code != 0 && !strings.Contains(stderr, "subagents: doctor: ") {
		t.Fatalf("exit %d without a line on stderr: %q", code, stderr)
	}
	return code, r
}

// check is the result of the named check in r.
func check(t *testing.T, r doctor.Report, name string) doctor.Result {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", name, r.Checks)
	return doctor.Result{}
}

// expectFinding checks that r's check name came out status, its verdict
// holding verdict and its fix holding fix, and that the command exited
// code.
func expectFinding(t *testing.T, code int, r doctor.Report, name string, status doctor.Status, verdict, fix string, wantCode int) {
	t.Helper()
	c := check(t, r, name)
	if c.Status != status || !strings.Contains(c.Verdict, verdict) || !strings.Contains(c.Fix, fix) || code != wantCode {
		t.Fatalf("%s: %s %q (fix %q), exit %d; want %s with %q (fix %q), exit %d", name, c.Status, c.Verdict, c.Fix, code, status, verdict, fix, wantCode)
	}
}

// TestDoctorHealthy: a running local service, pi from the lockfile, a
// model with its key, a clean folder: every check passes and the doctor
// exits 0, in text too.
func TestDoctorHealthy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.startDoctorService()
	env := e.doctorEnv(s.address)
	code, r := runDoctor(t, env, "--cwd", e.workDir)
	for _, c := range r.Checks {
		if c.Status != doctor.OK {
			t.Errorf("%s: %s %q (fix %q)", c.Name, c.Status, c.Verdict, c.Fix)
		}
	}
	if code != 0 || len(r.Checks) != len(doctor.Checks) || r.Status != doctor.OK {
		t.Fatalf("exit %d, %d checks, status %s", code, len(r.Checks), r.Status)
	}
	if v := check(t, r, doctor.CheckPi).Verdict; !strings.Contains(v, "pi "+doctor.PinnedPi) {
		t.Fatalf("pi: %q", v)
	}
	if v := check(t, r, doctor.CheckUI).Verdict; !strings.Contains(v, fmt.Sprintf("the Temporal UI answers at http://127.0.0.1:%d", s.uiPort)) {
		t.Fatalf("ui: %q", v)
	}
	if r.Context.UIURL != fmt.Sprintf("http://127.0.0.1:%d", s.uiPort) {
		t.Fatalf("the report's context names the UI %q", r.Context.UIURL)
	}
	// This machine's host queue is polled too: SUBAGENTS_HOST=auto.
	code, r = runDoctor(t, append(env, "SUBAGENTS_HOST=auto"), "--cwd", e.workDir)
	if c := check(t, r, doctor.CheckWorkers); code != 0 || c.Status != doctor.OK || !strings.Contains(c.Verdict, e.taskQueue+"@") {
		t.Fatalf("workers with the host's queue: exit %d %+v", code, c)
	}
	code, out, _ := runSubagents(t, env, "doctor", "--cwd", e.workDir)
	if code != 0 || !strings.Contains(out, "0 failed, 0 warnings, 17 ok, 0 skipped") || !strings.Contains(out, "ok    service") {
		t.Fatalf("text report (exit %d):\n%s", code, out)
	}
}

// TestDoctorServiceDown: nothing runs for the data dir, whose lock still
// names the pid of a service that was killed. The doctor says the service
// is down with how to start it, skips what needs it, reports the stale
// lock, exits 3 (unavailable), and starts nothing.
func TestDoctorServiceDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.MkdirAll(e.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(e.dataDir, "dev.lock")
	if err := os.WriteFile(lock, []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	address := fmt.Sprintf("127.0.0.1:%d", freePortWithUI())
	code, r := runDoctor(t, e.doctorEnv(address), "--cwd", e.workDir)
	expectFinding(t, code, r, doctor.CheckService, doctor.Fail, "no subagents service runs for data dir "+e.dataDir+", and nothing answers at "+address,
		"`subagents dev`", 3)
	for _, name := range []string{doctor.CheckSocket, doctor.CheckAPIKey, doctor.CheckNamespace, doctor.CheckSearchAttributes, doctor.CheckWorkers, doctor.CheckUI, doctor.CheckUnacknowledged} {
		if c := check(t, r, name); c.Status != doctor.Skip || !strings.Contains(c.Verdict, "service") {
			t.Errorf("%s: %s %q, want a skip that names the service", name, c.Status, c.Verdict)
		}
	}
	expectFinding(t, code, r, doctor.CheckStaleLocks, doctor.Warn, fmt.Sprintf("%s names pid %d, which is gone", lock, gone.Process.Pid), "remove "+lock, 3)
	w := localWorld{dataDir: e.dataDir}
	if procs := w.devProcesses(); len(procs) != 0 {
		t.Fatalf("the doctor started a service: %v", procs)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "subagents.sock")); !os.IsNotExist(err) {
		t.Fatalf("a socket appeared: %v", err)
	}
}

// TestDoctorFindsEachBrokenThing: one running service; in each subtest one
// thing is broken on purpose (and mended after), and the doctor finds it,
// with its fix.
func TestDoctorFindsEachBrokenThing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.startDoctorService()
	env := e.doctorEnv(s.address)
	// folder is a folder of its own for a subtest, with files in it.
	folder := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		for rel, content := range files {
			p := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}

	t.Run("pi", func(t *testing.T) {
		// The pi named by --pi is judged, and without a pi no Node is.
		code, r := runDoctor(t, env, "--cwd", e.workDir, "--pi", "/nonexistent/pi")
		expectFinding(t, code, r, doctor.CheckPi, doctor.Fail, "/nonexistent/pi does not exist", "npm ci", 2)
		if c := check(t, r, doctor.CheckNode); c.Status != doctor.Skip || !strings.Contains(c.Verdict, "needs pi (see pi)") {
			t.Fatalf("node with no pi: %+v", c)
		}
		// Without --pi, the pi of the running service is judged, read from
		// its process: a SUBAGENTS_PI of the doctor's own is not what the
		// service's children run on.
		code, r = runDoctor(t, append(env, "SUBAGENTS_PI=/nonexistent/pi"), "--cwd", e.workDir)
		c := check(t, r, doctor.CheckPi)
		if code != 0 || c.Status != doctor.OK || c.Details["path"] != e.pi.Path ||
			!strings.Contains(c.Verdict, fmt.Sprintf("the running service's (pid %d; found by $SUBAGENTS_PI)", s.dev.cmd.Process.Pid)) {
			t.Fatalf("the service's pi: exit %d %+v", code, c)
		}
	})

	t.Run("node", func(t *testing.T) {
		// pi beside a Node older than pi needs, as on a machine whose own
		// Node is too old: pi does not run on it, and the doctor says why.
		old := oldNode(t)
		dir := t.TempDir()
		real, err := filepath.EvalSymlinks(e.pi.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(dir, "pi")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(old.path, filepath.Join(dir, "node")); err != nil {
			t.Fatal(err)
		}
		code, r := runDoctor(t, env, "--cwd", e.workDir, "--pi", filepath.Join(dir, "pi"))
		expectFinding(t, code, r, doctor.CheckNode, doctor.Fail, "Node "+old.version+" at "+filepath.Join(dir, "node")+" is older than "+doctor.MinNode, "npm ci", 2)
		if c := check(t, r, doctor.CheckPi); old.real && (c.Status != doctor.Fail || !strings.Contains(c.Verdict, "pi at "+filepath.Join(dir, "pi")+" (--pi) does not run")) {
			t.Fatalf("pi on %s: %+v", old.version, c)
		}
	})

	t.Run("socket", func(t *testing.T) {
		sock := filepath.Join(e.dataDir, "subagents.sock")
		if err := os.Rename(sock, sock+".away"); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Rename(sock+".away", sock) }()
		code, r := runDoctor(t, env, "--cwd", e.workDir)
		expectFinding(t, code, r, doctor.CheckSocket, doctor.Fail, "nothing answers on its socket "+sock, "subagents stop", 3)
	})

	t.Run("api_key", func(t *testing.T) {
		key := connection.KeyPath(e.dataDir)
		if err := os.Chmod(key, 0o644); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Chmod(key, 0o600) }()
		code, r := runDoctor(t, env, "--cwd", e.workDir)
		expectFinding(t, code, r, doctor.CheckAPIKey, doctor.Fail, "may be read or written by other users (mode 0644)", "chmod 600 "+key, 2)
		if c := check(t, r, doctor.CheckNamespace); c.Status != doctor.Skip {
			t.Fatalf("namespace: %+v, want a skip for want of the key", c)
		}
	})

	t.Run("namespace", func(t *testing.T) {
		code, r := runDoctor(t, env, "--cwd", e.workDir, "--namespace", "nosuch")
		expectFinding(t, code, r, doctor.CheckNamespace, doctor.Fail, `namespace "nosuch" does not exist on `+s.address, "subagents setup --namespace nosuch", 2)
	})

	t.Run("search_attributes", func(t *testing.T) {
		// A namespace made by hand, without the attributes subagents setup adds.
		c := dialWithKeyOf(t, s.address, e.dataDir)
		defer c.Close()
		_, err := c.WorkflowService().RegisterNamespace(e.ctx(), &workflowservice.RegisterNamespaceRequest{
			Namespace: "bare", WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		// A new namespace reaches the frontend's cache within seconds.
		extWaitFor(t, "namespace bare", func() bool {
			_, err := c.WorkflowService().DescribeNamespace(e.ctx(), &workflowservice.DescribeNamespaceRequest{Namespace: "bare"})
			return err == nil
		})
		code, r := runDoctor(t, env, "--cwd", e.workDir, "--namespace", "bare")
		expectFinding(t, code, r, doctor.CheckSearchAttributes, doctor.Fail,
			"namespace bare lacks the search attributes SubagentAgent, SubagentCwd, SubagentDelegation, SubagentParentSession, SubagentSendUntil, SubagentStatus",
			"subagents setup --namespace bare", 2)
	})

	t.Run("workers", func(t *testing.T) {
		code, r := runDoctor(t, append(env, "SUBAGENTS_HOST=elsewhere"), "--cwd", e.workDir)
		expectFinding(t, code, r, doctor.CheckWorkers, doctor.Fail, "no worker polls "+e.taskQueue+"@elsewhere (activity tasks)",
			"subagents worker --host elsewhere", 2)
	})

	t.Run("profiles", func(t *testing.T) {
		// A misspelt field, named with the one it likely is (issue 42).
		dir := folder(t, map[string]string{".pi/agents/broken.md": "---\nname: broken\ndescription: a typo\ntols: read\n---\nbody\n"})
		code, r := runDoctor(t, env, "--cwd", dir)
		expectFinding(t, code, r, doctor.CheckProfiles, doctor.Fail, filepath.Join(dir, ".pi", "agents", "broken.md")+`:4: frontmatter: unknown field "tols": did you mean "tools"?`,
			"edit the file at that line", 2)
	})

	t.Run("plans", func(t *testing.T) {
		dir := folder(t, map[string]string{".pi/plans/review.yaml": "steps:\n  - key: look\n    agent: scout\n    task: look\n    retires: 2\n"})
		code, r := runDoctor(t, env, "--cwd", dir)
		expectFinding(t, code, r, doctor.CheckPlans, doctor.Fail, filepath.Join(dir, ".pi", "plans", "review.yaml")+`:5: unknown field "retires"`,
			"docs/plans.md", 2)
	})

	t.Run("plan_agent", func(t *testing.T) {
		// A plan that reads and validates, whose step names a profile that
		// is not there: a run refuses it with UNKNOWN_AGENT.
		dir := folder(t, map[string]string{".pi/plans/review.yaml": "steps:\n  - key: look\n    agent: scout\n    task: look\n" +
			"  - key: judge\n    task: judge\n    agent: nosuchagent\n"})
		code, r := runDoctor(t, env, "--cwd", dir)
		expectFinding(t, code, r, doctor.CheckPlans, doctor.Fail,
			filepath.Join(dir, ".pi", "plans", "review.yaml")+`:7: step "judge": Unknown profile: "nosuchagent". Available profiles: `, "subagents profiles", 2)
		if c := check(t, r, doctor.CheckPlans); !strings.Contains(c.Verdict, "(UNKNOWN_AGENT: a run refuses the plan)") {
			t.Fatalf("plans: %+v", c)
		}
	})

	t.Run("settings", func(t *testing.T) {
		dir := folder(t, map[string]string{".pi/subagents.json": "{\n  \"subagents\": {\n    \"taskMaxConcurrency\": 3,\n  }\n}\n"})
		code, r := runDoctor(t, env, "--cwd", dir)
		expectFinding(t, code, r, doctor.CheckSettings, doctor.Fail, filepath.Join(dir, ".pi", "subagents.json")+":4: invalid character '}'",
			"correct the value at that line", 2)
		// A misspelt key beside a mistake: both are said.
		dir = folder(t, map[string]string{".pi/subagents.json": "{\n  \"extension\": {\"maxLinesPerWindow\": 0,\n    \"taskQueu\": \"q\"}\n}\n"})
		code, r = runDoctor(t, env, "--cwd", dir)
		file := filepath.Join(dir, ".pi", "subagents.json")
		expectFinding(t, code, r, doctor.CheckSettings, doctor.Fail,
			file+":2: extension.maxLinesPerWindow: must be a whole number, 1 to 1000, not 0; and ignored: "+file+`:3: unknown setting "extension.taskQueu": did you mean "extension.taskQueue"? The extension ignores it`,
			"keys the extension ignores", 2)
		// A misspelt key of the service's object, which it refuses: by
		// name, on its line, with the key it likely is (issue 42).
		dir = folder(t, map[string]string{".pi/subagents.json": "{\n  \"subagents\": {\n    \"taskMaxEvnts\": 5\n  }\n}\n"})
		code, r = runDoctor(t, env, "--cwd", dir)
		expectFinding(t, code, r, doctor.CheckSettings, doctor.Fail,
			filepath.Join(dir, ".pi", "subagents.json")+`:3: unknown setting "taskMaxEvnts": did you mean "taskMaxEvents"?`, "correct the value at that line", 2)
	})

	t.Run("model_keys", func(t *testing.T) {
		// Read-only tools: a profile an untrusted folder may have
		// (docs/profiles.md).
		dir := folder(t, map[string]string{".pi/agents/claude.md": "---\nname: claude\nmodel: anthropic/claude-sonnet-4-5\ntools: read\n---\nbody\n"})
		code, r := runDoctor(t, env, "--cwd", dir)
		expectFinding(t, code, r, doctor.CheckModelKeys, doctor.Fail, "no key for anthropic: $ANTHROPIC_API_KEY is not set and auth.json holds none (for profile claude)",
			"set ANTHROPIC_API_KEY where the service runs, or run /login in pi and choose anthropic", 2)
		// With the key set, the same folder passes, and the key is not printed.
		code, r = runDoctor(t, append(env, "ANTHROPIC_API_KEY=sk-ant-doctor-test"), "--cwd", dir)
		if c := check(t, r, doctor.CheckModelKeys); code != 0 || c.Status != doctor.OK || !strings.Contains(c.Verdict, "anthropic from $ANTHROPIC_API_KEY") {
			t.Fatalf("with the key: exit %d %+v", code, c)
		}
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "sk-ant-doctor-test") {
			t.Fatal("the doctor printed the key")
		}
	})

	t.Run("ui", func(t *testing.T) {
		nowhere := fmt.Sprintf("http://127.0.0.1:%d", freePort())
		code, r := runDoctor(t, env, "--cwd", e.workDir, "--ui-url", nowhere)
		expectFinding(t, code, r, doctor.CheckUI, doctor.Fail, "the Temporal UI does not answer at "+nowhere, "--ui-url", 2)
	})

	t.Run("disk", func(t *testing.T) {
		// More than any disk here holds: the data dir's filesystem is too full.
		code, r := runDoctor(t, env, "--cwd", e.workDir, "--min-free", "1000PiB")
		expectFinding(t, code, r, doctor.CheckDisk, doctor.Fail, "free for the data dir "+e.dataDir+", below the 1000.0 PiB", "SUBAGENTS_DATA_DIR", 2)
	})

	t.Run("stale_locks", func(t *testing.T) {
		// The lock of a session whose file is gone, as a crash leaves it.
		dir := filepath.Join(e.dataDir, "sessions", "doctor-test")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.RemoveAll(dir) }()
		ghost := filepath.Join(dir, "scout_ghost.jsonl.lock")
		if err := os.WriteFile(ghost, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, r := runDoctor(t, env, "--cwd", e.workDir)
		expectFinding(t, code, r, doctor.CheckStaleLocks, doctor.Warn, "1 session lock file of sessions that are gone or idle for 24h (e.g. "+ghost+")",
			"removes them every hour", 0)
	})

	t.Run("stale_worktrees", func(t *testing.T) {
		// A repository with a session branch from three days ago, and the
		// journal of a worktree whose run died.
		repo := t.TempDir()
		old := time.Now().Add(-72 * time.Hour).Format(time.RFC3339)
		for _, args := range [][]string{
			{"init", "-q", "-b", "main"},
			{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "base"},
			{"branch", "subagents/s-old"},
		} {
			cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
			cmd.Env = append(os.Environ(), "GIT_COMMITTER_DATE="+old, "GIT_AUTHOR_DATE="+old)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		journal := filepath.Join(e.dataDir, "worktrees", "s-dead.json")
		if err := os.MkdirAll(filepath.Dir(journal), 0o700); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Remove(journal) }()
		j, _ := json.Marshal(map[string]string{"session": "s-dead", "repo": repo, "path": filepath.Join(e.dataDir, "worktrees", "s-dead"),
			"branch": "subagents/s-dead", "sessionFile": filepath.Join(e.dataDir, "sessions", "x", "scout_s-dead.jsonl")})
		if err := os.WriteFile(journal, j, 0o600); err != nil {
			t.Fatal(err)
		}
		code, r := runDoctor(t, env, "--cwd", repo)
		c := check(t, r, doctor.CheckStaleWorktrees)
		for _, want := range []string{"1 worktree of runs that died waits to be settled (" + journal + ")",
			"1 session branch in " + repo + " older than 24h, neither applied nor discarded (subagents/s-old)"} {
			if !strings.Contains(c.Verdict, want) {
				t.Errorf("verdict %q lacks %q", c.Verdict, want)
			}
		}
		if code != 0 || c.Status != doctor.Warn || !strings.Contains(c.Fix, "settles them") || !strings.Contains(c.Fix, "subagents apply --discard s-old") {
			t.Fatalf("exit %d %+v", code, c)
		}
	})

	t.Run("unacknowledged", func(t *testing.T) {
		// A delegation whose results wait for a parent that never takes
		// them; the doctor is asked about anything older than a second.
		e.model.Script("doctor-ack", finalizeStep("results nobody took"))
		code, out, stderr := runSubagents(t, env, "start", "--json", "--deliver", "--agent", "scout", "[[script:doctor-ack]] Look around.")
		var started struct {
			DelegationID string `json:"delegation_id"`
		}
		if err := json.Unmarshal([]byte(out), &started); code != 0 || err != nil || started.DelegationID == "" {
			t.Fatalf("start: exit %d %v\n%s\n%s", code, err, out, stderr)
		}
		if code, out, stderr := runSubagents(t, env, "wait", "--json", started.DelegationID); code != 0 {
			t.Fatalf("wait: exit %d\n%s\n%s", code, out, stderr)
		}
		time.Sleep(1500 * time.Millisecond)
		code, r := runDoctor(t, env, "--cwd", e.workDir, "--stale-after", "1s")
		expectFinding(t, code, r, doctor.CheckUnacknowledged, doctor.Warn, "1 delegation has waited more than 1s for their pi session to take the results: "+started.DelegationID,
			"subagents ack "+started.DelegationID, 0)
		// Acknowledged, it waits no more.
		if code, out, stderr := runSubagents(t, env, "ack", "--json", started.DelegationID); code != 0 {
			t.Fatalf("ack: exit %d\n%s\n%s", code, out, stderr)
		}
		extWaitFor(t, "the acknowledged delegation to close", func() bool {
			_, r := runDoctor(t, env, "--cwd", e.workDir, "--stale-after", "1s")
			return check(t, r, doctor.CheckUnacknowledged).Status == doctor.OK
		})
	})
}

// TestDoctorDeadline: a Temporal and a UI that take connections and never
// answer, as a hung service does. At the local address, the service check
// asks it as Temporal is asked, within its own bound, and says it does not
// answer, skipping what needs it (issue 42: a connect alone passed it). At
// a remote one (an API key of its own), the doctor answers by its
// --timeout all the same: each hung check says it did not answer within
// it, and every other check reports.
func TestDoctorDeadline(t *testing.T) {
	// Not parallel: it bounds how long the doctor takes.
	e := newEnv(t)
	hung := hangingListener(t)
	const timeout = 3 * time.Second
	// Built before the clock starts: a build takes far longer than the
	// doctor may.
	subagentsBinary(t)
	start := time.Now()
	code, r := runDoctor(t, e.doctorEnv(hung), "--cwd", e.workDir, "--timeout", "3s")
	if took := time.Since(start); took > timeout+5*time.Second {
		t.Fatalf("the doctor took %s with --timeout %s", took, timeout)
	}
	expectFinding(t, code, r, doctor.CheckService, doctor.Fail, "something takes connections at "+hung+" but does not answer as Temporal: it did not answer within 2s",
		"subagents dev --port", 3)
	for _, name := range []string{doctor.CheckNamespace, doctor.CheckSearchAttributes, doctor.CheckWorkers, doctor.CheckUnacknowledged} {
		if c := check(t, r, name); c.Status != doctor.Skip || !strings.Contains(c.Verdict, "needs a Temporal that answers at "+hung) {
			t.Errorf("%s: %+v, want a skip that names the service", name, c)
		}
	}

	start = time.Now()
	code, r = runDoctor(t, append(e.doctorEnv(hung), "TEMPORAL_API_KEY=doctor-test"), "--cwd", e.workDir, "--ui-url", "http://"+hung, "--timeout", "3s")
	// The deadline, the half second a check has to hand in what it found,
	// and the command's start and end on a loaded machine.
	if took := time.Since(start); took > timeout+5*time.Second {
		t.Fatalf("the doctor took %s with --timeout %s", took, timeout)
	}
	expectFinding(t, code, r, doctor.CheckNamespace, doctor.Fail, "Temporal did not answer within the doctor's 3s (--timeout)", "--timeout", 2)
	expectFinding(t, code, r, doctor.CheckUI, doctor.Fail, "the Temporal UI did not answer within the doctor's 3s (--timeout)", "--timeout", 2)
	if len(r.Checks) != len(doctor.Checks) {
		t.Fatalf("%d checks", len(r.Checks))
	}
	for _, name := range []string{doctor.CheckPi, doctor.CheckNode, doctor.CheckProfiles, doctor.CheckPlans, doctor.CheckSettings, doctor.CheckDisk} {
		if c := check(t, r, name); c.Status != doctor.OK {
			t.Errorf("%s: %+v, want ok: it does not hang", name, c)
		}
	}
}

// TestDoctorInPi: /subagents-doctor in a real pi, with no service running
// and a broken profile in the folder: pi shows the verdicts with their
// fixes, as an error, and no service is started by it.
func TestDoctorInPi(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.workDir, ".pi", "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(e.workDir, ".pi", "agents", "broken.md")
	if err := os.WriteFile(broken, []byte("---\nname: broken\nthinkingLevel: loud\n---\nbody\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	address := fmt.Sprintf("127.0.0.1:%d", freePortWithUI())
	e.parentEnvExtra = []string{"TEMPORAL_ADDRESS=" + address, "TEMPORAL_NAMESPACE=", "SUBAGENTS_HOST=", "SUBAGENTS_UI_URL=",
		"HOME=" + e.home()}
	p := e.startExt([]string{"--mode", "rpc", "--session", filepath.Join(t.TempDir(), "doctor.jsonl")}, "")
	p.send(t, map[string]any{"type": "prompt", "message": "/subagents-doctor"})
	line := p.waitEvent(t, `"method":"notify"`, "subagents doctor: ")
	var ev struct {
		Message    string `json:"message"`
		NotifyType string `json:"notifyType"`
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"subagents doctor: 2 failed",
		"✗ service: no subagents service runs for data dir " + e.dataDir,
		"    fix: start it: `subagents dev`",
		"– socket: no subagents dev runs for this data dir",
		"✗ profiles: 1 of",
		broken + ":3: thinkingLevel \"loud\" must be one of",
		"✓ pi: pi " + doctor.PinnedPi,
	} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("pi showed:\n%s\nwhich lacks %q", ev.Message, want)
		}
	}
	if ev.NotifyType != "error" {
		t.Errorf("shown as %q, want error", ev.NotifyType)
	}
	w := localWorld{dataDir: e.dataDir}
	if procs := w.devProcesses(); len(procs) != 0 {
		t.Fatalf("/subagents-doctor started a service: %v", procs)
	}
}
