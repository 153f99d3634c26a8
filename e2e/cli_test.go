package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/internal/syncbuf"
	"github.com/durable-pi/subagents/worker/devserver"
)

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// subagentsBinary builds cmd/subagents and cmd/subagents-dev once per test
// run, and returns the path of the first.
func subagentsBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "subagents-e2e-bin-")
		if err != nil {
			binary.err = err
			return
		}
		binary.dir = dir
		binary.path = filepath.Join(dir, "subagents")
		// Both builds, side by side as `make build` writes them: `subagents
		// dev` runs subagents-dev.
		for _, b := range [][2]string{{binary.path, "../cmd/subagents"}, {filepath.Join(dir, "subagents-dev"), "../cmd/subagents-dev"}} {
			out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
			if err != nil {
				binary.err = fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// devProcess is a `subagents dev` started by a test.
type devProcess struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit error, once done is closed
}

// syncBuffer holds a process's output while a test watches it.
type syncBuffer = syncbuf.Buffer

func (e *env) startDev(args ...string) *devProcess {
	e.t.Helper()
	cmd := exec.Command(subagentsBinary(e.t), append([]string{"dev"}, args...)...)
	cmd.Env = append(os.Environ(), e.cliEnv()...)
	cmd.Dir = filepath.Dir(e.workDir)
	p := &devProcess{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() {
		// The process is ours: end it by its pid if the test did not.
		_ = cmd.Process.Kill()
		<-p.done
		// Its reaper ends the children a moment after it dies: wait, or a
		// child still closing its session file races the test's removal
		// of the data dir.
		waitTreeGone(e.t, cmd.Process.Pid)
		if e.t.Failed() {
			e.t.Logf("subagents dev stdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
		}
	})
	return p
}

// endWorker ends a `subagents worker` the test started, by its pid, and
// waits until its reaper has ended what it started: a child still starting
// or closing its session file races the removal of the test's folders
// ("directory not empty").
func endWorker(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	waitTreeGone(t, cmd.Process.Pid)
}

// waitTreeGone waits until no process of the worker of pid is left: its
// reaper and what it started carry the worker's pid in their environment.
func waitTreeGone(t *testing.T, pid int) {
	t.Helper()
	marks := [][]byte{
		[]byte("\x00PI_SUBAGENT_PROC=" + strconv.Itoa(pid) + "-"),
		[]byte("\x00SUBAGENTS_REAPER=" + strconv.Itoa(pid) + "-"),
	}
	// The reaper sweeps a few times a tenth of a second apart; ten seconds
	// is far beyond that on a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []int
		eachProcess("environ", func(p int, env []byte) {
			env = append([]byte{0}, env...)
			for _, m := range marks {
				if bytes.Contains(env, m) {
					left = append(left, p)
					return
				}
			}
		})
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of the worker %d still run: %v", pid, left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// crashRestart SIGKILLs the service p (the whole machine's crash, as far
// as the service is concerned), waits for it to die, and starts it again
// with args, on the same database: the service a user starts after it.
func (e *env) crashRestart(p *devProcess, args ...string) *devProcess {
	e.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	<-p.done
	p = e.startDev(args...)
	p.waitReady(e.t)
	return p
}

// waitReady waits for the banner line that says the worker polls.
func (p *devProcess) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.After(testTimeout)
	for !strings.Contains(p.stdout.String(), "worker polling task queue") {
		select {
		case <-p.done:
			t.Fatalf("subagents dev exited early: %v\n%s", p.err, p.stderr)
		case <-deadline:
			t.Fatalf("subagents dev not ready after %s\n%s", testTimeout, p.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *devProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("subagents dev exited with %v after SIGTERM\n%s", p.err, p.stderr)
		}
	case <-time.After(testTimeout):
		t.Fatal("subagents dev did not stop after SIGTERM")
	}
}

// cliEnv is the environment a subagents process of this test gets: pi from
// the lockfile (the test binary is not in the source tree, so the tree
// lookup would miss it) and the scripted model.
func (e *env) cliEnv() []string {
	return append([]string{
		"SUBAGENTS_PI=" + e.pi.Path,
		// The data dir too: a command finds the local service's API key
		// there.
		"SUBAGENTS_DATA_DIR=" + e.dataDir,
		// The services the tests start (subagents dev, the one a parent's
		// extension starts) keep one warm child per kind, as the tests' own
		// workers do (workerConfig): their second task of a kind still runs
		// on one. The default pool of 4 keeps two per kind, and most tests
		// run one task of each: a trace of the suite's pools had 186
		// children started by these services and 38 taken. A test that
		// needs more says so with --warm-pool.
		"SUBAGENTS_WARM_POOL=1",
	}, scriptedmodel.PiEnv(e.agentDir)...)
}

// runSubagents runs the command to its end and returns its exit code and
// output (runSubagentsIn the test's own folder).
func runSubagents(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runSubagentsIn(t, "", env, args...)
}

// TestDevStartupErrors: what a user can get wrong fails at start, with one
// line and exit code 2.
func TestDevStartupErrors(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	aFile := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	pi := "SUBAGENTS_PI=" + findPi(t).Path

	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"frontend port in use", []string{"--port", busyPort, "--headless"}, nil, "--port: cannot listen on 127.0.0.1:" + busyPort},
		{"ui port in use", []string{"--port", strconv.Itoa(freePort()), "--ui-port", busyPort}, nil, "--ui-port: cannot listen on 127.0.0.1:" + busyPort},
		{"database under a file", []string{"--port", strconv.Itoa(freePort()), "--headless", "--db-filename", filepath.Join(aFile, "t.db")}, nil, "--db-filename: cannot create folder"},
		{"database is a folder", []string{"--port", strconv.Itoa(freePort()), "--headless", "--db-filename", dataDir}, nil, "is a folder, not a database file"},
		{"pi missing", []string{"--port", strconv.Itoa(freePort()), "--headless", "--pi", filepath.Join(dataDir, "no-pi")}, nil, "pi (--pi): "},
		{"pi that does not run", []string{"--port", strconv.Itoa(freePort()), "--headless"}, []string{"SUBAGENTS_PI=/bin/false"}, "does not run"},
		{"http api off loopback", []string{"--ip", "0.0.0.0", "--port", strconv.Itoa(freePort()), "--headless", "--http-port", strconv.Itoa(freePort())}, nil, "--http-port serves Temporal's HTTP API in plain HTTP"},
		{"http port in use", []string{"--port", strconv.Itoa(freePort()), "--headless", "--http-port", busyPort}, nil, "--http-port: cannot listen on 127.0.0.1:" + busyPort},
		{"ui ip not an address", []string{"--port", strconv.Itoa(freePort()), "--ui-ip", "localhost"}, nil, `--ui-ip "localhost" is not an IP address`},
		{"bad flag", []string{"--no-such-flag"}, nil, "flag provided but not defined"},
		{"ephemeral with a file", []string{"--ephemeral", "--db-filename", filepath.Join(dataDir, "x.db")}, nil, "--ephemeral and --db-filename exclude each other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"dev", "--data-dir", dataDir}, tt.args...)
			code, _, stderr := runSubagents(t, append([]string{pi}, tt.env...), args...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2\n%s", code, stderr)
			}
			last := lastNonEmptyLine(stderr)
			if !strings.HasPrefix(last, "subagents: ") || !strings.Contains(last, tt.want) {
				t.Fatalf("last line %q does not say %q", last, tt.want)
			}
		})
	}
}

func lastNonEmptyLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestDevRunsUIWorkerAndSurvivesRestart drives `subagents dev` as a user
// does: the UI serves namespace default, our search attributes exist, a
// session runs real pi, SIGTERM stops it cleanly, and a second start on the
// same database still has the workflow.
func TestDevRunsUIWorkerAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("dev", scriptedmodel.Step{Text: "Answered through subagents dev."})
	port, uiPort := freePort(), freePort()
	db := filepath.Join(t.TempDir(), "state", "temporal.db")
	args := []string{
		"--port", strconv.Itoa(port), "--ui-port", strconv.Itoa(uiPort),
		"--db-filename", db, "--data-dir", e.dataDir, "--task-queue", e.taskQueue,
	}
	p := e.startDev(args...)
	p.waitReady(t)
	// The database holds every prompt and result: its owner's only, also
	// outside the data dir.
	for _, f := range []string{db, db + "-wal"} {
		if info, err := os.Stat(f); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, want mode 0600", f, err)
		}
	}
	uiURL := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	if !strings.Contains(p.stdout.String(), uiURL+"/namespaces/default/workflows") {
		t.Fatalf("banner does not show the UI link:\n%s", p.stdout)
	}

	// The UI serves its page and, through its API, namespace default.
	page := e.uiGet(uiPort, "/namespaces/default/workflows")
	if !strings.Contains(strings.ToLower(page), "<html") {
		t.Fatalf("UI page is not HTML: %.200s", page)
	}
	var namespaces struct {
		Namespaces []struct {
			NamespaceInfo struct {
				Name string `json:"name"`
			} `json:"namespaceInfo"`
		} `json:"namespaces"`
	}
	if err := json.Unmarshal([]byte(e.uiGet(uiPort, "/api/v1/namespaces")), &namespaces); err != nil {
		t.Fatal(err)
	}
	if len(namespaces.Namespaces) == 0 || namespaces.Namespaces[0].NamespaceInfo.Name != "default" {
		t.Fatalf("UI API namespaces = %+v", namespaces)
	}

	c := e.dialAddress(fmt.Sprintf("127.0.0.1:%d", port))
	defer c.Close()
	sa, err := c.OperatorService().ListSearchAttributes(e.ctx(), &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for name := range api.SearchAttributes() {
		if _, ok := sa.GetCustomAttributes()[name]; !ok {
			t.Errorf("search attribute %s is not registered", name)
		}
	}

	in := e.sessionInput("[[script:dev]] Answer through the dev server.")
	in.Child.NoFinalize = true
	var res api.SessionResult
	if err := e.startSession(c, in).Get(e.ctx(), &res); err != nil {
		t.Fatal(err)
	}
	if res.LastTurn.Result.Output != "Answered through subagents dev." {
		t.Fatalf("output %q", res.LastTurn.Result.Output)
	}
	c.Close()

	p.stop(t)
	if !strings.Contains(p.stderr.String(), "worker stopped") {
		t.Fatalf("no clean worker stop in the log:\n%s", p.stderr)
	}

	p = e.startDev(args...)
	p.waitReady(t)
	c2 := e.dialAddress(fmt.Sprintf("127.0.0.1:%d", port))
	defer c2.Close()
	var again api.SessionResult
	if err := c2.GetWorkflow(e.ctx(), in.SessionID, "").Get(e.ctx(), &again); err != nil {
		t.Fatalf("workflow from before the restart: %v", err)
	}
	if again.LastTurn.Result.Output != res.LastTurn.Result.Output {
		t.Fatalf("output after restart %q", again.LastTurn.Result.Output)
	}
	p.stop(t)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	return httpGetWith(t, url, nil)
}

