package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The engine's floor: the least a delegation could cost if it were a
// Temporal workflow at all, measured on the same embedded server as the
// throughput table. Its workflows are registered here, in the bench only:
// they are no part of the product.
const (
	floorQueue           = "bench-floor"
	floorWorkflowName    = "BenchFloor"
	floorActivityName    = "BenchFloorActivity"
	floorRounds          = 3
	floorTasksPerRound   = 128
	floorConcurrency     = 16
	floorActivityTimeout = time.Minute // a no-op: a minute is only a bound on a stuck worker
)

// floorWorkflow is a workflow that does nothing (withActivity false) or
// runs one activity that returns at once, as a one-task delegation runs
// its child's turn.
func floorWorkflow(ctx workflow.Context, withActivity bool) error {
	if !withActivity {
		return nil
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: floorActivityTimeout})
	return workflow.ExecuteActivity(ctx, floorActivityName).Get(ctx, nil)
}

func floorActivity(context.Context) error { return nil }

// floorKind is one kind of run the floor measures, and its figures.
type floorKind struct {
	name string
	job  func(int) error
	rate []float64
	cpu  []float64
}

// engineFloor measures, in turn with this project's one-task stub
// delegations (delegate) at concurrency 16, the same count of Temporal's
// own least workflows on the server tc dials: one that does nothing, and
// one that runs one no-op activity. A delegation is at least one workflow
// with one activity (its child's turn), so the second bounds what any
// design that keeps a workflow per delegation can reach there.
func (b *bench) engineFloor(tc sdkclient.Client, delegate func(int) error) ([]floorKind, error) {
	w := sdkworker.New(tc, floorQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(floorWorkflow, workflow.RegisterOptions{Name: floorWorkflowName})
	w.RegisterActivityWithOptions(floorActivity, activity.RegisterOptions{Name: floorActivityName})
	if err := w.Start(); err != nil {
		return nil, err
	}
	defer w.Stop()
	floor := func(withActivity bool) func(int) error {
		return func(int) error {
			run, err := tc.ExecuteWorkflow(b.ctx, sdkclient.StartWorkflowOptions{ID: "bench-floor-" + uuid.NewString(), TaskQueue: floorQueue}, floorWorkflowName, withActivity)
			if err != nil {
				return err
			}
			return run.Get(b.ctx, nil)
		}
	}
	kinds := []floorKind{
		{name: "a workflow that does nothing", job: floor(false)},
		{name: "a workflow of one no-op activity", job: floor(true)},
		{name: "a one-task delegation of this project (stub child)", job: delegate},
	}
	for round := range floorRounds + 1 {
		for i := range kinds {
			k := &kinds[i]
			busy := machineBusy()
			wall, err := inFlight(floorTasksPerRound, floorConcurrency, k.job)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.name, err)
			}
			cpu := machineBusy() - busy
			// The server still writes the last runs' visibility records:
			// the next kind does not pay for them.
			time.Sleep(time.Second)
			if round == 0 { // warms up
				continue
			}
			k.rate = append(k.rate, float64(floorTasksPerRound)/wall.Seconds())
			k.cpu = append(k.cpu, float64(cpu.Microseconds())/1000/floorTasksPerRound)
		}
	}
	return kinds, nil
}

// floorReport is the floor's table: the embedded server's figures and the
// cluster's (nil: not measured).
func floorReport(embedded, cluster []floorKind) string {
	var r strings.Builder
	r.WriteString("\n## The engine's floor\n\n")
	fmt.Fprintf(&r, "Temporal's own least workflows against this project's one-task stub delegation, on the same server, client and machine as the table above, %d at a time, %d of each kind a round, one kind after another, %d rounds after a warm-up (medians); the embedded server's before the cluster starts, the cluster's after its rows. ", floorConcurrency, floorTasksPerRound, floorRounds)
	r.WriteString("The floor's workflows run on a plain SDK worker of their own (default options), started and awaited with the SDK's `ExecuteWorkflow` and `Get`. A delegation is at least one workflow with one activity, its child's turn: the second row bounds what any design that keeps a workflow per delegation reaches on this machine. CPU is the whole machine's, as above.\n\n")
	r.WriteString("| workflow | embedded: tasks/s | embedded: CPU per task | embedded: against the one-activity floor | cluster: tasks/s | cluster: CPU per task | cluster: against the floor |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for i, k := range embedded {
		crate, ccpu, cratio := "-", "-", "-"
		if cluster != nil {
			c := cluster[i]
			crate, ccpu, cratio = fmt.Sprintf("%.1f", median(c.rate)), fmt.Sprintf("%.1f ms", median(c.cpu)), fmt.Sprintf("%.2f×", median(c.rate)/median(cluster[1].rate))
		}
		fmt.Fprintf(&r, "| %s | %.1f | %.1f ms | %.2f× | %s | %s | %s |\n", k.name, median(k.rate), median(k.cpu), median(k.rate)/median(embedded[1].rate), crate, ccpu, cratio)
	}
	return r.String()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
