package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	subcli "github.com/durable-pi/subagents/cli"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// socketConn is a client of the local service's socket, as the extension
// is one.
type socketConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialSocket(t *testing.T, path string) *socketConn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &socketConn{t: t, conn: c, r: bufio.NewReaderSize(c, 1<<20)}
}

func (s *socketConn) send(line string) {
	s.t.Helper()
	if _, err := s.conn.Write([]byte(line + "\n")); err != nil {
		s.t.Fatal(err)
	}
}

// answer reads replies until request id's exit and returns its lines.
func (s *socketConn) answer(id int64) (lines []string, exit int) {
	s.t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(testTimeout))
	for {
		b, err := s.r.ReadBytes('\n')
		if err != nil {
			s.t.Fatalf("reading request %d's answer: %v", id, err)
		}
		var r subcli.ServeReply
		if err := json.Unmarshal(b, &r); err != nil {
			s.t.Fatalf("reply is not JSON: %q", b)
		}
		if r.ID != id {
			continue
		}
		if r.Line != nil {
			lines = append(lines, *r.Line)
		}
		if r.Exit != nil {
			return lines, *r.Exit
		}
	}
}

// TestSocketProtocol drives `subagents dev`'s socket as a client would,
// with the mistakes a client can make: a line over the limit, a line that
// is not JSON, an unknown verb, and a hang-up in the middle of a wait. Each
// gets its coded answer, and the service goes on serving.
func TestSocketProtocol(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.dataDir = filepath.Join(t.TempDir(), "d")
	slow := finalizeStep("slow but done")
	slow.DelayMS = 3000
	e.model.Script("slow", slow)
	_, cli, _ := e.devCLI("--headless")
	sock := filepath.Join(e.dataDir, connection.SocketName)
	if info, err := os.Stat(sock); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v", info, err)
	}
	s := dialSocket(t, sock)

	s.send(`{"id":1,"args":["service"]}`)
	lines, exit := s.answer(1)
	var info subcli.ServiceInfo
	if exit != 0 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &info) != nil || info.PID == 0 || info.DataDir != e.dataDir {
		t.Fatalf("service: exit %d %q", exit, lines)
	}

	big := `{"id":2,"args":["start","--json","--input","-"],"input":"` + strings.Repeat("x", subcli.MaxRequestLine) + `"}`
	s.send(big)
	lines, exit = s.answer(2)
	if exit != errcode.ExitBadInput || !strings.Contains(strings.Join(lines, ""), "longer than the limit") {
		t.Fatalf("a line over the limit: exit %d %.300q", exit, lines)
	}
	s.send(`{"id":3, not json`)
	if lines, exit = s.answer(3); exit != errcode.ExitBadInput || !strings.Contains(lines[0], `"INVALID_INPUT"`) {
		t.Fatalf("a malformed line: exit %d %q", exit, lines)
	}
	s.send(`{"id":4,"args":["explode","--json"]}`)
	if lines, exit = s.answer(4); exit != errcode.ExitBadInput || !strings.Contains(lines[0], `unknown command`) {
		t.Fatalf("an unknown verb: exit %d %q", exit, lines)
	}

	// A wait whose client hangs up: the service ends that call and keeps
	// serving; the task itself goes on and completes.
	start, _ := json.Marshal(map[string]any{"tasks": []map[string]any{{"name": "slow", "prompt": "[[script:slow]] Take your time.", "cwd": e.workDir, "profile": "scout"}}})
	s.send(fmt.Sprintf(`{"id":5,"args":["start","--json","--input","-"],"input":%q}`, start))
	lines, exit = s.answer(5)
	var env client.Envelope
	if exit != 0 || json.Unmarshal([]byte(lines[0]), &env) != nil || env.DelegationID == "" {
		t.Fatalf("start: exit %d %q", exit, lines)
	}
	waiter := dialSocket(t, sock)
	waiter.send(fmt.Sprintf(`{"id":1,"args":["wait","--json","--progress","--","%s"]}`, env.DelegationID))
	time.Sleep(300 * time.Millisecond)
	_ = waiter.conn.Close()

	s.send(`{"id":6,"args":["service"]}`)
	if _, exit = s.answer(6); exit != 0 {
		t.Fatalf("the service stopped answering after a client hung up: exit %d", exit)
	}
	code, out, stderr := cli.run("", "wait", "--json", env.DelegationID)
	if code != 0 || !strings.Contains(out, `"status": "completed"`) {
		t.Fatalf("the task after its waiter hung up: exit %d\n%s\n%s", code, out, stderr)
	}
}