// uiGet reads path from the UI of this test's local service, logged in as
// a browser is after the link `subagents ui` prints.
func (e *env) uiGet(uiPort int, path string) string {
	e.t.Helper()
	key, err := connection.ReadKey(e.dataDir)
	if err != nil {
		e.t.Fatal(err)
	}
	return httpGetWith(e.t, fmt.Sprintf("http://127.0.0.1:%d%s", uiPort, path), &http.Cookie{Name: devserver.UICookie, Value: connection.UIToken(key)})
}

func httpGetWith(t *testing.T, url string, cookie *http.Cookie) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(bufio.NewReader(resp.Body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return string(body)
}

// quietLogger keeps the SDK client's info lines out of test output.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

// TestProfilesOnAFreshMachine: with no profile files anywhere, the command
// lists the eleven built-in agents.
func TestProfilesOnAFreshMachine(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	code, stdout, stderr := runSubagents(t, []string{"PI_CODING_AGENT_DIR=" + empty, "HOME=" + empty}, "profiles", "--json", "--cwd", empty)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var env struct {
		ContractVersion string `json:"contract_version"`
		Count           int    `json:"count"`
		Profiles        []struct {
			Name  string `json:"name"`
			Scope string `json:"scope"`
		} `json:"profiles"`
	}
	if err := json.Unmarshal([]byte(stdout), &env); err != nil {
		t.Fatal(err)
	}
	if env.ContractVersion != "subagents.v1" || env.Count != 12 {
		t.Fatalf("envelope %+v", env)
	}
	for _, p := range env.Profiles {
		if p.Scope != "builtin" {
			t.Fatalf("profile %s from %s on a fresh machine", p.Name, p.Scope)
		}
	}
	if code, _, stderr := runSubagents(t, nil, "profiles", "--bogus"); code != 2 || !strings.Contains(stderr, "flag provided but not defined") {
		t.Fatalf("bad flag: exit %d %s", code, stderr)
	}
}
