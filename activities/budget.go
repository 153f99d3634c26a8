package activities

import (
	"slices"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// A run's budget (RunPiInput.Budget) caps what its child may spend: tool
// calls, tokens and cost, counted as the stream arrives, with what the
// run's interrupted attempts spent before (the session file says). Once
// the budget says something is spent (api.Budget.Exceeded: the spend has
// reached its cap), the child may not spend more: it is stopped, as a
// cancel stops it, at the first point where it would.
//
//   - A tool call: the child may start as many as the budget allows;
//     subagent_finalize is not one of them (it hands back the work, it is
//     none). An assistant message that asks for more once the calls are
//     spent stops the child before pi runs them; a batch that starts past
//     the cap stops it at the first call past it.
//   - Tokens and cost: counted at each assistant message's end; a message
//     that takes them to the cap stops the child when it asks for tools,
//     which would cost another model call after them. One that finalizes,
//     or ends the run with its text, is the run's answer: the spend is
//     already made, and the answer is kept.
//
// The run then ends with BUDGET_EXCEEDED, its usage, tool rows and session
// file as a stopped run keeps them.

// budgetStop is what of the run's budget is spent when the event just read
// (of type typ) is a point where the child would spend more, or "".
func (r *childRun) budgetStop(typ string) string {
	b := r.in.Budget
	if b == nil {
		return ""
	}
	s := &r.stream
	used := r.prior.Add(s.Usage)
	switch typ {
	case "message_end":
		// The tools this message asks for have not started yet.
		if len(s.PendingCalls) == 0 || slices.Contains(s.PendingCalls, api.FinalizeToolName) {
			return ""
		}
		return b.Exceeded(r.priorCalls+s.WorkCalls(), used)
	case "tool_execution_start":
		rows := s.ToolRows
		if len(rows) == 0 || rows[len(rows)-1].Name == api.FinalizeToolName {
			return ""
		}
		// The calls before this one.
		return b.Exceeded(r.priorCalls+s.WorkCalls()-1, used)
	}
	return ""
}

// budgetError is the result's error of a run its budget stopped.
func budgetError(spent string) *errcode.Info {
	return errcode.NewInfo(errcode.BudgetExceeded, "Budget exceeded: "+spent+"; the child was stopped")
}
