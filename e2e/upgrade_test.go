package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/internal/version"
	"github.com/durable-pi/subagents/workflows"
)

// nextReleaseNumber is the upgrade test's release N+1: this one with its
// last number one up.
func nextReleaseNumber(t *testing.T) string {
	t.Helper()
	parts := strings.Split(version.Version, ".")
	n, err := strconv.Atoi(parts[len(parts)-1])
	if err != nil {
		t.Fatalf("release %q does not end in a number", version.Version)
	}
	parts[len(parts)-1] = strconv.Itoa(n + 1)
	return strings.Join(parts, ".")
}

// TestUpgradeKeepsRunningWork (issue [install]): a delegation started under
// release N finishes under N+1, exactly once. A pi user installs N from a
// registry, delegates a long task and closes pi while it runs; then
// installs N+1 (`pi update`), a build of this tree with the next release's
// number and a changed workflow step (-tags upgradeprobe, guarded with
// workflow.GetVersion). The next pi, N+1's extension, finds N's service
// running, stops it at a safe point and starts N+1's; the child goes on
// from its session under N+1, whose changed step runs at the turn's end,
// and the result reaches the parent's session once.
func TestUpgradeKeepsRunningWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	next := nextReleaseNumber(t)
	current := distPackages(t)
	upgrade := nextRelease.build(t, "-version", next, "-tags", "upgradeprobe")
	reg := startRegistry(t, e)
	reg.publishRelease(t, e, current)

	w := e.newLocalWorld()
	e.parentEnvExtra = append(e.parentEnvExtra, append(reg.env(), "PATH="+withoutGo(e), "SUBAGENTS_BIN=")...)
	env := append(append(os.Environ(), e.parentEnv()...), e.parentEnvExtra...)
	e.piCommand(env, "install", "npm:@durable-pi/subagents")

	// The child works (a command that runs for two minutes) until the
	// upgrade stops it; its session's next run, under N+1, finalizes.
	const answer = "upgrade: 12 files migrated"
	started := filepath.Join(e.workDir, "started.txt")
	e.model.Script("c-up", bashStep("echo go > started.txt; sleep 120"), finalizeStep(answer))
	e.model.Script("parent-up", call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "migrate", "prompt": "[[script:c-up]] Migrate the files."}}}))
	e.model.Script("parent-up2", scriptedmodel.Step{Text: "Resumed.", Repeat: true})
	e.model.Script("parent-up3", scriptedmodel.Step{Text: "The migration is in.", Repeat: true})
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	installedPi := func(prompt string) *parentPi {
		var stderr syncBuffer
		p := e.spawnPi([]string{"--mode", "json", "--session", sessionFile, prompt}, &stderr)
		_ = p.stdin.Close()
		t.Cleanup(func() {
			p.kill()
			<-p.done
			if t.Failed() {
				t.Logf("pi events:\n%.20000s\nstderr:\n%s", p.events, stderr.String())
			}
		})
		return p
	}
	first := installedPi("[[script:parent-up]] Migrate everything.")
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	defer cancel()
	waitForFile(t, started)
	old := w.servicePid()
	if got := serviceRelease(t, old); got != version.Version {
		t.Fatalf("the service runs release %q, want %s", got, version.Version)
	}
	first.kill()
	<-first.done

	// The user installs N+1 while the child runs.
	reg.publishRelease(t, e, upgrade)
	if got := strings.TrimSpace(string(reg.npm(t, e, e.workDir, "view", "@durable-pi/subagents", "version"))); got != next {
		t.Fatalf("the registry's latest release is %q after publishing %s", got, next)
	}
	// The tests keep pi offline (PI_OFFLINE=1), where pi update leaves
	// every package as it is: the registry here is the machine's own.
	e.piCommand(append(env, "PI_OFFLINE=0"), "update", "npm:@durable-pi/subagents")
	if got := installedRelease(t, e.agentDir, w.home); got != next {
		t.Fatalf("after pi update the installed extension is release %q, want %s", got, next)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(w.dataDir, "service.log"))
			t.Logf("service.log:\n%.8000s", b)
		}
	})
	installedPi("[[script:parent-up2]] Go on.").wait(t)
	if syscall.Kill(old, 0) == nil {
		t.Fatalf("release %s's service (pid %d) still runs after a pi of %s started", version.Version, old, next)
	}
	now := w.servicePid()
	if got := serviceRelease(t, now); now == 0 || got != next {
		t.Fatalf("after the upgrade the service (pid %d) runs release %q, want %s", now, got, next)
	}

	// The delegation finishes under N+1: its session's changed step ran.
	c := dialWithKeyOf(t, w.address, w.dataDir)
	defer c.Close()
	probe := waitForProbe(ctx, t, c)
	if want := next + " completed"; probe != want {
		t.Fatalf("the session's turn ended with the probe's memo %q, want %q (release N+1's step)", probe, want)
	}
	if n := len(e.model.RequestsFor("c-up")); n != 2 {
		t.Fatalf("the child's model was asked %d times: want twice, the run the upgrade stopped and its next run, which goes on from it", n)
	}

	// The parent's session gets the result once: here, or already in the
	// resumed pi above.
	installedPi("[[script:parent-up3]] Anything new?").wait(t)
	if n := e.resultCount("parent-up3", answer); n != 1 {
		t.Fatalf("the parent's session got the result %d times, want once", n)
	}
}

// serviceRelease is the release of the service with pid: the version of
// the platform package its binary came from ("" for none).
func serviceRelease(t *testing.T, pid int) string {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	v, err := packageVersion(filepath.Join(filepath.Dir(exe), "..", "package.json"))
	if err != nil {
		t.Fatalf("the service runs %s, not an installed package's binary: %v", exe, err)
	}
	return v
}

// packageVersion is the version an npm package's package.json gives.
func packageVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return pkg.Version, nil
}

// waitForProbe waits until a workflow of the service has completed with the
// upgrade probe's memo and returns the memo; it fails if a workflow ran the
// probe's step twice or the time runs out.
func waitForProbe(ctx context.Context, t *testing.T, c sdkclient.Client) string {
	t.Helper()
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"})
		if err == nil {
			for _, ex := range resp.GetExecutions() {
				p, ok := ex.GetMemo().GetFields()[workflows.UpgradeProbeMemo]
				if !ok || ex.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
					continue
				}
				var memo string
				if err := converter.GetDefaultDataConverter().FromPayload(p, &memo); err != nil {
					t.Fatal(err)
				}
				if n := probeMarkers(ctx, t, c, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()); n != 1 {
					t.Fatalf("workflow %s recorded the probe's version marker %d times, want once", ex.GetExecution().GetWorkflowId(), n)
				}
				return memo
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no workflow completed with release N+1's step: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probeMarkers counts the version markers of the probe's change in a
// workflow's history.
func probeMarkers(ctx context.Context, t *testing.T, c sdkclient.Client, id, run string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && strings.Contains(m.GetDetails()["change-id"].String(), workflows.UpgradeProbeChange) {
			n++
		}
	}
	return n
}

// installedRelease is the version of the extension package pi installed
// under one of roots ("" for none).
func installedRelease(t *testing.T, roots ...string) string {
	t.Helper()
	found := ""
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if found != "" {
				return filepath.SkipAll
			}
			if err != nil {
				return nil
			}
			if strings.HasSuffix(filepath.ToSlash(path), "node_modules/@durable-pi/subagents/package.json") {
				if v, err := packageVersion(path); err == nil {
					found = v
				}
			}
			return nil
		})
	}
	return found
}
