package cli

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
)

// spinner frames, as the task contract's task tree draws them.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// liveToolRows is how many of a running task's latest tool calls the tree
// shows: enough to see what it does, few enough to fit a terminal.
const liveToolRows = 4

// liveView redraws the task tree in place on a terminal, and prints a line
// per change of state otherwise.
type liveView struct {
	w        io.Writer
	terminal bool
	frame    int
	lines    int
	last     map[string]string
}

func newLiveView(w io.Writer, terminal bool) *liveView {
	return &liveView{w: w, terminal: terminal, last: map[string]string{}}
}

func (v *liveView) update(env client.Envelope, now time.Time) {
	if !v.terminal {
		for _, it := range env.Items {
			line := fmt.Sprintf("%s %s: %s", it.TaskID, taskTitle(it), it.Status)
			if it.ToolCount > 0 {
				line += " · " + plural(it.ToolCount, "tool")
			}
			if v.last[it.TaskID] != line {
				v.last[it.TaskID] = line
				_, _ = fmt.Fprintln(v.w, line)
			}
		}
		return
	}
	v.clear()
	var b strings.Builder
	treeLines(&b, env, true, v.frame, now)
	v.frame++
	out := b.String()
	v.lines = strings.Count(out, "\n")
	_, _ = io.WriteString(v.w, out)
}

// clear erases what the last update drew.
func (v *liveView) clear() {
	if v.terminal && v.lines > 0 {
		_, _ = fmt.Fprintf(v.w, "\x1b[%dA\x1b[J", v.lines)
		v.lines = 0
	}
}

// printTree prints the task tree of env once, as it is at now.
func printTree(w io.Writer, env client.Envelope, live bool, now time.Time) {
	var b strings.Builder
	treeLines(&b, env, live, 0, now)
	_, _ = io.WriteString(w, b.String())
}

// treeLines draws the task contract's task tree: a header per task (icon, profile,
// name), its prompt line, tool rows, and a final row with the result or the
// progress: elapsed against the timeout (a question's wait against its
// own), tools, usage and cost. Drawn once (not live), a task says what
// comes next: the change it left to apply, the question to answer.
func treeLines(b *strings.Builder, env client.Envelope, live bool, frame int, now time.Time) {
	switch {
	case env.Plan != nil:
		b.WriteString(planHeader(env))
	case env.DelegationID != "" && len(env.Items) > 1:
		fmt.Fprintf(b, "%s · %s\n", statusHeader(env.Items), env.DelegationID)
	}
	for i, it := range env.Items {
		icon := spinner[frame%len(spinner)]
		if env.Plan != nil && i < len(env.Plan.Steps) {
			// A step is named by where it sits: its lane or loop, its key.
			st := env.Plan.Steps[i]
			it.Name = strings.Join(append(append([]string(nil), st.Path...), st.Key), "/") + stepNotes(st)
		}
		switch {
		case it.Status == string(api.StateQueued) && env.Plan != nil:
			fmt.Fprintf(b, "  · %s\n", taskTitle(it))
			continue
		case it.Status == string(api.StateSkipped):
			fmt.Fprintf(b, "  – %s\n", taskTitle(it))
			if it.Error != nil {
				fmt.Fprintf(b, "    ╰── Skipped: %s\n", oneLine(it.Error.Message, 200))
			}
			continue
		case it.Status == string(api.StateCompleted):
			icon = "✓"
		case it.Done && (it.Status == string(api.StateCancelled) || it.Status == string(api.StateTerminated)):
			// Stopped on purpose, not failed: the delegate contract's mark
			// for an aborted window.
			icon = "⊘"
		case it.Done:
			icon = "✕"
		case !live:
			icon = "…"
		}
		fmt.Fprintf(b, "  %s %s\n", icon, taskTitle(it))
		rows := it.ToolRows
		if len(rows) > liveToolRows {
			rows = rows[len(rows)-liveToolRows:]
		}
		for _, r := range rows {
			mark := "✓"
			switch r.Status {
			case "running":
				mark = "·"
			case "error":
				mark = "✕"
			}
			fmt.Fprintf(b, "    ├── %s %s %s\n", mark, r.Name, oneLine(r.Args, 60))
		}
		fmt.Fprintf(b, "    ╰── %s\n", finalRow(it, now))
		if it.UIURL != "" && it.Done && !live {
			fmt.Fprintf(b, "        %s\n", it.UIURL)
		}
		if !live {
			nextLines(b, it)
		}
		nestedLines(b, it)
	}
}

