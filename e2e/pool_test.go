package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/worker"
)

// TestWarmPool runs real pi children through a worker's warm pool: a task
// like an earlier one runs on a child started before it came, with the same
// result and session file as a cold one; a task with another folder never
// takes it; a finalize retry goes on in its child's process; a warm child
// killed while idle costs nothing; the worker's stop, or its SIGKILL, leaves
// no pi behind.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.workerConfig()
	cfg.WarmPool = 3
	w, err := worker.New(shared.client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	t.Cleanup(stop)

	step := finalizeStep("the answer")
	step.Repeat = true
	e.model.Script("pool", step)
	run := func(in api.SessionInput) api.TurnResult {
		t.Helper()
		var res api.SessionResult
		if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
			t.Fatalf("session: %v", err)
		}
		if res.LastTurn == nil || res.LastTurn.Error != nil {
			t.Fatalf("turn: %+v", res.LastTurn)
		}
		return *res.LastTurn
	}
	warmAtLeast := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); w.PoolStats().Warm < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("pool: %+v, want %d warm", w.PoolStats(), n)
			}
		}
	}

	cold := run(e.sessionInput("[[script:pool]] Answer."))
	if cold.Result.Warm {
		t.Fatal("the first task of its kind ran warm")
	}
	warmAtLeast(2)
	warm := run(e.sessionInput("[[script:pool]] Answer."))
	if !warm.Result.Warm {
		t.Fatalf("the second task ran cold: %+v", w.PoolStats())
	}
	if warm.Result.Output != cold.Result.Output || warm.Result.ExitCode != 0 || warm.Result.Finalize == nil ||
		warm.Result.Finalize.Status != "SUCCESS" || warm.ChildRuns != 1 || warm.Result.Usage != cold.Result.Usage ||
		warm.Result.EventCount != cold.Result.EventCount || timelineTypes(warm.Result) != timelineTypes(cold.Result) {
		t.Fatalf("warm %+v\ncold %+v", warm.Result, cold.Result)
	}
	if got, want := entryKinds(t, warm.Result.SessionFile), entryKinds(t, cold.Result.SessionFile); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("session file entries: warm %v, cold %v", got, want)
	}
	// The warm child wrote its slot, linked from the session file; once it
	// has exited, the session file is an ordinary file, and no slot is left.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := os.Lstat(warm.Result.SessionFile)
		slots, _ := filepath.Glob(filepath.Join(e.dataDir, "sessions", "warm", "*.jsonl"))
		if err == nil && info.Mode().IsRegular() && len(slots) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session file %s: %v %v; slots left %v", warm.Result.SessionFile, info, err, slots)
		}
	}

	// Another folder is another key: never a child started in the first.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := e.sessionInput("[[script:pool]] Answer.")
	elsewhere.Cwd = other
	if r := run(elsewhere); r.Result.Warm {
		t.Fatal("a task in another folder took a child started for the first")
	}

	// A child that forgets subagent_finalize gets its corrective feedback
	// on the same session file, pooled too.
	warmAtLeast(2)
	e.model.Script("pool-forgot", scriptedmodel.Step{Text: "Forgot to finalize."}, finalizeStep("fixed"))
	resumed := w.PoolStats().Resumed
	forgot := run(e.sessionInput("[[script:pool-forgot]] Answer."))
	if forgot.Result.Output != "fixed" || forgot.ChildRuns != 2 || !forgot.Result.Warm {
		t.Fatalf("finalize retry: attempts %d warm %v output %q", forgot.ChildRuns, forgot.Result.Warm, forgot.Result.Output)
	}
	if got := w.PoolStats().Resumed; got != resumed+1 {
		t.Fatalf("the corrective run did not go on in its child's process: resumed %d, was %d", got, resumed)
	}

	// Kill every idle child: the next task still succeeds (cold, or on a
	// child started since).
	warmAtLeast(1)
	before := warmChildren(t, e)
	if len(before) == 0 {
		t.Fatal("no warm child among this process's descendants")
	}
	for _, pid := range before {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if r := run(e.sessionInput("[[script:pool]] Answer.")); r.Result.Output != "the answer" {
		t.Fatalf("after the kill: %+v", r.Result)
	}

	warmAtLeast(1)
	stop()
	for deadline := time.Now().Add(10 * time.Second); len(warmChildren(t, e)) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pi processes left after the worker stopped: %v", warmChildren(t, e))
		}
	}

	// A worker process SIGKILLed with warm children: the kernel ends them
	// (they die with the thread that started them).
	proc := e.startWorkerProcess()
	run(e.sessionInput("[[script:pool]] Answer."))
	var orphans []int
	for deadline := time.Now().Add(30 * time.Second); len(orphans) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker process started no warm child")
		}
		orphans = piProcessesOf(e.agentDir)
	}
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(piProcessesOf(e.agentDir)) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("warm children of the killed worker still run: %v", piProcessesOf(e.agentDir))
		}
	}
}

// entryKinds is a session file's entries by type (and a message's role):
// what a pooled and a cold run must both have written.
func entryKinds(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var kinds []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Type    string `json:"type"`
			Message struct {
				Role string `json:"role"`
			} `json:"message"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		kinds = append(kinds, strings.TrimSuffix(e.Type+":"+e.Message.Role, ":"))
	}
	return kinds
}

// warmChildren are the pi processes of this test (its pi config dir in
// their environment) that this test process started (startedHere): the
// pool's children, idle or running. pi renames itself ("pi") once started, so its
// command line does not say RPC mode.
func warmChildren(t *testing.T, e *env) []int {
	t.Helper()
	var pids []int
	for _, pid := range piProcessesOf(e.agentDir) {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		if _, fields := statFields(stat); len(fields) > 1 && startedHere(fields[1]) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// piProcessesOf are the pi processes whose environment names agentDir
// (a test's pi config dir, which every child of its workers gets), whoever
// their parent is now.
func piProcessesOf(agentDir string) []int {
	var pids []int
	eachProcess("environ", func(pid int, environ []byte) {
		if !strings.Contains(string(environ), "PI_CODING_AGENT_DIR="+agentDir+"\x00") {
			return
		}
		comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if c := strings.TrimSpace(string(comm)); err == nil && (c == "pi" || c == "node") {
			pids = append(pids, pid)
		}
	})
	return pids
}

// timelineTypes is a run's event timeline as its event types.
func timelineTypes(r api.RunPiResult) string {
	var types []string
	for _, ev := range r.Timeline {
		types = append(types, ev.Type)
	}
	return strings.Join(types, " ")
}
