package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestHandMadeSessionCannotWidenPowers starts Session workflows by hand
// through the SDK, as anyone who reaches the frontend could, each asking for
// more than any profile grants. The worker refuses every one with a coded
// error before pi starts: the model is never asked and no session file is
// written. The last row is the control: what a profile does grant runs.
func TestHandMadeSessionCannotWidenPowers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ext, err := filepath.Abs(filepath.Join("testdata", "extensions", "noop.ts"))
	if err != nil {
		t.Fatal(err)
	}
	e.writeProfile("granted", fmt.Sprintf("---\nname: granted\ntools: read,bash\nextensions: %s\nextraArgs: --verbose\nnoContextFiles: true\n---\nYou may.\n", ext))
	e.startWorker(shared.client)

	tests := []struct {
		name  string
		child api.RunPiInput
		want  errcode.Code
	}{
		{"an extension no profile names", api.RunPiInput{Extensions: []string{ext}}, errcode.PermissionDenied},
		{"extra arguments that add tools", api.RunPiInput{Profile: "scout", Tools: []string{"read", "grep", "find", "ls"}, ExtraArgs: []string{"--tools", "bash"}}, errcode.PermissionDenied},
		{"a tool beyond a readonly profile", api.RunPiInput{Profile: "scout", Tools: []string{"read", "bash"}}, errcode.PermissionDenied},
		{"pi's default tools for a readonly profile", api.RunPiInput{Profile: "scout"}, errcode.PermissionDenied},
		{"an extension beside the granted one", api.RunPiInput{Profile: "granted", Tools: []string{"read"}, Extensions: []string{ext, "/tmp/other.ts"}, ExtraArgs: []string{"--verbose"}, NoContextFiles: true}, errcode.PermissionDenied},
		{"context files the profile turns off", api.RunPiInput{Profile: "granted", Tools: []string{"read"}, Extensions: []string{ext}, ExtraArgs: []string{"--verbose"}}, errcode.PermissionDenied},
		{"a depth beyond the limit", api.RunPiInput{Depth: 3}, errcode.DepthExceeded},
		{"a profile that does not exist", api.RunPiInput{Profile: "ghost"}, errcode.UnknownAgent},
		{"fewer tools than the profile grants", api.RunPiInput{Profile: "scout", Tools: []string{"read"}, NoFinalize: true}, ""},
		{"what the profile grants", api.RunPiInput{Profile: "granted", Tools: []string{"read", "bash"}, Extensions: []string{ext}, ExtraArgs: []string{"--verbose"}, NoContextFiles: true, NoFinalize: true}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := fmt.Sprintf("hand%d", i)
			e.model.Script(script, scriptedmodel.Step{Text: "ran"})
			in := e.sessionInput("[[script:" + script + "]] Do as you like.")
			in.Child = tt.child
			var res api.SessionResult
			if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
				t.Fatalf("session: %v", err)
			}
			turn := res.LastTurn
			sessionFile := activities.SessionFile(e.dataDir, in.Cwd, in.Agent, in.SessionID)
			if tt.want == "" {
				if turn.Error != nil || turn.Result.Output != "ran" {
					t.Fatalf("a granted run: error %+v output %q", turn.Error, turn.Result.Output)
				}
				return
			}
			if turn.Error == nil || turn.Error.Code != tt.want || turn.Error.Category != tt.want.Category() || res.State != api.StateFailed {
				t.Fatalf("state %s error %+v, want %s", res.State, turn.Error, tt.want)
			}
			if n := len(e.model.RequestsFor(script)); n != 0 {
				t.Fatalf("the model was asked %d times for a refused run", n)
			}
			if _, err := os.Stat(sessionFile); err == nil {
				t.Fatalf("a refused run wrote %s", sessionFile)
			}
			t.Logf("refused: %s: %s", turn.Error.Code, turn.Error.Message)
		})
	}
}