// nextLines says, under a task drawn once, what waits for the user: the
// question its child asked, and the change it made in a worktree (which
// is on its branch, not in the checkout, until `subagents apply`).
func nextLines(b *strings.Builder, it client.Item) {
	if q := it.Question; q != nil && !it.Done && q.State == api.QuestionPending {
		fmt.Fprintf(b, "        answer it: subagents reply --question %s %s \"ANSWER\"\n", q.ID, it.TaskID)
	}
	ch := it.Change
	if ch == nil || ch.Empty || it.TaskID == "" {
		return
	}
	switch {
	case ch.Worktree != "":
		// The capture failed: the work is still in the worktree.
		fmt.Fprintf(b, "        change waiting in the worktree %s, not yet on its branch%s\n", ch.Worktree, filesNote(ch.Files))
	case ch.Branch != "":
		fmt.Fprintf(b, "        change waiting on branch %s%s\n", ch.Branch, filesNote(ch.Files))
	default:
		return
	}
	fmt.Fprintf(b, "        subagents apply %[1]s writes it into your checkout; subagents apply --discard %[1]s deletes it\n", it.TaskID)
}

// filesNote is " (N files: a, b, c, …)": how many files a change touches
// (it lists its first 200, activities' maxChangeFiles) and the first few;
// "" when it lists none.
func filesNote(files []string) string {
	if len(files) == 0 {
		return ""
	}
	const shown, listed = 3, 200
	count := plural(len(files), "file")
	if len(files) >= listed {
		count = fmt.Sprintf("%d files or more", len(files))
	}
	names := strings.Join(files[:min(len(files), shown)], ", ")
	if len(files) > shown {
		names += ", …"
	}
	return " (" + count + ": " + names + ")"
}

// nestedLines draws, under a task, what its child delegated: each nested
// session on a line, indented by how deep it sits below the task.
func nestedLines(b *strings.Builder, it client.Item) {
	if len(it.Nested) == 0 {
		return
	}
	// The task is the tree's root: nestedOrder places each run under its
	// parent session, the runs the task started at depth 1.
	runs, depths := nestedOrder(append([]client.ListItem{{ID: it.TaskID}}, it.Nested...))
	for i, r := range runs {
		if depths[i] == 0 {
			continue
		}
		name := r.Name
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(b, "    %s↳ %s · %s · %s · %s\n", strings.Repeat("  ", depths[i]-1), r.ID, r.Agent, r.Status, oneLine(name, 60))
	}
}

