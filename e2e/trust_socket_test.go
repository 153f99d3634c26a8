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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	subcli "github.com/durable-pi/subagents/cli"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// The local service's socket under load a client of this user can make by
// mistake (a runaway script, a loop that never closes what it opens): the
// socket is 0600 in a 0700 folder, so nobody else reaches it. Issue 29,
// item 5: a burst of connections under a descriptor limit ended the accept
// loop for good, with nothing logged; connections each holding part of a
// long line grew the service by hundreds of megabytes.

// answerWithin is how long the service gets to answer a call after an
// attack: the accept loop's longest backoff is a second, and a `list`
// answers in milliseconds; a loaded machine gets the rest.
const answerWithin = 30 * time.Second

// TestSocketSurvivesADescriptorBurst: `subagents dev` under a 256-file limit
// (set on the running service with prlimit, as a user's `ulimit -n 256`
// would be), 300 connections to its socket at once: the ones past its limit
// of connections are told so, and once all are closed the next call on the
// socket gets its answer. Then the same with the limit a few descriptors
// above what the service holds, so that accepting itself fails: the next
// call gets its answer all the same, and the log says what happened.
// Before, the accept loop ended at the first "too many open files": every
// later call hung, nothing was logged, and the process stayed up holding
// dev.lock.
func TestSocketSurvivesADescriptorBurst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.dataDir = filepath.Join(t.TempDir(), "d")
	p, _, _ := e.devCLI("--headless")
	sock := filepath.Join(e.dataDir, connection.SocketName)
	pid := servicePID(t, sock)
	limit := func(n int) {
		t.Helper()
		if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(pid), fmt.Sprintf("--nofile=%d:%d", n, n)).CombinedOutput(); err != nil {
			t.Fatalf("prlimit: %v\n%s", err, out)
		}
	}
	// burst opens 300 connections and holds them for a moment, so that the
	// service accepts all it can and meets its limits; the last one's first
	// line is returned, read within a few seconds; then all are closed.
	burst := func() (string, error) {
		t.Helper()
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for i := range 300 {
			c, err := net.DialTimeout("unix", sock, 5*time.Second)
			if err != nil {
				t.Fatalf("connection %d of the burst: %v", i, err)
			}
			conns = append(conns, c)
		}
		last := conns[len(conns)-1]
		_ = last.SetReadDeadline(time.Now().Add(5 * time.Second))
		return bufio.NewReader(last).ReadString('\n')
	}
	// afterwards makes a call as a client that reads the refusal does:
	// the service notices the burst's closes one by one, and until it has
	// noticed enough of them it still turns a call away with a line that
	// says to try again; the call must get its answer within answerWithin.
	afterwards := func(what string) {
		t.Helper()
		deadline := time.Now().Add(answerWithin)
		var (
			lines []string
			exit  int
			err   error
		)
		for refusals := 0; ; refusals++ {
			lines, exit, err = callWithin(sock, `{"id":1,"args":["list","--json"]}`, 1, time.Until(deadline))
			if !errors.Is(err, errRefused) || time.Now().After(deadline) {
				break
			}
			t.Logf("a call after %s: refused (%d), trying again: %v", what, refusals+1, err)
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil || exit != 0 || len(lines) == 0 || !strings.Contains(lines[0], `"op":"list"`) {
			t.Fatalf("a call after %s: exit %d, %v\n%q\nservice log:\n%s", what, exit, err, lines, p.stderr)
		}
	}

	limit(256)
	refusal, err := burst()
	if err != nil || !strings.Contains(refusal, `SERVICE_UNAVAILABLE`) || !strings.Contains(refusal, "at its limit of") {
		t.Errorf("the 300th connection of the burst: %v %q, want a SERVICE_UNAVAILABLE line", err, refusal)
	}
	afterwards("300 connections under a 256-file limit")

	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	limit(len(fds) + 16)
	_, _ = burst()
	afterwards("300 connections with 16 descriptors free")

	log := p.stderr.String()
	for _, want := range []string{"at its limit of", "too many open files", "accepting again"} {
		if !strings.Contains(log, want) {
			t.Errorf("the service's log does not say %q:\n%s", want, log)
		}
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "socket:") {
			t.Log(line)
		}
	}
}