// writeProfile writes a global profile into the test's pi config dir.
func (e *env) writeProfile(name, content string) {
	e.t.Helper()
	dir := filepath.Join(e.agentDir, "agents")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// TestDevHTTPAPIOffByDefault: of every TCP port `subagents dev` listens on,
// none but the UI's answers Temporal's HTTP API, so a web page the user
// opens cannot start a workflow with a simple (preflight-free) POST. The
// control run turns the API on with --http-port and shows that the same
// probe would have started one, and that the worker still refuses what it
// asks for.
func TestDevHTTPAPIOffByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	uiPort := freePort()
	dev, c, _ := e.devCLI("--ui-port", strconv.Itoa(uiPort))
	ports, err := listeningPorts(dev.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) < 5 {
		t.Fatalf("found %d listening ports of subagents dev (%v): the probe cannot see them", len(ports), ports)
	}
	for _, port := range ports {
		if port == uiPort {
			continue
		}
		id := "probe-" + uuid.NewString()
		// Two ports answer HTTP and refuse: the UI server behind the UI's
		// front (403: it calls the frontend with the key only for the
		// front's requests) and the internal TLS listeners (400: plain
		// HTTP to a TLS server).
		status, ok := postStartWorkflow(t, port, id, e.taskQueue, "")
		if ok && status < 500 && status != http.StatusForbidden && status != http.StatusBadRequest {
			t.Errorf("port %d answered Temporal's HTTP API with %d", port, status)
		}
		if _, err := shared.client.DescribeWorkflowExecution(context.Background(), id, ""); err == nil {
			t.Errorf("a probe of port %d started a workflow on the shared server", port)
		}
		if code, out, _ := c.run("", "status", id); code != errcode.ExitBadInput {
			t.Errorf("a probe of port %d started a workflow: status exit %d\n%s", port, code, out)
		}
	}
	t.Logf("probed ports %v (UI %d)", ports, uiPort)

	// Control: with --http-port, the same request is refused for want of
	// the API key; with the key it starts a Session, and the worker refuses
	// its hand-made powers.
	httpPort := freePort()
	e2 := newEnv(t)
	_, c2, _ := e2.devCLI("--headless", "--http-port", strconv.Itoa(httpPort))
	id := "probe-" + uuid.NewString()
	if status, ok := postStartWorkflow(t, httpPort, id, e2.taskQueue, ""); !ok || status != http.StatusForbidden {
		t.Fatalf("with --http-port the probe without the key got %d (answered %v), want 403", status, ok)
	}
	key, err := connection.ReadKey(e2.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	status, ok := postStartWorkflow(t, httpPort, id, e2.taskQueue, key)
	if !ok || status != http.StatusOK {
		t.Fatalf("with --http-port and the key the probe got %d (answered %v): the probe does not test what it should", status, ok)
	}
	code, out, stderr := c2.run("", "wait", "--json", id)
	if code != errcode.ExitFailed || !strings.Contains(out, `"code": "PERMISSION_DENIED"`) {
		t.Fatalf("hand-made session through the HTTP API: exit %d\n%s\n%s", code, out, stderr)
	}
	if n := len(e2.model.Requests()); n != 0 {
		t.Fatalf("the model was asked %d times", n)
	}
}

// postStartWorkflow sends what a web page could send without a CORS
// preflight: a text/plain POST from a foreign origin, asking Temporal's HTTP
// API to start a Session with a shell tool, an extension of the sender's
// choice and cwd /; with key, as the key's holder would. ok is false when the
// port answered no HTTP at all.
func postStartWorkflow(t *testing.T, port int, id, taskQueue, key string) (status int, ok bool) {
	t.Helper()
	body := fmt.Sprintf(`{"workflowType":{"name":%q},"taskQueue":{"name":%q},"input":[{"sessionId":%q,"cwd":"/","prompt":"run this",`+
		`"idleTtlSeconds":-1,"child":{"extensions":["/tmp/evil.ts"],"extraArgs":["--tools","bash"]}}]}`,
		api.SessionWorkflowName, taskQueue, id)
	url := fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces/default/workflows/%s", port, id)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "http://evil.example")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	// Ports that do not speak HTTP/1.1 (gRPC, membership) hang up or stay
	// silent; two seconds is plenty for a local answer.
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	return resp.StatusCode, true
}

// listeningPorts lists the TCP ports process pid listens on, read from
// /proc: its socket inodes matched against the kernel's socket tables.
func listeningPorts(pid int) ([]int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	seen := map[int]bool{}
	var ports []int
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			const listen = "0A"
			if len(fields) < 10 || fields[3] != listen || !inodes[fields[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err == nil && !seen[int(port)] {
				seen[int(port)] = true
				ports = append(ports, int(port))
			}
		}
		_ = f.Close()
	}
	return ports, nil
}

// TestDevUIPortTaken: when the UI's default port (frontend + 1000) is taken,
// as by another Temporal's UI, subagents dev (which a pi starts by itself)
// still starts, its UI on another port that the banner names; a --ui-port
// chosen by hand and taken is an error that names the flag.
func TestDevUIPortTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	port := freePort()
	taken, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1000)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	dev := e.startDev("--port", strconv.Itoa(port), "--ephemeral", "--data-dir", filepath.Join(t.TempDir(), "data"), "--task-queue", e.taskQueue)
	dev.waitReady(t)
	banner := dev.stdout.String()
	if !strings.Contains(banner, "Temporal UI:       http://127.0.0.1:") || strings.Contains(banner, fmt.Sprintf(":%d/", port+1000)) {
		t.Fatalf("banner:\n%s", banner)
	}

	again := e.startDev("--port", strconv.Itoa(freePort()), "--ui-port", strconv.Itoa(port+1000), "--ephemeral",
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--task-queue", e.taskQueue)
	<-again.done
	if again.err == nil || !strings.Contains(again.stderr.String(), "--ui-port: cannot listen on") {
		t.Fatalf("a taken --ui-port: %v\n%s", again.err, again.stderr)
	}
}
