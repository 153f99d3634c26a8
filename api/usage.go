package api

// Usage is token usage and cost summed over a run's assistant messages, in
// the shape the SingleResult contract's SingleResult uses.
type Usage struct {
	Input      int64   `json:"input"`
	Output     int64   `json:"output"`
	CacheRead  int64   `json:"cacheRead"`
	CacheWrite int64   `json:"cacheWrite"`
	Cost       float64 `json:"cost"`
	Turns      int     `json:"turns"`
}

// Tokens is every token u counts (pi's totalTokens): what a budget's
// tokens cap.
func (u Usage) Tokens() int64 { return u.Input + u.Output + u.CacheRead + u.CacheWrite }

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Input: u.Input + v.Input, Output: u.Output + v.Output,
		CacheRead: u.CacheRead + v.CacheRead, CacheWrite: u.CacheWrite + v.CacheWrite,
		Cost: u.Cost + v.Cost, Turns: u.Turns + v.Turns,
	}
}

// ToolRow is one tool call of a run, for progress display.
type ToolRow struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Args is a short preview of the arguments.
	Args string `json:"args"`
	// Status is running, ok or error.
	Status string `json:"status"`
	// Error is the start of what a failed call returned: what the model
	// was told went wrong.
	Error string `json:"error,omitempty"`
}

// Finalize is the child's subagent_finalize call.
type Finalize struct {
	Status string `json:"status"`
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	// Verdict is the child's one-word verdict, where its task asked for
	// one (a plan step's verdicts, read by a loop's until).
	Verdict string `json:"verdict,omitempty"`
}

// FinalizeToolName is the tool a child calls to hand back its result.
const FinalizeToolName = "subagent_finalize"

// TimelineEvent is one structured event of a run, as the task contract's per-task
// event timeline keeps them.
type TimelineEvent struct {
	Type string `json:"type"`
	Tool string `json:"tool,omitempty"`
	// AtMS is when it arrived, in milliseconds from the run's start.
	AtMS int64 `json:"at_ms"`
}
