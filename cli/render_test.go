package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

func TestDefaultUIURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7233": "http://127.0.0.1:8233",
		"[::1]:7233":     "http://[::1]:8233",
		"example:65000":  "",
		"no-port":        "",
	} {
		if got := defaultUIURL(in); got != want {
			t.Errorf("defaultUIURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTreeLines(t *testing.T) {
	env := client.Envelope{DelegationID: "delegation-1", Items: []client.Item{
		{TaskID: "s-a", Name: "Auth flow scan", Agent: "finder", Status: "completed", Done: true, Output: "Auth validation path uses the policy.",
			ToolRows:  []api.ToolRow{{Name: "read", Args: `{"path":"src"}`, Status: "done"}, {Name: "grep", Args: `{"pattern":"auth"}`, Status: "done"}},
			ToolCount: 2, ElapsedMS: 12000, TimeoutSeconds: 600, Usage: api.Usage{Input: 1200, Output: 300, Cost: 0.0012}},
		{TaskID: "s-b", Name: "tests", Agent: "task", Status: "running", ToolRows: []api.ToolRow{{Name: "bash", Args: `{"command":"go test"}`, Status: "running"}},
			ToolCount: 1, ElapsedMS: 3000, TimeoutSeconds: 600, Nested: []client.ListItem{
				// Oldest first, as WithNested gives them; the grandchild
				// names the child as its parent.
				{ID: "s-b-1", Agent: "scout", Status: "completed", Name: "find callers", ParentSessionID: "s-b"},
				{ID: "s-b-2", Agent: "worker", Status: "running", Name: "fix", ParentSessionID: "s-b"},
				{ID: "s-b-1-1", Agent: "scout", Status: "running", ParentSessionID: "s-b-1"},
			}},
		{TaskID: "s-c", Name: "c", Agent: "oracle", Status: "timed_out", Done: true,
			Error: &errcode.Info{Message: "Timed out after 600s. Consider resuming with a longer timeout."}},
		{TaskID: "s-d", Name: "d", Agent: "scout", Status: "cancelled", Done: true,
			Error: &errcode.Info{Message: "Cancelled while running"}},
		{TaskID: "s-e", Name: "e", Agent: "scout", Status: "terminated", Done: true,
			Error: &errcode.Info{Message: "The workflow was terminated through Temporal"}},
		{TaskID: "s-f", Name: "f", Agent: "scoot", Status: "failed", Done: true,
			Error: &errcode.Info{Message: "Unknown profile"}},
	}}
	var b strings.Builder
	treeLines(&b, env, true, 0)
	want := `Sub-agents: 1 running, 1 done, 2 error, 2 cancelled · delegation-1
  ✓ finder · Auth flow scan
    ├── ✓ read {"path":"src"}
    ├── ✓ grep {"pattern":"auth"}
    ╰── Auth validation path uses the policy. (12.0s · 2 tools · ↑1.2k ↓300 $0.0012)
  ⠋ task · tests
    ├── · bash {"command":"go test"}
    ╰── Working... (3s/600s · 1 tools)
    ↳ s-b-1 · scout · completed · find callers
      ↳ s-b-1-1 · scout · running · -
    ↳ s-b-2 · worker · running · fix
  ✕ oracle · c
    ╰── Task timed out: Timed out after 600s. Consider resuming with a longer timeout.
  ⊘ scout · d
    ╰── Task cancelled: Cancelled while running
  ⊘ scout · e
    ╰── Task terminated: The workflow was terminated through Temporal
  ✕ scoot · f
    ╰── Task failed: Unknown profile
`
	if b.String() != want {
		t.Fatalf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestCombineKeepsEachCancelAnswer: `cancel` with several IDs keeps each
// one's cancel_applied and prior_status on its items (the task contract), and says
// at the top whether any cancel was applied.
func TestCombineKeepsEachCancelAnswer(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name    string
		envs    []client.Envelope
		applied bool
		items   []string // task: applied/prior
	}{
		{
			name: "one applied, one already done",
			envs: []client.Envelope{
				{CancelApplied: &yes, PriorStatus: "running", Items: []client.Item{{TaskID: "a", Status: "cancelled"}}},
				{CancelApplied: &no, PriorStatus: "completed", Items: []client.Item{{TaskID: "b", Status: "completed"}, {TaskID: "c", Status: "completed"}}},
			},
			applied: true,
			items:   []string{"a:true/running", "b:false/completed", "c:false/completed"},
		},
		{
			name: "none applied",
			envs: []client.Envelope{
				{CancelApplied: &no, PriorStatus: "failed", Items: []client.Item{{TaskID: "a", Status: "failed"}}},
				{CancelApplied: &no, PriorStatus: "completed", Items: []client.Item{{TaskID: "b", Status: "completed"}}},
			},
			applied: false,
			items:   []string{"a:false/failed", "b:false/completed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := combine("cancel", tc.envs)
			b, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				CancelApplied *bool  `json:"cancel_applied"`
				PriorStatus   string `json:"prior_status"`
				Items         []struct {
					TaskID        string `json:"task_id"`
					CancelApplied *bool  `json:"cancel_applied"`
					PriorStatus   string `json:"prior_status"`
				} `json:"items"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.CancelApplied == nil || *got.CancelApplied != tc.applied || got.PriorStatus != "" {
				t.Fatalf("top level: %s", b)
			}
			var items []string
			for _, it := range got.Items {
				if it.CancelApplied == nil {
					t.Fatalf("item %s lost its cancel answer: %s", it.TaskID, b)
				}
				items = append(items, fmt.Sprintf("%s:%v/%s", it.TaskID, *it.CancelApplied, it.PriorStatus))
			}
			if strings.Join(items, " ") != strings.Join(tc.items, " ") {
				t.Fatalf("items %v, want %v", items, tc.items)
			}
		})
	}
}

// TestHeaderAndCombine: the status header counts a delegation's items by
// state, and `wait` on several IDs combines their envelopes: running while
// any item runs.
func TestHeaderAndCombine(t *testing.T) {
	env := client.Envelope{DelegationID: "delegation-1", Items: []client.Item{
		{TaskID: "s-a", Status: "completed", Done: true},
		{TaskID: "s-b", Status: "failed", Done: true, Error: &errcode.Info{Code: errcode.UnknownAgent}},
		{TaskID: "s-c", Status: "running"},
	}}
	if got := statusHeader(env.Items); got != "Sub-agents: 1 running, 1 done, 1 error" {
		t.Fatalf("header %q", got)
	}
	both := combine("wait", []client.Envelope{env, {Done: true, WaitStatus: "completed", Items: []client.Item{{TaskID: "s-d", Done: true, Status: "completed"}}}})
	if both.Done || len(both.Items) != 4 || both.Status != "running" || both.TotalCount == nil || *both.TotalCount != 4 {
		t.Fatalf("combined %+v", both)
	}
}

// TestExitErrorSaysPendingOnce: a service's answer that already says the
// work is still running is not told so twice (wait --timeout through the
// local service printed "wait timeout: still running: still running").
func TestExitErrorSaysPendingOnce(t *testing.T) {
	for _, msg := range []string{"wait timeout: still running", "wait timeout"} {
		err := exitError(errcode.ExitPending, msg)
		if !errors.Is(err, errcode.ErrPending) || err.Error() != "wait timeout: still running" {
			t.Errorf("exitError(pending, %q) = %q", msg, err)
		}
	}
}

func TestTreeLinesOfAPlan(t *testing.T) {
	env := client.Envelope{DelegationID: "plan-1", Plan: &api.PlanView{Name: "lanes", Attempt: 2, Steps: []api.StepState{
		{Key: "api-writer", Path: []string{"api"}, State: api.StateFailed},
		{Key: "api-review", Path: []string{"api"}, State: api.StateSkipped},
		{Key: "ui-writer", Path: []string{"ui"}, State: api.StateCompleted, GateRuns: 2, Reused: true},
		{Key: "review", Path: []string{"rounds"}, State: api.StateCompleted, Round: 2, Verdict: "clean"},
		{Key: "merge", State: api.StateQueued},
	}}, Items: []client.Item{
		{TaskID: "plan-1-api-writer", Name: "api-writer", Agent: "implementer", Status: "failed", Done: true, Error: &errcode.Info{Message: "the schema is missing"}},
		{Name: "api-review", Agent: "reviewer", Status: "skipped", Done: true, Error: &errcode.Info{Code: errcode.Skipped, Message: `not started: step "api-writer" ended failed`}},
		{TaskID: "plan-1-ui-writer", Name: "ui-writer", Agent: "implementer", Status: "completed", Done: true, Output: "added the button"},
		{TaskID: "plan-1-review-R2", Name: "review", Agent: "reviewer", Status: "completed", Done: true, Output: "all good"},
		{Name: "merge", Agent: "reviewer", Status: "queued"},
	}}
	var b strings.Builder
	treeLines(&b, env, false, 0)
	want := `Plan lanes · plan-1 · 2/5 steps done (1 failed, 1 skipped) · attempt 2
  ✕ implementer · api/api-writer
    ╰── Task failed: the schema is missing
  – reviewer · api/api-review
    ╰── Skipped: not started: step "api-writer" ended failed
  ✓ implementer · ui/ui-writer [gate ran 2×, kept from an earlier attempt]
    ╰── added the button
  ✓ reviewer · rounds/review [round 2, verdict clean]
    ╰── all good
  · reviewer · merge
`
	if got := b.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}
