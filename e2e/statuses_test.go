package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestStatusesMatchWhatHappened: one status vocabulary everywhere. A task
// refused for an unknown profile, one that completed, one cancelled and one
// terminated through Temporal (as an operator would, with `temporal
// workflow cancel|terminate`) show the same state in `status`, in `list`
// (text and --json), under `list --status`, and to Temporal's own
// visibility query, the README's `SubagentStatus="…"` recipe included;
// the model shown is the one the child ran.
func TestStatusesMatchWhatHappened(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("st-done", finalizeStep("found it"))
	e.model.Script("st-cancel", scriptedmodel.Step{Hang: true})
	e.model.Script("st-term", scriptedmodel.Step{Hang: true})
	e.startWorker(shared.client)
	c := e.cli()
	start := func(args ...string) string {
		t.Helper()
		env, _ := c.json(0, "", "start", append([]string{"--cwd", e.workDir}, args...)...)
		return env.Items[0].TaskID
	}
	failed := start("--agent", "scoot", "Look around.")
	done := start("[[script:st-done]] Find it.")
	cancelled := start("[[script:st-cancel]] Think.")
	terminated := start("[[script:st-term]] Think.")

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, script := range []string{"st-cancel", "st-term"} {
		if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == script }); err != nil {
			t.Fatalf("%s never asked the model: %v", script, err)
		}
	}
	if err := shared.client.CancelWorkflow(ctx, cancelled, ""); err != nil {
		t.Fatal(err)
	}
	if err := shared.client.TerminateWorkflow(ctx, terminated, "", "an operator stopped it"); err != nil {
		t.Fatal(err)
	}
	c.json(1, "", "wait", "--timeout", "60s", failed)
	c.json(0, "", "wait", "--timeout", "60s", done)
	for _, id := range []string{cancelled, terminated} {
		if err := shared.client.GetWorkflow(ctx, id, "").Get(ctx, nil); err == nil {
			t.Fatalf("%s ended without an error", id)
		}
	}

	status := func(id string) client.Envelope {
		t.Helper()
		_, out, errOut := c.run("", "status", "--json", id)
		var env client.Envelope
		if err := json.Unmarshal([]byte(out), &env); err != nil {
			t.Fatalf("status %s: %v\n%s%s", id, err, out, errOut)
		}
		return env
	}
	rows := []struct {
		name, id string
		want     api.State
		open     bool
		// recipe is the visibility query an operator types for it.
		recipe string
		code   string
	}{
		// Refused before any child ran: no session to send to, so closed.
		{"unknown profile", failed, api.StateFailed, false, `SubagentStatus="failed"`, "UNKNOWN_AGENT"},
		{"completed", done, api.StateCompleted, true, `SubagentStatus="completed"`, ""},
		{"temporal workflow cancel", cancelled, api.StateCancelled, false, `SubagentStatus="cancelled"`, "CANCELLED"},
		{"temporal workflow terminate", terminated, api.StateTerminated, false, `ExecutionStatus="Terminated"`, "TERMINATED"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			st := status(r.id)
			if st.Status != string(r.want) || !st.Done || len(st.Items) != 1 || st.Items[0].Status != string(r.want) {
				t.Fatalf("status: %s, done %v, items %+v; want %s", st.Status, st.Done, st.Items, r.want)
			}
			if it := st.Items[0]; r.code != "" && (it.Error == nil || string(it.Error.Code) != r.code) || r.code == "" && it.Error != nil {
				t.Fatalf("status error %+v, want %q", it.Error, r.code)
			}
			list, out := c.json(0, "", "list", "--kind", "session", "--cwd", e.workDir)
			i := slices.IndexFunc(list.Runs, func(it client.ListItem) bool { return it.ID == r.id })
			if i < 0 || list.Runs[i].Status != string(r.want) || list.Runs[i].Open != r.open {
				t.Fatalf("list: %s", out)
			}
			_, text, _ := c.run("", "list", "--kind", "session", "--cwd", e.workDir)
			// The table's columns are as wide as what they hold: a row is
			// its kind, ID and status as its first three fields.
			if !slices.ContainsFunc(strings.Split(text, "\n"), func(line string) bool {
				f := strings.Fields(line)
				return len(f) >= 3 && f[0] == "session" && f[1] == r.id && f[2] == string(r.want)
			}) {
				t.Fatalf("list text has no row of session %s %s:\n%s", r.id, r.want, text)
			}
			filtered, out := c.json(0, "", "list", "--status", string(r.want), "--cwd", e.workDir)
			if !slices.ContainsFunc(filtered.Runs, func(it client.ListItem) bool { return it.ID == r.id }) {
				t.Fatalf("list --status %s: %s", r.want, out)
			}
			for _, q := range []string{r.recipe, api.StateClause(r.want)} {
				if ids := visible(t, q+fmt.Sprintf(` AND SubagentCwd=%q`, e.workDir), r.id); !slices.Contains(ids, r.id) {
					t.Fatalf("the visibility query %s finds %v, not %s", q, ids, r.id)
				}
			}
		})
	}
	if it := status(done).Items[0]; it.Provider+"/"+it.Model != scriptedmodel.ModelRef {
		t.Fatalf("the model shown is %s/%s, want the one the child ran, %s", it.Provider, it.Model, scriptedmodel.ModelRef)
	}
	// A session recorded this way replays against today's code.
	recordHistory(t, shared.client, failed, "session-failed-v4")
	recordHistory(t, shared.client, cancelled, "session-cancelled-v4")
}