// planHeader is a plan's first line: its name and ID, how far it is, and
// what stopped it.
func planHeader(env client.Envelope) string {
	p := env.Plan
	done := 0
	counts := map[api.State]int{}
	for _, st := range p.Steps {
		counts[st.State]++
		if st.State == api.StateCompleted {
			done++
		}
	}
	var more []string
	for _, st := range []api.State{api.StateRunning, api.StateFailed, api.StateSkipped, api.StateCancelled} {
		if counts[st] > 0 {
			more = append(more, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	name := "Plan"
	if p.Name != "" {
		name += " " + p.Name
	}
	head := fmt.Sprintf("%s · %s · %d/%d %s done", name, env.DelegationID, done, len(p.Steps), nouns(len(p.Steps), "step"))
	if len(more) > 0 {
		head += " (" + strings.Join(more, ", ") + ")"
	}
	if p.Attempt > 1 {
		head += fmt.Sprintf(" · attempt %d", p.Attempt)
	}
	head += "\n"
	if p.Stopped != nil {
		head += fmt.Sprintf("  ✕ %s: %s\n", p.Stopped.Code, oneLine(p.Stopped.Message, 200))
	}
	return head
}

// stepNotes says what else a step did: its loop round, verdict, gate runs,
// and whether an earlier attempt's result was kept.
func stepNotes(st api.StepState) string {
	var notes []string
	if st.Round > 1 {
		notes = append(notes, fmt.Sprintf("round %d", st.Round))
	}
	if st.Verdict != "" {
		notes = append(notes, "verdict "+st.Verdict)
	}
	if st.GateRuns > 0 {
		notes = append(notes, fmt.Sprintf("gate ran %d×", st.GateRuns))
	}
	if st.Reused {
		notes = append(notes, "kept from an earlier attempt")
	}
	if len(notes) == 0 {
		return ""
	}
	return " [" + strings.Join(notes, ", ") + "]"
}

// statusHeader is the delegate contract's global status line.
func statusHeader(items []client.Item) string {
	running, done, failed, cancelled := 0, 0, 0, 0
	for _, it := range items {
		switch {
		case !it.Done:
			running++
		case it.Status == string(api.StateCompleted):
			done++
		case it.Status == string(api.StateCancelled) || it.Status == string(api.StateTerminated):
			cancelled++
		default:
			failed++
		}
	}
	header := fmt.Sprintf("Sub-agents: %d running, %d done, %d error", running, done, failed)
	if cancelled > 0 {
		// As the extension's header says it: stopped on purpose is no error.
		header += fmt.Sprintf(", %d cancelled", cancelled)
	}
	return header
}

func taskTitle(it client.Item) string {
	title := it.Agent
	if it.Name != "" && it.Name != it.Agent {
		title += " · " + it.Name
	}
	return title
}

func finalRow(it client.Item, now time.Time) string {
	stats := []string{}
	q := it.Question
	switch {
	case !it.Done && q != nil && !q.Asked.IsZero():
		// No child runs while a question waits, so the turn's timeout
		// (a run's) is not what ends the wait: its own deadline is.
		wait := "asked " + span(now.Sub(q.Asked)) + " ago"
		if !q.Deadline.IsZero() {
			if left := q.Deadline.Sub(now); left > 0 {
				wait += ", times out in " + span(left)
			} else {
				wait += ", timing out"
			}
		}
		stats = append(stats, wait)
	case !it.Done && it.TimeoutSeconds > 0:
		stats = append(stats, fmt.Sprintf("%ds/%ds", it.ElapsedMS/1000, it.TimeoutSeconds))
	case it.ElapsedMS > 0:
		stats = append(stats, fmt.Sprintf("%.1fs", float64(it.ElapsedMS)/1000))
	}
	if it.ToolCount > 0 {
		stats = append(stats, plural(it.ToolCount, "tool"))
	}
	if u := usageLine(it.Usage); u != "" {
		stats = append(stats, u)
	}
	suffix := ""
	if len(stats) > 0 {
		suffix = " (" + strings.Join(stats, " · ") + ")"
	}
	switch {
	case !it.Done && it.Question != nil:
		return "Waits for an answer: " + oneLine(it.Question.Message, 160) + suffix
	case !it.Done:
		text := "Working..."
		if it.LastText != "" {
			text = oneLine(it.LastText, 80)
		}
		return text + suffix
	case it.Error != nil && it.Status != string(api.StateCompleted):
		return endedAs(it.Status) + oneLine(it.Error.Message, 200) + suffix
	case it.Output != "":
		return oneLine(it.Output, 200) + suffix
	}
	return it.Status + suffix
}

// span is a duration as a person reads it, to the second: 45s, 1m1s, 30m,
// 1h, 1h0m5s.
func span(d time.Duration) string {
	s := max(d, 0).Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// plural is n and noun, the noun in the plural unless n is 1: "1 tool",
// "2 tools".
func plural(n int, noun string) string {
	return fmt.Sprintf("%d %s", n, nouns(n, noun))
}

// nouns is noun in the plural unless n is 1.
func nouns(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// agree is the word that agrees with a count: one when n is 1, else many
// ("1 task has", "2 tasks have").
func agree(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// endedAs heads the last row of a task that did not complete with the
// state it ended in (README, "Statuses").
func endedAs(status string) string {
	switch api.State(status) {
	case api.StateCancelled:
		return "Task cancelled: "
	case api.StateTerminated:
		return "Task terminated: "
	case api.StateTimedOut:
		return "Task timed out: "
	}
	return "Task failed: "
}

func usageLine(u api.Usage) string {
	if u.Input == 0 && u.Output == 0 {
		return ""
	}
	s := fmt.Sprintf("↑%s ↓%s", tokens(u.Input), tokens(u.Output))
	if u.Cost > 0 {
		s += fmt.Sprintf(" $%.4f", u.Cost)
	}
	return s
}

func tokens(n int64) string {
	if n >= 1000 {
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}

// oneLine folds s onto one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func (cmd *command) printStarted(env client.Envelope) {
	if env.DelegationID != "" {
		_, _ = fmt.Fprintf(cmd.io.Out, "started %s\n", env.DelegationID)
	}
	for _, it := range env.Items {
		_, _ = fmt.Fprintf(cmd.io.Out, "  %s  %s\n", it.TaskID, taskTitle(it))
	}
	if env.AcceptedTurn > 0 {
		_, _ = fmt.Fprintf(cmd.io.Out, "%s: queued as turn %d\n", env.TaskID, env.AcceptedTurn)
	}
	if env.UIURL != "" {
		_, _ = fmt.Fprintf(cmd.io.Out, "  %s\n", env.UIURL)
	}
}

// printCancel says per task what the cancel did. A task whose cancel was
// applied is still stopping when the answer comes (its child gets SIGTERM,
// then the turn ends): it is shown as cancelling, not with the state it had.
func (cmd *command) printCancel(env client.Envelope) {
	for _, it := range env.Items {
		applied, prior := it.CancelApplied, it.PriorStatus
		if applied == nil && len(env.Items) == 1 {
			applied, prior = env.CancelApplied, env.PriorStatus
		}
		line := fmt.Sprintf("%s: %s", it.TaskID, it.Status)
		switch {
		case applied != nil && *applied && !it.Done:
			line = fmt.Sprintf("%s: cancelling (was %s; subagents wait %s shows its end)", it.TaskID, prior, it.TaskID)
		case applied != nil && *applied:
			line += fmt.Sprintf(" (cancel applied, was %s)", prior)
		case applied != nil:
			line += " (nothing to cancel)"
		}
		_, _ = fmt.Fprintln(cmd.io.Out, line)
	}
	if len(env.Items) != 1 && env.CancelApplied != nil && env.PriorStatus != "" {
		_, _ = fmt.Fprintf(cmd.io.Out, "cancel applied: %v (was %s)\n", *env.CancelApplied, env.PriorStatus)
	}
}

// listTable prints runs as list's table, each at its depth in the tree of
// what delegated what (nestedOrder). Open: the workflow still runs (a
// session between turns takes a send). Each column is as wide as what it
// holds: an ID is never cut, as it is what the next command takes (a plan
// step's, `plan-<UUID>-<key>`, is longer than a delegation's); a name is
// cut at 60 characters. A plan is a delegation (its kind in --json) and
// shows as a plan.
func listTable(w io.Writer, runs []client.ListItem, depths []int) {
	rows := [][]string{{"KIND", "ID", "STATUS", "OPEN", "AGENT", "STARTED", "NAME"}}
	for i, r := range runs {
		kind, id, open, name := r.Kind, r.ID, "-", r.Name
		if kind == "delegation" && api.IsPlanID(r.ID) {
			kind = "plan"
		}
		if depths[i] > 0 {
			id = strings.Repeat("  ", depths[i]-1) + "└ " + id
		}
		if r.Open {
			open = "open"
		}
		if name == "" {
			name = "-"
		}
		rows = append(rows, []string{kind, id, r.Status, open, r.Agent, r.Started.Local().Format("2006-01-02 15:04"), oneLine(name, 60)})
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for c, cell := range row {
			widths[c] = max(widths[c], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for c, cell := range row {
			if c == len(row)-1 {
				// Two spaces before the name, as before the free text.
				b.WriteString("  " + cell + "\n")
				break
			}
			if c > 0 {
				b.WriteString(" ")
			}
			b.WriteString(cell + strings.Repeat(" ", widths[c]-utf8.RuneCountInString(cell)))
		}
	}
	_, _ = io.WriteString(w, b.String())
}
