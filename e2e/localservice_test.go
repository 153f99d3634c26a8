package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// localWorld is a new user's machine: a HOME of its own with nothing in
// it, nothing running, and a free address for the service (and its UI
// beside it), which the parent pi names.
type localWorld struct {
	home, dataDir, address string
}

func (e *env) newLocalWorld() localWorld {
	e.t.Helper()
	home := e.t.TempDir()
	port := freePortWithUI()
	w := localWorld{home: home, dataDir: filepath.Join(home, ".pi", "subagents"), address: fmt.Sprintf("127.0.0.1:%d", port)}
	e.parentEnvExtra = []string{
		"HOME=" + home,
		"TEMPORAL_ADDRESS=" + w.address,
		// Empty: the defaults of a new user (the data dir under HOME, the
		// default task queue).
		"SUBAGENTS_DATA_DIR=",
		"SUBAGENTS_TASK_QUEUE=",
	}
	e.t.Cleanup(func() { w.stopService(e.t) })
	return w
}

// freePortWithUI is a free port whose +1000 (where `subagents dev` puts
// its UI) is free too.
func freePortWithUI() int {
	for {
		p := freePort()
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1000))
		if err == nil {
			_ = ln.Close()
			return p
		}
	}
}

// servicePid is the pid the service's lock file names, or 0.
func (w localWorld) servicePid() int {
	b, err := os.ReadFile(filepath.Join(w.dataDir, "dev.lock"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// devProcesses lists the pids of `subagents dev` processes for this data dir.
func (w localWorld) devProcesses() []int {
	var pids []int
	eachProcess("cmdline", func(pid int, b []byte) {
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) > 1 && args[1] == "dev" && strings.Contains(string(b), w.dataDir) {
			pids = append(pids, pid)
		}
	})
	return pids
}

// eachProcess calls fn with every process's pid and its /proc/PID/file.
func eachProcess(file string, fn func(pid int, content []byte)) {
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), file)); err == nil {
			fn(pid, b)
		}
	}
}

// stopService ends the service the test's parents started, by the pid its
// lock names (the test started it, through the extension).
func (w localWorld) stopService(t *testing.T) {
	for _, pid := range w.devProcesses() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(testTimeout)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the service (pid %d) did not stop after SIGTERM", pid)
		}
		// After a SIGKILL its reaper ends the children a moment later:
		// the test's folders are removed after that.
		waitTreeGone(t, pid)
	}
}

