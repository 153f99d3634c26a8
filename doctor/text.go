package doctor

import (
	"fmt"
	"io"
	"strings"
)

// statusWord is how the text report marks each status: failures stand out.
var statusWord = map[Status]string{OK: "ok", Warn: "WARN", Fail: "FAIL", Skip: "skip"}

// Print writes the report for a person: what was looked at, one line per
// check with its verdict, the fix under each that is not ok, and a total.
func Print(w io.Writer, r Report) error {
	var b strings.Builder
	c := r.Context
	fmt.Fprintf(&b, "subagents doctor: %s\n", c.Cwd)
	where := fmt.Sprintf("Temporal %s, namespace %s, task queue %s", c.Address, c.Namespace, strings.Join(c.TaskQueues, " and "))
	if c.Local {
		where = "local service in " + c.DataDir + ", " + where
	}
	fmt.Fprintf(&b, "  (%s)\n\n", where)
	width := 0
	for _, ch := range r.Checks {
		width = max(width, len(ch.Name))
	}
	for _, ch := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", statusWord[ch.Status], width, ch.Name, ch.Verdict)
		if ch.Fix != "" && (ch.Status == Fail || ch.Status == Warn) {
			fmt.Fprintf(&b, "%-4s  %-*s  fix: %s\n", "", width, "", ch.Fix)
		}
	}
	s := r.Summary
	fmt.Fprintf(&b, "\n%d failed, %d %s, %d ok, %d skipped\n", s.Fail, s.Warn, plural(s.Warn, "warning", "warnings"), s.OK, s.Skip)
	_, err := io.WriteString(w, b.String())
	return err
}
