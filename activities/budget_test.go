package activities

import (
	"fmt"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// Lines of pi's event stream for the budget's cases.
func assistantEnd(usage int, calls ...string) string {
	content := `[{"type":"text","text":"working"}`
	for i, c := range calls {
		content += fmt.Sprintf(`,{"type":"toolCall","id":"m%d","name":%q,"arguments":{}}`, i, c)
	}
	content += "]"
	return fmt.Sprintf(`{"type":"message_end","message":{"role":"assistant","content":%s,"stopReason":"toolUse","usage":{"input":%d,"output":0,"cost":{"total":%g}}}}`,
		content, usage, float64(usage)/1000)
}

func toolStart(id, name string) string {
	return fmt.Sprintf(`{"type":"tool_execution_start","toolCallId":%q,"toolName":%q,"args":{"n":%q}}`, id, name, id)
}

// toolResultEnd is the end of a tool result's message, which pi sends
// after the call's tool_execution_end.
func toolResultEnd(id, name string) string {
	return fmt.Sprintf(`{"type":"message_end","message":{"role":"toolResult","toolCallId":%q,"toolName":%q,"content":[],"isError":false}}`, id, name)
}

func TestBudgetStop(t *testing.T) {
	calls2 := &api.Budget{ToolCalls: 2}
	tests := []struct {
		name   string
		budget *api.Budget
		prior  api.Usage
		calls  int // of interrupted attempts
		lines  []string
		want   string
	}{
		{"no budget", nil, api.Usage{}, 0, []string{assistantEnd(10, "read"), toolStart("a", "read"), toolStart("b", "read")}, ""},
		{"the calls within the budget run", calls2, api.Usage{}, 0, []string{assistantEnd(10, "read", "read"), toolStart("a", "read"), toolStart("b", "read")}, ""},
		{"their results come back to the model", calls2, api.Usage{}, 0,
			[]string{assistantEnd(10, "read"), toolStart("a", "read"), toolResultEnd("a", "read"), assistantEnd(10, "read"), toolStart("b", "read"), toolResultEnd("b", "read")}, ""},
		{"a message asking for more once they are spent", calls2, api.Usage{}, 0,
			[]string{toolStart("a", "read"), toolStart("b", "bash"), assistantEnd(10, "read")}, "2 tool calls of a budget of 2"},
		{"a batch past the cap: its first call past it", calls2, api.Usage{}, 0,
			[]string{toolStart("a", "read"), toolStart("b", "bash"), toolStart("c", "read")}, "2 tool calls of a budget of 2"},
		{"finalize is never a call of the budget", calls2, api.Usage{}, 0,
			[]string{toolStart("a", "read"), toolStart("b", "bash"), assistantEnd(10, api.FinalizeToolName), toolStart("f", api.FinalizeToolName)}, ""},
		{"finalize calls before do not count", calls2, api.Usage{}, 0,
			[]string{toolStart("f", api.FinalizeToolName), toolStart("a", "read"), assistantEnd(10, "read")}, ""},
		{"the interrupted attempts' calls count", calls2, api.Usage{}, 1,
			[]string{toolStart("a", "read"), assistantEnd(10, "read")}, "2 tool calls of a budget of 2"},
		{"tokens: a message asking for tools past them", &api.Budget{Tokens: 200}, api.Usage{}, 0,
			[]string{assistantEnd(120, "read"), toolStart("a", "read"), assistantEnd(120, "read")}, "240 tokens of a budget of 200"},
		{"tokens: the answer that passes them is kept", &api.Budget{Tokens: 200}, api.Usage{}, 0,
			[]string{assistantEnd(120, "read"), toolStart("a", "read"), assistantEnd(120)}, ""},
		{"tokens: with the interrupted attempts'", &api.Budget{Tokens: 200}, api.Usage{Input: 150}, 0,
			[]string{assistantEnd(60, "read")}, "210 tokens of a budget of 200"},
		{"cost", &api.Budget{Cost: 0.1}, api.Usage{}, 0,
			[]string{assistantEnd(60, "read"), toolStart("a", "read"), assistantEnd(60, "bash")}, "$0.1200 of a budget of $0.1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &childRun{in: api.RunPiInput{Budget: tt.budget}, prior: tt.prior, priorCalls: tt.calls}
			got := ""
			for _, line := range tt.lines {
				if spent := r.budgetStop(r.stream.Apply([]byte(line))); spent != "" && got == "" {
					got = spent
				}
			}
			if got != tt.want {
				t.Fatalf("stopped with %q, want %q", got, tt.want)
			}
		})
	}
}