// TestLocalServiceStartsItself is a new user's first delegation: nothing
// runs, HOME is new, and a parent pi loading the extension calls
// `subagent`. The extension starts `subagents dev` itself, detached, and
// the child's answer reaches the parent's model. The service outlives the
// parent, answers on a socket only its user can open, and a second parent
// uses the same service.
func TestLocalServiceStartsItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.newLocalWorld()
	if _, err := os.Stat(w.dataDir); err == nil {
		t.Fatal("the data dir exists before the first delegation")
	}
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), e.scriptDelegation("auto", "answered by a service that started itself"))
	p.wait(t)
	e.checkDelegation("auto", "answered by a service that started itself")

	if left := processGroup(p.cmd.Process.Pid); len(left) > 0 {
		t.Fatalf("processes of the parent's group outlived it (zombies included): %v", left)
	}
	pid := w.servicePid()
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("no service runs after the parent exited (lock names pid %d)", pid)
	}
	if pgid, _ := syscall.Getpgid(pid); pgid == p.cmd.Process.Pid {
		t.Fatalf("the service is in the parent's process group %d: it would die with the parent's terminal", pgid)
	}
	sock, err := os.Stat(filepath.Join(w.dataDir, "subagents.sock"))
	if err != nil || sock.Mode()&os.ModeSocket == 0 || sock.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v, want a socket with mode 0600", sock.Mode(), err)
	}
	if log, err := os.ReadFile(filepath.Join(w.dataDir, "service.log")); err != nil || !strings.Contains(string(log), "worker polling task queue") {
		t.Fatalf("service.log: %v\n%s", err, log)
	}

	firstListed := listedAt(t, filepath.Join(w.dataDir, "cache", "profiles.json"), e.workDir)
	p2 := e.startParent("json", filepath.Join(t.TempDir(), "parent2.jsonl"), e.scriptDelegation("again", "the same service again"))
	p2.wait(t)
	e.checkDelegation("again", "the same service again")
	// The first parent's service listed the folder's profiles; the second
	// parent's first request offers the primary profiles' tools from that
	// listing, registered while pi loaded the extension.
	if tools := toolNames(e.model.RequestsFor("parent-again")[0].Parsed); !slices.Contains(tools, "finder") || !slices.Contains(tools, "librarian") {
		t.Fatalf("the second parent's first request offers tools %v, want the primary tools finder and librarian", tools)
	}
	if again := w.servicePid(); again != pid || len(w.devProcesses()) != 1 {
		t.Fatalf("the second parent started another service: pid %d then %d, dev processes %v", pid, again, w.devProcesses())
	}
	// Nothing the listing was read from changed: the second parent did
	// not ask for it again.
	cache := filepath.Join(w.dataDir, "cache", "profiles.json")
	if listedAt(t, cache, e.workDir) != firstListed {
		t.Fatal("the second parent listed the profiles again, though no folder or file of them changed")
	}

	// A primary profile added to the project, the user's own (trusted, as
	// /trust saves it): the next parent's listing at start sees the
	// change, and its delegation's next request offers it.
	e.trustWithPi(e.workDir)
	if err := os.MkdirAll(filepath.Join(e.workDir, ".pi", "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.workDir, ".pi", "agents", "surveyor.md"), []byte("---\nname: surveyor\ndescription: Surveys\nprimary: true\n---\nSurvey.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p3 := e.startParent("json", filepath.Join(t.TempDir(), "parent3.jsonl"), e.scriptDelegation("third", "a third answer"))
	p3.wait(t)
	e.checkDelegation("third", "a third answer")
	if tools := toolNames(e.model.RequestsFor("parent-third")[1].Parsed); !slices.Contains(tools, "surveyor") {
		t.Fatalf("after a primary profile was added, the parent's requests offer %v, want surveyor among them", tools)
	}
	if listedAt(t, cache, e.workDir) == firstListed {
		t.Fatal("a changed folder of profiles was not listed again")
	}
}

// listedAt is when the extension last remembered cwd's profile listing
// in the data dir's cache.
func listedAt(t *testing.T, cache, cwd string) float64 {
	t.Helper()
	b, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]struct {
		At float64 `json:"at"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c[cwd].At
}

// TestTwoParentsStartOneService: two parents delegate at the same moment
// with nothing running; one service starts, and both get their answers.
func TestTwoParentsStartOneService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.newLocalWorld()
	var parents []*parentPi
	var prompts []string
	for i := range 2 {
		prompts = append(prompts, e.scriptDelegation(fmt.Sprintf("twin%d", i), fmt.Sprintf("twin %d answered", i)))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := e.startParent("json", filepath.Join(t.TempDir(), fmt.Sprintf("twin%d.jsonl", i)), prompts[i])
			mu.Lock()
			parents = append(parents, p)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, p := range parents {
		p.wait(t)
	}
	for i := range 2 {
		e.checkDelegation(fmt.Sprintf("twin%d", i), fmt.Sprintf("twin %d answered", i))
	}
	if procs := w.devProcesses(); len(procs) != 1 || procs[0] != w.servicePid() {
		t.Fatalf("dev processes %v, lock names %d: want exactly one service", procs, w.servicePid())
	}
}

// scriptDelegation scripts a parent that calls `subagent` once (scout) and a
// child that finalizes with answer; it returns the parent's prompt.
func (e *env) scriptDelegation(name, answer string) string {
	e.model.Script("c-"+name, finalizeStep(answer))
	e.model.Script("parent-"+name,
		call("subagent", map[string]any{"agent": "scout", "task": "[[script:c-" + name + "]] Look around."}),
		scriptedmodel.Step{Text: "Done."},
	)
	return "[[script:parent-" + name + "]] Delegate a look around."
}

// checkDelegation checks that the parent of scriptDelegation(name) got
// answer as its tool result, and only there: a delegation that started the
// service is not also found as an earlier one and delivered again.
func (e *env) checkDelegation(name, answer string) {
	e.t.Helper()
	reqs := e.model.RequestsFor("parent-" + name)
	if got := toolResultText(e.t, reqs, 1); !strings.Contains(got, answer) {
		e.t.Fatalf("the parent %s's model got:\n%s", name, got)
	}
	n := 0
	for _, m := range reqs[len(reqs)-1].Parsed.Messages {
		n += strings.Count(m.Text(), answer)
	}
	if len(reqs) != 2 || n != 1 {
		for _, m := range reqs[len(reqs)-1].Parsed.Messages {
			e.t.Logf("%s: %.300s", m.Role, m.Text())
		}
		e.t.Fatalf("the parent %s made %d model calls, its last one holds the answer %d times (want 2 calls, once)", name, len(reqs), n)
	}
}

// toolNames are the tools a model request offers.
func toolNames(r scriptedmodel.ChatRequest) []string {
	var names []string
	for _, tool := range r.Tools {
		names = append(names, tool.Function.Name)
	}
	return names
}

// processGroup lists the processes of group pgid, with their state
// (Z for a zombie nobody reaped).
func processGroup(pgid int) []string {
	var out []string
	eachProcess("stat", func(pid int, b []byte) {
		comm, f := statFields(b)
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			out = append(out, fmt.Sprintf("%d %s %s", pid, f[0], comm))
		}
	})
	return out
}

// statFields splits a /proc/PID/stat into the command name and the fields
// after it (state ppid pgrp ...); the name may hold spaces and parentheses.
func statFields(stat []byte) (comm string, fields []string) {
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", nil
	}
	return s[open+1 : end], strings.Fields(s[end+1:])
}

// TestLocalServiceCannotStart: with nothing running, a delegation that
// cannot start the service says what to do, as the tool's result.
func TestLocalServiceCannotStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"no binary", []string{"SUBAGENTS_BIN=/nonexistent/subagents"}, "make build"},
		{"auto-start off", []string{"SUBAGENTS_AUTOSTART=0"}, "start it with `subagents dev`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			w := e.newLocalWorld()
			e.parentEnvExtra = append(e.parentEnvExtra, tt.env...)
			p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), e.scriptDelegation("none", "never answered"))
			p.wait(t)
			got := toolResultText(t, e.model.RequestsFor("parent-none"), 1)
			if !strings.Contains(got, tt.want) {
				t.Fatalf("the parent's model got:\n%s", got)
			}
			if procs := w.devProcesses(); len(procs) != 0 {
				t.Fatalf("a service started: %v", procs)
			}
		})
	}
}

// TestRemoteSettingsUseServe: a Temporal named by a profile of temporal.toml
// (as a cloud one is) is remote: the extension reaches it through
// `subagents serve`, and never starts a local service, even though nothing
// answers on the default local address.
func TestRemoteSettingsUseServe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.newLocalWorld()
	e.startWorker(shared.client)
	toml := filepath.Join(t.TempDir(), "temporal.toml")
	conf := fmt.Sprintf("[profile.team]\naddress = %q\nnamespace = %q\n", shared.server.FrontendAddress(), shared.server.Namespace())
	if err := os.WriteFile(toml, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	e.parentEnvExtra = append(e.parentEnvExtra, "TEMPORAL_ADDRESS=", "TEMPORAL_CONFIG_FILE="+toml, "TEMPORAL_PROFILE=team",
		"SUBAGENTS_TASK_QUEUE="+e.taskQueue)
	p := e.startParent("json", filepath.Join(t.TempDir(), "parent.jsonl"), e.scriptDelegation("remote", "answered through serve"))
	p.wait(t)
	e.checkDelegation("remote", "answered through serve")
	if procs := w.devProcesses(); len(procs) != 0 {
		t.Fatalf("a local service started for a remote Temporal: %v", procs)
	}
}