// TestWorkerSocket: `subagents worker --socket` answers the same protocol
// for the Temporal it works for.
func TestWorkerSocket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dataDir := filepath.Join(t.TempDir(), "w")
	cmd := exec.Command(subagentsBinary(t), "worker", "--socket", "--address", shared.server.FrontendAddress(),
		"--task-queue", e.taskQueue, "--data-dir", dataDir)
	cmd.Env = append(os.Environ(), e.cliEnv()...)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endWorker(t, cmd) })
	deadline := time.Now().Add(testTimeout)
	for !strings.Contains(out.String(), "worker polling task queue") {
		if time.Now().After(deadline) {
			t.Fatalf("worker not ready:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.model.Script("ws", finalizeStep("through the worker's socket"))
	s := dialSocket(t, filepath.Join(dataDir, connection.SocketName))
	start, _ := json.Marshal(map[string]any{"tasks": []map[string]any{{"name": "ws", "prompt": "[[script:ws]] Go.", "cwd": e.workDir}}})
	s.send(fmt.Sprintf(`{"id":1,"args":["run","--json","--input","-"],"input":%q}`, start))
	lines, exit := s.answer(1)
	if exit != 0 || !strings.Contains(strings.Join(lines, "\n"), "through the worker's socket") {
		t.Fatalf("run through the worker's socket: exit %d\n%s\n%s", exit, lines, out)
	}
}

// TestCommandHandsItsCallToTheService: a `subagents` command whose Temporal
// is the one a local service serves hands its call to the service's socket
// instead of dialing: run from a project folder, it runs the task there
// (the caller's folder, not the service's), reads a request from its own
// stdin, carries its depth, says a failure as the command does, and prints
// what the command prints. SUBAGENTS_SOCKET=0 dials as before, with the
// same result. (The service is headless, so only a call that dialed itself
// names a UI link: that tells the two paths apart.)
func TestCommandHandsItsCallToTheService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.dataDir = filepath.Join(t.TempDir(), "d")
	_, c, _ := e.devCLI("--headless")
	project := filepath.Join(t.TempDir(), "project")
	if err := os.MkdirAll(filepath.Join(project, ".pi", "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := "---\nname: local-only\nmodel: " + scriptedmodel.ModelRef + "\n---\nAnswer.\n"
	e.trustWithPi(project) // the user's own project
	if err := os.WriteFile(filepath.Join(project, ".pi", "agents", "local-only.md"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	e.model.Script("here", finalizeStep("answered in the project"))
	run := func(stdin string, env []string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(subagentsBinary(t), append(append([]string{args[0]}, c.args...), args[1:]...)...)
		cmd.Dir = project
		cmd.Env = append(append(os.Environ(), e.cliEnv()...), append([]string{"SUBAGENTS_DATA_DIR=" + e.dataDir}, env...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}

	for _, tt := range []struct {
		name      string
		env       []string
		forwarded bool
	}{{"through the socket", nil, true}, {"SUBAGENTS_SOCKET=0", []string{"SUBAGENTS_SOCKET=0"}, false}} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := run("", tt.env, "run", "--json", "--agent", "local-only", "[[script:here]] Answer here.")
			if code != 0 || !strings.Contains(out, `"status": "completed"`) || !strings.Contains(out, "answered in the project") {
				t.Fatalf("run from the project folder: exit %d\n%s\n%s", code, out, stderr)
			}
			if forwarded := !strings.Contains(out, `"ui_url"`); forwarded != tt.forwarded {
				t.Fatalf("handed to the service: %v, want %v\n%s", forwarded, tt.forwarded, out)
			}

			code, out, _ = run("", append([]string{"PI_SUBAGENT_DEPTH=99"}, tt.env...), "run", "--json", "--agent", "local-only", "Too deep.")
			if code != errcode.ExitBadInput || !strings.Contains(out, `"SUBAGENT_DEPTH_EXCEEDED"`) {
				t.Fatalf("a call from a child at depth 99: exit %d\n%s", code, out)
			}

			code, out, stderr = run("", tt.env, "run", "--agent", "nobody", "Who?")
			if code != errcode.ExitFailed || !strings.Contains(stderr, "subagents: 1 of 1 task did not complete: task \"nobody\" (") ||
				!strings.Contains(stderr, `failed with UNKNOWN_AGENT: Unknown profile: "nobody"`) || !strings.Contains(out, `Unknown profile: "nobody"`) {
				t.Fatalf("a task that fails, as text: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
		})
	}

	// A request on stdin, its task with no cwd: it runs in the caller's folder.
	req := `{"tasks":[{"name":"stdin","prompt":"[[script:here]] Again.","profile":"local-only"}]}`
	code, out, stderr := run(req, nil, "start", "--json", "--input", "-")
	var started client.Envelope
	if code != 0 || json.Unmarshal([]byte(out), &started) != nil || started.DelegationID == "" || strings.Contains(out, `"ui_url"`) {
		t.Fatalf("start --input - through the socket: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run("", nil, "wait", "--json", started.DelegationID)
	if code != 0 || !strings.Contains(out, "answered in the project") {
		t.Fatalf("wait: exit %d\n%s\n%s", code, out, stderr)
	}
}