// TestSocketRefusesOversizedLines: ten connections each send half of a
// 30 MiB request line and hold it, never ending the line. Each is refused at
// once with a coded answer (INVALID_INPUT naming the line limit, or
// SERVICE_UNAVAILABLE when the service's reading budget is taken by the
// others), the service's memory stays within 64 MiB of what it was before,
// and a normal call gets its answer meanwhile. Before, each line was
// buffered whole (it was under a 32 MiB limit): no answer, and the service
// grew by hundreds of megabytes.
func TestSocketRefusesOversizedLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.dataDir = filepath.Join(t.TempDir(), "d")
	p, _, _ := e.devCLI("--headless")
	sock := filepath.Join(e.dataDir, connection.SocketName)
	pid := servicePID(t, sock)
	if _, exit, err := callWithin(sock, `{"id":1,"args":["list","--json"]}`, 1, answerWithin); err != nil || exit != 0 {
		t.Fatalf("list before: exit %d, %v", exit, err)
	}
	before := vmRSS(t, pid)

	// The service's RSS sampled while the lines come in, its peak kept.
	var peak int64
	sampling, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss, err := readVmRSS(pid); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-sampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	const conns, half = 10, 15 << 20
	head := `{"id":7,"args":["start","--json","--input","-"],"input":"`
	body := strings.Repeat("x", half-len(head))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		problems []string
		held     []net.Conn
	)
	for i := range conns {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Written on its own: a service that buffers the line reads it
			// all, one that refuses it reads on to the line's end.
			go func() { _, _ = c.Write([]byte(head + body)) }()
			lines, exit, err := readAnswer(bufio.NewReader(c), c, 7, answerWithin)
			text := strings.Join(lines, "\n")
			refused := exit == errcode.ExitBadInput && strings.Contains(text, `"INVALID_INPUT"`) && strings.Contains(text, "limit of") ||
				exit == errcode.ExitUnavailable && strings.Contains(text, `"SERVICE_UNAVAILABLE"`)
			if err != nil || !refused {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("connection %d: exit %d, %v: %.300s", i, exit, err, text))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// The lines are still held open: a normal call gets its answer.
	if _, exit, err := callWithin(sock, `{"id":1,"args":["list","--json"]}`, 1, answerWithin); err != nil || exit != 0 {
		problems = append(problems, fmt.Sprintf("a call beside the held lines: exit %d, %v", exit, err))
	}
	close(sampling)
	<-sampled
	if grew := peak - before; grew > 64<<20 {
		problems = append(problems, fmt.Sprintf("the service grew from %d MiB to %d MiB", before>>20, peak>>20))
	}
	for _, c := range held {
		_ = c.Close()
	}
	if len(problems) > 0 {
		t.Fatalf("%s\nservice log:\n%s", strings.Join(problems, "\n"), p.stderr)
	}
	t.Logf("RSS %d MiB before, peak %d MiB", before>>20, peak>>20)
}

// servicePID asks the service on sock for its process ID (`subagents dev`
// execs the full build, so the harness's process is the service).
func servicePID(t *testing.T, sock string) int {
	t.Helper()
	lines, exit, err := callWithin(sock, `{"id":1,"args":["service"]}`, 1, answerWithin)
	var info subcli.ServiceInfo
	if err != nil || exit != 0 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &info) != nil || info.PID == 0 {
		t.Fatalf("service: exit %d, %v: %q", exit, err, lines)
	}
	return info.PID
}

// callWithin sends one request line on a new connection to sock and reads
// request id's answer; an answer that does not come within d is an error,
// not a hang.
func callWithin(sock, line string, id int64, d time.Duration) ([]string, int, error) {
	c, err := net.DialTimeout("unix", sock, d)
	if err != nil {
		return nil, -1, err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetWriteDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return nil, -1, err
	}
	return readAnswer(bufio.NewReaderSize(c, 1<<20), c, id, d)
}

// errRefused is readAnswer's error for a connection the service refused:
// its one line, under ID 0, says why and that a later call may succeed.
var errRefused = errors.New("the service refused the connection")

// readAnswer reads replies until request id's exit, or the refusal of the
// connection (errRefused, with its line and exit code).
func readAnswer(r *bufio.Reader, c net.Conn, id int64, d time.Duration) (lines []string, exit int, err error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	for {
		b, err := r.ReadBytes('\n')
		if err != nil {
			return lines, -1, fmt.Errorf("reading request %d's answer: %w", id, err)
		}
		var rep subcli.ServeReply
		if err := json.Unmarshal(b, &rep); err != nil {
			return lines, -1, fmt.Errorf("reply is not JSON: %q", b)
		}
		if rep.ID == 0 && rep.Exit != nil && id != 0 {
			if rep.Line != nil {
				lines = append(lines, *rep.Line)
			}
			return lines, *rep.Exit, fmt.Errorf("%w: %s", errRefused, rep.Error)
		}
		if rep.ID != id {
			continue
		}
		if rep.Line != nil {
			lines = append(lines, *rep.Line)
		}
		if rep.Exit != nil {
			return lines, *rep.Exit, nil
		}
	}
}

// vmRSS is pid's resident memory in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	rss, err := readVmRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return rss
}

func readVmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
