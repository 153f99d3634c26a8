package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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
	treeLines(&b, env, true, 0, time.Time{})
	want := `Sub-agents: 1 running, 1 done, 2 error, 2 cancelled · delegation-1
  ✓ finder · Auth flow scan
    ├── ✓ read {"path":"src"}
    ├── ✓ grep {"pattern":"auth"}
    ╰── Auth validation path uses the policy. (12.0s · 2 tools · ↑1.2k ↓300 $0.0012)
  ⠋ task · tests
    ├── · bash {"command":"go test"}
    ╰── Working... (3s/600s · 1 tool)
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
	treeLines(&b, env, false, 0, time.Time{})
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

// TestTreeLinesSayWhatComesNext (issue 42): drawn once, a task says what
// waits for the user. A worktree task's change is on its branch, not in the
// checkout: the text names it and the commands that apply or discard it
// (it showed only in --json). A question's wait is shown against its own
// deadline, not the turn's timeout (which read "61s/30s"), with the reply
// that answers it. Counts are singular or plural as they should be.
func TestTreeLinesSayWhatComesNext(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	asked := now.Add(-61 * time.Second)
	env := client.Envelope{DelegationID: "delegation-1", Items: []client.Item{
		{TaskID: "s-w", Name: "writer", Agent: "implementer", Status: "completed", Done: true, Output: "wrote it", ToolCount: 1, ElapsedMS: 2000,
			Change: &api.Change{Branch: "subagents/s-w", PatchFile: "/data/changes/s-w.patch", Files: []string{"a.go", "b.go", "c.go", "d.go"}}},
		{TaskID: "s-one", Name: "one", Agent: "implementer", Status: "completed", Done: true, Output: "fixed",
			Change: &api.Change{Branch: "subagents/s-one", PatchFile: "/data/changes/s-one.patch", Files: []string{"x.go"}}},
		{TaskID: "s-stuck", Name: "stuck", Agent: "implementer", Status: "failed", Done: true, Error: &errcode.Info{Code: errcode.Failed, Message: "could not capture"},
			Change: &api.Change{Branch: "subagents/s-stuck", Worktree: "/data/worktrees/s-stuck", Files: []string{"y.go"}}},
		{TaskID: "s-none", Name: "none", Agent: "implementer", Status: "completed", Done: true, Output: "nothing to do",
			Change: &api.Change{Empty: true}},
		{TaskID: "s-q", Name: "asker", Agent: "asker", Status: "running", ElapsedMS: 61000, TimeoutSeconds: 30, ToolCount: 1,
			Question: &api.Question{ID: "call_0_0", Reason: api.ReasonNeedDecision, Message: "SQLite or PostgreSQL?", State: api.QuestionPending,
				Asked: asked, Deadline: asked.Add(30 * time.Minute)}},
	}}
	var b strings.Builder
	treeLines(&b, env, false, 0, now)
	want := `Sub-agents: 1 running, 3 done, 1 error · delegation-1
  ✓ implementer · writer
    ╰── wrote it (2.0s · 1 tool)
        change waiting on branch subagents/s-w (4 files: a.go, b.go, c.go, …)
        subagents apply s-w writes it into your checkout; subagents apply --discard s-w deletes it
  ✓ implementer · one
    ╰── fixed
        change waiting on branch subagents/s-one (1 file: x.go)
        subagents apply s-one writes it into your checkout; subagents apply --discard s-one deletes it
  ✕ implementer · stuck
    ╰── Task failed: could not capture
        change waiting in the worktree /data/worktrees/s-stuck, not yet on its branch (1 file: y.go)
        subagents apply s-stuck writes it into your checkout; subagents apply --discard s-stuck deletes it
  ✓ implementer · none
    ╰── nothing to do
  … asker
    ╰── Waits for an answer: SQLite or PostgreSQL? (asked 1m1s ago, times out in 28m59s · 1 tool)
        answer it: subagents reply --question call_0_0 s-q "ANSWER"
`
	if got := b.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}

	// Live, the tree is redrawn in place: what comes next waits for the
	// final drawing.
	b.Reset()
	treeLines(&b, env, true, 0, now)
	if strings.Contains(b.String(), "subagents apply") || strings.Contains(b.String(), "subagents reply") {
		t.Fatalf("the live tree says what comes next:\n%s", b.String())
	}
}

func TestSpanAndPlural(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 45 * time.Second: "45s", 61 * time.Second: "1m1s", 30 * time.Minute: "30m", time.Hour: "1h",
		time.Hour + 5*time.Second: "1h0m5s", 150 * time.Minute: "2h30m", -time.Second: "0s", 1499 * time.Millisecond: "1s",
	} {
		if got := span(d); got != want {
			t.Errorf("span(%s) = %q, want %q", d, got, want)
		}
	}
	if got := plural(1, "tool") + ", " + plural(0, "tool") + ", " + plural(2, "step"); got != "1 tool, 0 tools, 2 steps" {
		t.Errorf("plural: %q", got)
	}
}