// budgetScripts are the scripts of the budget's runs with real pi: a child
// that calls bash without end, each call another command (no loop), and
// one that calls it once, then finalizes.
func budgetScripts(m *scriptedmodel.Server) {
	var busy []scriptedmodel.Step
	for i := range 8 {
		busy = append(busy, scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: fmt.Sprintf(`{"command":"echo %d >> calls.txt"}`, i)}}})
	}
	m.Script("busy", busy...)
	m.Script("one-then-done",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"echo one"}`}}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"done in one call"}`)}},
	)
}

// budgetCases are the runs each path (cold, warm) makes.
var budgetCases = []struct {
	name   string
	script string
	budget api.Budget
	check  func(t *testing.T, h *harness, r api.RunPiResult)
}{
	{"tool calls", "busy", api.Budget{ToolCalls: 2}, func(t *testing.T, h *harness, r api.RunPiResult) {
		if errCode(r) != errcode.BudgetExceeded || r.Error.Message != "Budget exceeded: 2 tool calls of a budget of 2; the child was stopped" {
			t.Fatalf("error %+v", r.Error)
		}
		// Nothing lost: the calls, the usage of the three answers, the
		// session file with them.
		if r.ToolCalls != 2 || len(r.ToolRows) != 2 || r.ToolRows[1].Status != "ok" || r.Usage.Turns != 3 || r.Usage.Input != 300 {
			t.Fatalf("calls %d rows %+v usage %+v", r.ToolCalls, r.ToolRows, r.Usage)
		}
		msgs, err := readMessages(r.SessionFile)
		if err != nil || len(msgs) < 5 {
			t.Fatalf("session file: %d messages, %v", len(msgs), err)
		}
	}},
	{"tokens", "busy", api.Budget{Tokens: 300}, func(t *testing.T, h *harness, r api.RunPiResult) {
		if errCode(r) != errcode.BudgetExceeded || r.Error.Message != "Budget exceeded: 360 tokens of a budget of 300; the child was stopped" {
			t.Fatalf("error %+v", r.Error)
		}
		if r.ToolCalls != 2 || r.Usage.Turns != 3 {
			t.Fatalf("calls %d usage %+v", r.ToolCalls, r.Usage)
		}
	}},
	{"finalize after the last call", "one-then-done", api.Budget{ToolCalls: 1}, func(t *testing.T, h *harness, r api.RunPiResult) {
		if r.Error != nil || r.Finalize == nil || r.Output != "done in one call" || r.ToolCalls != 2 {
			t.Fatalf("result %+v", r)
		}
	}},
}

func TestRunPiBudget(t *testing.T) {
	waitsMostly(t)
	h := newHarness(t, nil)
	budgetScripts(h.model)
	for _, c := range budgetCases {
		t.Run(c.name, func(t *testing.T) {
			in := h.input("[[script:" + c.script + "]] go")
			in.SessionID = strings.ReplaceAll(c.name, " ", "-")
			budget := c.budget
			in.Budget = &budget
			r := h.mustRun(in)
			if r.Warm {
				t.Fatal("ran warm without a pool")
			}
			c.check(t, h, r)
		})
	}
	t.Run("within the budget", func(t *testing.T) {
		in := h.input("[[script:one-then-done]] go")
		in.SessionID = "within"
		in.Budget = &api.Budget{ToolCalls: 5, Tokens: 10000, Cost: 1}
		if r := h.mustRun(in); r.Error != nil || r.Output != "done in one call" {
			t.Fatalf("result %+v", r)
		}
	})
}

// TestRunPiBudgetWarm: a warm child of the pool is stopped as a cold one.
func TestRunPiBudgetWarm(t *testing.T) {
	waitsMostly(t)
	for _, c := range budgetCases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) { cfg.WarmPool = 2 })
			t.Cleanup(h.acts.Close)
			budgetScripts(h.model)
			h.warmUp()
			in := h.input("[[script:" + c.script + "]] go")
			budget := c.budget
			in.Budget = &budget
			r := h.mustRun(in)
			if !r.Warm {
				t.Fatalf("ran cold: %+v", h.acts.PoolStats())
			}
			c.check(t, h, r)
		})
	}
}
