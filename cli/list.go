package cli

import (
	"context"
	"flag"
	"io"

	"github.com/durable-pi/subagents/client"
)

// listOptions are `list [--status S] [--agent A] [--parent-session P]
// [--cwd D] [--kind K] [--open] [--limit N]`.
type listOptions struct {
	filter client.ListFilter
}

func (o *listOptions) register(fs *flag.FlagSet) {
	f := &o.filter
	fs.StringVar(&f.Status, "status", "", "only runs in this `state`: queued, running, completed, failed, cancelled, timed_out, terminated (README's glossary; waiting_for_input: open sessions between turns)")
	fs.StringVar(&f.Agent, "agent", "", "only sessions of this profile")
	fs.StringVar(&f.ParentSessionID, "parent-session", "", "only what this pi session (or, nested, this task) started")
	fs.StringVar(&f.Cwd, "cwd", "", "only tasks that ran in this folder")
	fs.StringVar(&f.Kind, "kind", "", "session, delegation (plans among them) or plan (default: all)")
	fs.BoolVar(&f.Open, "open", false, "only workflows that are still open")
	fs.IntVar(&f.Limit, "limit", 0, "at most this many (default 100): open runs first, newest first, then closed ones, last closed first")
}

func (o *listOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	f := o.filter
	f.Cwd = absPath(f.Cwd)
	env, err := c.List(ctx, f)
	if err != nil {
		return err
	}
	return cmd.finishQuiet(env, cmd.printListTree)
}

// printListTree prints the listing with what a task delegated (a nested
// delegation: its parent session is the task's ID) under that task,
// indented.
func (cmd *command) printListTree(env client.Envelope) {
	if len(env.Runs) == 0 {
		_, _ = io.WriteString(cmd.io.Out, "no delegations or sessions match\n")
		return
	}
	runs, depths := nestedOrder(env.Runs)
	listTable(cmd.io.Out, runs, depths)
}

// nestedOrder orders runs as a tree: each run is followed by those whose
// parent session is its ID (what its child delegated), depth first, the
// listing's own order kept among siblings; a run whose parent is not
// listed is a root. It returns each run's depth in the tree too.
func nestedOrder(runs []client.ListItem) ([]client.ListItem, []int) {
	listed := map[string]bool{}
	for _, r := range runs {
		listed[r.ID] = true
	}
	children := map[string][]int{}
	var roots []int
	for i, r := range runs {
		if r.ParentSessionID != "" && r.ParentSessionID != r.ID && listed[r.ParentSessionID] {
			children[r.ParentSessionID] = append(children[r.ParentSessionID], i)
		} else {
			roots = append(roots, i)
		}
	}
	out, depths := make([]client.ListItem, 0, len(runs)), make([]int, 0, len(runs))
	placed := make([]bool, len(runs))
	var walk func(i, depth int)
	walk = func(i, depth int) {
		if placed[i] {
			return
		}
		placed[i] = true
		out, depths = append(out, runs[i]), append(depths, depth)
		for _, c := range children[runs[i].ID] {
			walk(c, depth+1)
		}
	}
	for _, i := range roots {
		walk(i, 0)
	}
	// Runs whose parents name each other in a ring (never written by the
	// service) are listed all the same, as roots.
	for i := range runs {
		walk(i, 0)
	}
	return out, depths
}
