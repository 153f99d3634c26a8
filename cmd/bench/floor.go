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
	floorQueue        = "bench-floor"
	floorWorkflowName = "BenchFloor"
	floorActivityName = "BenchFloorActivity"
	// floorRounds of floorTasksPerRound each, every kind in turn: three
	// medians of 128 tasks (4–8 s a kind here) held the floor's ratio to
	// a few hundredths across runs of the same hour.
	floorRounds        = 3
	floorTasksPerRound = 128
	// floorConcurrency is the throughput target's (issue 43: at
	// concurrency 16).
	floorConcurrency = 16
	// floorSettle lets the server finish the last runs' visibility
	// writes, which the kind that ran them pays for (its CPU is read after
	// it), before the next kind starts.
	floorSettle = time.Second
	// floorActivityTimeout bounds a stuck worker only: the activity is a
	// no-op.
	floorActivityTimeout = time.Minute
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

// floorKindNames names the floor's kinds, in engineFloor's order: the
// report names a row even where a server was not measured.
var floorKindNames = [...]string{"a workflow that does nothing", "a workflow of one no-op activity", "a one-task delegation of this project (stub child)"}

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
		return nil, fmt.Errorf("the floor's worker: %w", err)
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
		{name: floorKindNames[0], job: floor(false)},
		{name: floorKindNames[1], job: floor(true)},
		{name: floorKindNames[2], job: delegate},
	}
	for round := range floorRounds + 1 {
		// Each round starts with another kind, so that none always follows
		// the same one.
		for j := range kinds {
			k := &kinds[(j+round)%len(kinds)]
			busy := machineBusy()
			wall, err := inFlight(floorTasksPerRound, floorConcurrency, k.job)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.name, err)
			}
			time.Sleep(floorSettle)
			cpu := machineBusy() - busy
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
// cluster's, each with the error that kept it from being measured.
func floorReport(embedded []floorKind, embeddedErr error, cluster []floorKind, clusterErr error) string {
	var r strings.Builder
	r.WriteString("\n## The engine's floor\n\n")
	fmt.Fprintf(&r, "Temporal's own least workflows against this project's one-task stub delegation, on the same server, client and machine as the table above, after it: %d at a time, %d of each kind a round, the kinds in turn (each round starting with the next), %d rounds after a warm-up (medians); the cluster's while it runs, then the embedded server's once the cluster has stopped. ", floorConcurrency, floorTasksPerRound, floorRounds)
	r.WriteString("The floor's workflows run on a plain SDK worker of their own (default options), started and awaited with the SDK's `ExecuteWorkflow` and `Get`. A delegation is at least one workflow with one activity, its child's turn: the second row bounds what any design that keeps a workflow per delegation reaches on this machine. ")
	r.WriteString("CPU is the whole machine's, as above, counted until a second after each kind's last task (its trailing visibility writes included). Compare a delegation with the floor in this table, measured in turn with it, not with the table above.\n\n")
	for _, e := range []struct {
		name string
		err  error
	}{{"embedded server", embeddedErr}, {"cluster", clusterErr}} {
		if e.err != nil {
			fmt.Fprintf(&r, "The %s's floor was not measured: %v\n\n", e.name, e.err)
		}
	}
	r.WriteString("| workflow | embedded: tasks/s | embedded: CPU per task | embedded: against the one-activity floor | cluster: tasks/s | cluster: CPU per task | cluster: against the floor |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	cells := func(kinds []floorKind, i int) (string, string, string) {
		if kinds == nil {
			return "-", "-", "-"
		}
		k := kinds[i]
		return fmt.Sprintf("%.1f", median(k.rate)), fmt.Sprintf("%.1f ms", median(k.cpu)), fmt.Sprintf("%.2f×", median(k.rate)/median(kinds[1].rate))
	}
	for i, name := range floorKindNames {
		erate, ecpu, eratio := cells(embedded, i)
		crate, ccpu, cratio := cells(cluster, i)
		fmt.Fprintf(&r, "| %s | %s | %s | %s | %s | %s | %s |\n", name, erate, ecpu, eratio, crate, ccpu, cratio)
	}
	return r.String()
}

// median is the middle of v (0 for none).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
