// Command stubpi stands in for pi in load benchmarks only (never in a
// correctness test): it prints a valid pi JSON event stream whose assistant
// finalizes at once, so that what is measured is the orchestration, not a
// Node start. It answers `--version` like pi.
package main

import (
	"fmt"
	"os"
	"strings"
)

const finalize = `{"status":"SUCCESS","result":"stub result"}`

func main() {
	for _, a := range os.Args[1:] {
		if a == "--version" {
			fmt.Println("0.87.1-stub")
			return
		}
	}
	lines := []string{
		`{"type":"session","version":3,"id":"stub"}`,
		`{"type":"agent_start"}`,
		`{"type":"turn_start"}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"subagent_finalize","arguments":` + finalize + `}],"stopReason":"toolUse","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.00002}}}}`,
		`{"type":"tool_execution_start","toolCallId":"c1","toolName":"subagent_finalize","args":` + finalize + `}`,
		`{"type":"tool_execution_end","toolCallId":"c1","toolName":"subagent_finalize","result":{"content":[{"type":"text","text":"Result recorded."}]},"isError":false}`,
		`{"type":"turn_end"}`,
		`{"type":"agent_end","willRetry":false}`,
		`{"type":"agent_settled"}`,
	}
	fmt.Println(strings.Join(lines, "\n"))
}