// visible lists the workflow IDs Temporal's visibility query q finds, as
// `temporal workflow list -q` does: visibility is eventually consistent,
// so it asks until want is among them or a few seconds have passed.
func visible(t *testing.T, q, want string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var ids []string
	for {
		resp, err := shared.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: shared.server.Namespace(), Query: q})
		if err != nil {
			t.Fatalf("visibility query %s: %v", q, err)
		}
		ids = ids[:0]
		for _, info := range resp.GetExecutions() {
			ids = append(ids, info.GetExecution().GetWorkflowId())
		}
		if slices.Contains(ids, want) || time.Now().After(deadline) {
			return ids
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDelegationCancelledThroughTemporal: `temporal workflow cancel` of a
// delegation of several tasks cancels its running tasks, as `subagents
// cancel` does, and every surface says cancelled.
func TestDelegationCancelledThroughTemporal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("dc-a", scriptedmodel.Step{Hang: true})
	e.model.Script("dc-b", scriptedmodel.Step{Hang: true})
	e.startWorker(shared.client)
	c := e.cli()
	req := fmt.Sprintf(`{"tasks":[{"name":"a","prompt":"[[script:dc-a]] Think.","cwd":%q},{"name":"b","prompt":"[[script:dc-b]] Think.","cwd":%q}]}`, e.workDir, e.workDir)
	started, out := c.json(0, req, "start", "--input", "-")
	if len(started.Items) != 2 {
		t.Fatalf("start: %s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, script := range []string{"dc-a", "dc-b"} {
		if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == script }); err != nil {
			t.Fatalf("%s never asked the model: %v", script, err)
		}
	}
	if err := shared.client.CancelWorkflow(ctx, started.DelegationID, ""); err != nil {
		t.Fatal(err)
	}
	for _, it := range started.Items {
		// Its sessions are cancelled with it (the cancel reaches them
		// before the delegation closes): their turns end cancelled.
		waited, out := c.json(1, "", "wait", "--timeout", "60s", it.TaskID)
		if waited.Status != "cancelled" || waited.Items[0].Error == nil || waited.Items[0].Error.Code != "CANCELLED" {
			t.Fatalf("task %s after the delegation's cancel: %s", it.Name, out)
		}
	}
	st, out := c.json(0, "", "status", started.DelegationID)
	if st.Status != "cancelled" || !st.Done {
		t.Fatalf("status of the cancelled delegation: %s", out)
	}
	list, out := c.json(0, "", "list", "--kind", "delegation", "--status", "cancelled")
	if !slices.ContainsFunc(list.Runs, func(it client.ListItem) bool { return it.ID == started.DelegationID && it.Status == "cancelled" }) {
		t.Fatalf("list --status cancelled: %s", out)
	}
	recordHistory(t, shared.client, started.DelegationID, "delegation-cancelled-v4")
}
