package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// devCLI starts `subagents dev` (in memory, no UI unless asked) with extra
// flags and returns it with a cli that talks to it.
func (e *env) devCLI(extra ...string) (*devProcess, *cli, int) {
	e.t.Helper()
	port := freePort()
	args := append([]string{"--ephemeral", "--port", strconv.Itoa(port), "--data-dir", e.dataDir, "--task-queue", e.taskQueue}, extra...)
	p := e.startDev(args...)
	p.waitReady(e.t)
	c := &cli{e: e, ids: map[string]string{}, args: []string{"--address", fmt.Sprintf("127.0.0.1:%d", port), "--task-queue", e.taskQueue}}
	return p, c, port
}

// metricValue finds one sample line of a Prometheus text page: the series
// name and labels that must all be present.
func metricValue(page, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, err == nil
	}
	return 0, false
}

// TestDevMetricsAndJSONLogs: after a task that needed one corrective
// feedback, the worker's /metrics holds the SDK's series and ours, and its
// JSON log lines name the workflow and the session.
func TestDevMetricsAndJSONLogs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.model.Script("retry",
		scriptedmodel.Step{Text: "It is in main.go, I think."},
		finalizeStep("main.go:7 starts the server"))
	metricsPort := freePort()
	p, c, _ := e.devCLI("--headless", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--log-format", "json")
	if !strings.Contains(p.stdout.String(), fmt.Sprintf("Metrics:           http://127.0.0.1:%d/metrics", metricsPort)) {
		t.Fatalf("banner without the metrics address:\n%s", p.stdout)
	}
	env, out := c.json(0, "", "run", "--model", scriptedmodel.ModelRef, "--agent", "scout", "[[script:retry]] Where does the server start?")
	if env.Items[0].Attempts != 2 || env.Items[0].Output != "main.go:7 starts the server" {
		t.Fatalf("run: %s", out)
	}

	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"subagents_tasks_started_total", []string{`agent="scout"`}, 1},
		{"subagents_tasks_finished_total", []string{`agent="scout"`, `status="completed"`}, 1},
		{"subagents_finalize_retries_total", []string{`agent="scout"`}, 1},
		{"subagents_child_run_seconds_count", []string{`agent="scout"`, `outcome="completed"`}, 2},
		{"subagents_child_tokens_total", []string{`agent="scout"`, `kind="input"`}, 200},
		{"subagents_child_tokens_total", []string{`agent="scout"`, `kind="output"`}, 40},
	}
	var page string
	deadline := time.Now().Add(testTimeout)
	for {
		page = httpGet(t, url)
		missing := ""
		for _, w := range want {
			if v, ok := metricValue(page, w.name, w.labels...); !ok || v != w.value {
				missing = fmt.Sprintf("%s%v = %v (found %v)", w.name, w.labels, w.value, ok)
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics: want %s\n%s", missing, grepLines(page, "subagents_"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if cost, ok := metricValue(page, "subagents_child_cost_usd_total", `agent="scout"`); !ok || cost <= 0 {
		t.Fatalf("cost series: %v %v", cost, ok)
	}
	// subagents dev starts a task's child as it resolves the delegation:
	// the first run of its kind takes that child (no warm one waited), and
	// its corrective run goes on in the same process, asking nothing of
	// the pool.
	hits, okHits := metricValue(page, "subagents_warm_pool_hits_total")
	misses, okMisses := metricValue(page, "subagents_warm_pool_misses_total")
	started, okStarted := metricValue(page, "subagents_early_start_children_total")
	taken, okTaken := metricValue(page, "subagents_early_start_taken_total")
	if _, okWarm := metricValue(page, "subagents_warm_pool_children"); !okHits || !okMisses || !okWarm || !okStarted || !okTaken ||
		hits+misses != 0 || started != 1 || taken != 1 {
		t.Fatalf("warm pool series: hits %v misses %v, early started %v taken %v\n%s", hits, misses, started, taken, grepLines(page, "subagents_"))
	}
	t.Logf("our series after the run:\n%s", grepLines(page, "subagents_"))
	// The SDK's own series come through the same endpoint.
	for _, sdk := range []string{"temporal_workflow_task_execution_latency", "temporal_activity_execution_latency"} {
		if !strings.Contains(page, sdk) {
			t.Errorf("no SDK series %s on /metrics", sdk)
		}
	}

	p.stop(t)
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a log line is not JSON: %q", sc.Text())
		}
		msg, _ := line["msg"].(string)
		switch msg {
		case "child run started", "child run ended", "turn started", "turn ended":
			if line["WorkflowID"] == nil || line["session"] == nil || line["WorkflowID"] != line["session"] {
				t.Fatalf("%q without the workflow and session IDs: %s", msg, sc.Text())
			}
			seen[msg] = true
		}
	}
	if len(seen) != 4 {
		t.Fatalf("log lines seen: %v\n%s", seen, p.stderr)
	}
}

