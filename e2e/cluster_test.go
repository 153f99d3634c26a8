package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"

	"github.com/durable-pi/subagents/internal/pgcluster"
)

// clusterOutage is how long TestCluster keeps every Temporal service down:
// [cluster]'s target is a 30 s outage in the middle of a 6-task delegation.
var clusterOutage = flag.Duration("cluster-outage", 30*time.Second, "how long TestCluster keeps the Temporal services down")

// clusterTasks is the size of the cluster test's delegations.
const clusterTasks = 6

// TestCluster is the operator's path, end to end: PostgreSQL, the schema set
// up by Temporal's SQL tool, the four services as processes of their own
// (the server built from the module this project requires), `subagents
// setup`, and two workers on two hosts. Then a 6-task delegation through a
// worker SIGKILLed mid-run, and one through the whole cluster SIGKILLed
// mid-run and started again after clusterOutage: each task completes
// exactly once, and through the outage no child is stopped and no model
// call is made twice.
func TestCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := pgcluster.Start(ctx, clusterTools(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	defer func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", cl.Logs())
		}
	}()

	// The schema job runs again harmlessly (an upgrade, a compose `up`), and
	// the dynamic config the cluster runs with passes the server's check.
	if err := cl.SetUpSchema(ctx); err != nil {
		t.Fatalf("the schema steps again: %v", err)
	}
	if err := cl.ValidateDynamicConfig(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runSubagents(t, e.cliEnv(), "setup", "--address", cl.Address)
	if code != 0 || !strings.Contains(out, "is ready") {
		t.Fatalf("subagents setup: exit %d\n%s%s", code, out, stderr)
	}
	// Two hosts sharing one data dir, as the compose stack's workers share
	// a volume: a child whose worker died continues on either.
	workers := map[string]*exec.Cmd{}
	startWorker := func(host string) { workers[host] = e.startWorkerProcessAt(cl.Address, "--host", host) }
	startWorker("host-a")
	startWorker("host-b")
	c := &cli{e: e, ids: map[string]string{}, args: []string{"--address", cl.Address, "--task-queue", e.taskQueue}}
	history := func(id string) []*historypb.HistoryEvent {
		tc := e.dialAddress(cl.Address)
		defer tc.Close()
		return historyOf(t, tc, id)
	}

	// A worker host dies mid-run; its tasks go on when it is back.
	e.chaosRound(chaos{c: c, marker: fmt.Sprintf("worker-%d", time.Now().UnixNano()), tasks: clusterTasks, killAfter: 2 * time.Second,
		start: func() {},
		kill: func() {
			if err := workers["host-a"].Process.Kill(); err != nil {
				t.Fatal(err)
			}
		},
		restart: func() { startWorker("host-a") },
		history: history,
	})

	// The whole control plane dies mid-run and is down for clusterOutage;
	// the workers and their children stay up.
	began := time.Now()
	// A marker no command line of this test holds (its flags do not).
	marker := fmt.Sprintf("down-%d", began.UnixNano())
	done := e.chaosRound(chaos{c: c, marker: marker, tasks: clusterTasks, killAfter: time.Second,
		start: func() {},
		kill:  cl.KillServices,
		restart: func() {
			time.Sleep(*clusterOutage)
			if err := cl.StartServices(ctx); err != nil {
				t.Fatal(err)
			}
		},
		history: history,
	})
	repeated := 0
	for i := range clusterTasks {
		// Each task's script is two model calls: the tool, the finalize.
		repeated += len(e.model.RequestsFor(fmt.Sprintf("%s-%d", marker, i))) - 2
	}
	if repeated != 0 {
		t.Fatalf("%d model calls were made again after the outage", repeated)
	}
	var attempts []string
	for _, it := range done.Items {
		attempts = append(attempts, fmt.Sprintf("%d", it.RunAttempt))
	}
	reportChaos(t, fmt.Sprintf("### Temporal cluster down mid-delegation\n\n`make chaos` (%s): a Temporal cluster on PostgreSQL (four service processes, the server built from the module, as docs/cluster.md \"A cluster on PostgreSQL\" sets it up) with two `subagents worker` hosts. "+
		"A %d-task delegation of real pi children (each calls bash for 1.5 s, then finalizes) had every Temporal service SIGKILLed 1 s after its start and started again %s later; the workers stayed up. "+
		"All %d tasks completed once with their own result (one completed RunPi per session, one subagent_finalize per session file, one task-done signal each), in %s from the start. "+
		"Model calls repeated: %d; children restarted: 0 (every task's pi made its two scripted calls once; the attempts that reported each turn: %s). "+
		"The same test first SIGKILLs one worker host mid-delegation: all %d tasks completed once.",
		time.Now().UTC().Format("2006-01-02"), clusterTasks, *clusterOutage, clusterTasks, time.Since(began).Round(time.Second), repeated, strings.Join(attempts, ", "), clusterTasks))
}

// clusterBinaries are the Temporal server and SQL tool, built once per test
// binary.
var clusterBinaries struct {
	once  sync.Once
	dir   string
	tools pgcluster.Tools
	err   error
}

func clusterTools(t *testing.T) pgcluster.Tools {
	t.Helper()
	clusterBinaries.once.Do(func() {
		dir, err := os.MkdirTemp("", "subagents-e2e-temporal-")
		if err != nil {
			clusterBinaries.err = err
			return
		}
		clusterBinaries.dir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		clusterBinaries.tools, clusterBinaries.err = pgcluster.Build(ctx, "..", dir)
	})
	if clusterBinaries.err != nil {
		t.Fatal(clusterBinaries.err)
	}
	return clusterBinaries.tools
}