func grepLines(s, sub string) string {
	var out []string
	re := regexp.MustCompile(regexp.QuoteMeta(sub))
	for _, l := range strings.Split(s, "\n") {
		if re.MatchString(l) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDemo runs `subagents demo` as a newcomer would (without staying up):
// it says the model is scripted, kills a worker mid-run, and every task
// completes by continuing its pi session on the next worker.
func TestDemo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, out, errOut := runSubagents(t, e.cliEnv(), "demo", "--port", strconv.Itoa(freePort()), "--ui-port", strconv.Itoa(freePort()), "--stay=false")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errOut)
	}
	// The tasks' lines open and close the message: a summary shows a
	// failure's first line, a long log its end.
	fail := func(format string, a ...any) {
		t.Helper()
		tasks := regexp.MustCompile(`(?m)^[✓✕] .*$`).FindAllString(out, -1)
		t.Fatalf("%s tasks: %q\n%s\nthe demo's stderr:\n%s\nits tasks: %q", fmt.Sprintf(format, a...), tasks, out, errOut, tasks)
	}
	for _, want := range []string{
		"the model is SCRIPTED", "worker 1 KILLED (SIGKILL", "worker 2:",
		"✓ find-heartbeat: completed", "✓ list-profiles: completed",
		"usage: ", "delegation: http://127.0.0.1:",
	} {
		if !strings.Contains(out, want) {
			fail("demo output lacks %q:", want)
		}
	}
	// Every task was running when the worker died: each continues its pi
	// session on a later attempt (2, or more if the machine was so loaded
	// that a retry missed its heartbeats too).
	continued := regexp.MustCompile(`(?m)^✓ (map-layout|find-heartbeat|list-profiles): completed \(continued its pi session on attempt [2-9] after the kill\)$`)
	if n := len(continued.FindAllString(out, -1)); n != 3 {
		fail("%d of the 3 tasks continued their pi session after the kill:", n)
	}
}

// TestPlacementByHost: two workers on two hosts share the task queue; a
// delegation for host alpha runs its child where alpha's files are, one for
// beta on beta, and a transcript is read on the host that has the file.
func TestPlacementByHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("place", finalizeStep("ran here"))
	dataDirs := map[string]string{}
	for _, host := range []string{"alpha", "beta"} {
		cfg := e.workerConfig()
		cfg.Host, cfg.DataDir = host, filepath.Join(t.TempDir(), host)
		dataDirs[host] = cfg.DataDir
		e.startWorkerWith(shared.client, cfg)
	}
	c := e.cli()
	for _, host := range []string{"alpha", "beta", "alpha"} {
		env, out := c.json(0, "", "run", "--host", host, "--model", scriptedmodel.ModelRef, "[[script:place]] Where do you run?")
		it := env.Items[0]
		if it.Output != "ran here" {
			t.Fatalf("run on %s: %s", host, out)
		}
		other := map[string]string{"alpha": "beta", "beta": "alpha"}[host]
		if !strings.HasPrefix(it.SessionFile, dataDirs[host]) {
			t.Fatalf("the task for %s ran elsewhere: session file %s", host, it.SessionFile)
		}
		if _, err := os.Stat(strings.Replace(it.SessionFile, dataDirs[host], dataDirs[other], 1)); err == nil {
			t.Fatalf("%s's worker also has the session file", other)
		}
		tr, _ := c.json(0, "", "transcript", it.TaskID)
		if !strings.Contains(tr.Text, "Where do you run?") {
			t.Fatalf("transcript of the %s task, read on %s: %q", host, host, tr.Text)
		}
	}
	if code, _, stderr := c.run("", "run", "--host", "a@b", "x"); code != 2 || !strings.Contains(stderr, "cannot name a task queue") {
		t.Fatalf("a host with '@': exit %d, %s", code, stderr)
	}
}
