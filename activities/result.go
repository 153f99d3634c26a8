package activities

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// A run's result (fill): what the child produced made into its
// api.RunPiResult, sanitized, cut to the output cap with the whole output in
// the artifact file, and the error code that says how the run ended.

// resultToolRows is how many tool rows a result keeps (the latest ones):
// it keeps history small.
const resultToolRows = 20

// verdictChars bounds a finalize's verdict in a result: it is one word (a
// plan's verdicts are at most 32 characters), and one the model made long
// must not grow a history.
const verdictChars = 64

// fill turns what the run produced into the result: sanitized, capped, with
// the full output in the artifact file.
func (a *Activities) fill(res *api.RunPiResult, r *childRun, out outcome) {
	st := &r.stream
	z := a.sanitizer
	res.ExitCode = out.exitCode
	res.StopReason = st.StopReason
	res.Model = st.Model
	res.AutoRetries = st.AutoRetries
	res.Usage = r.prior.Add(st.Usage)
	res.ToolCalls = st.ToolCallCount()
	res.EventCount, res.Timeline = st.Captured, st.Timeline
	res.DurationMS = out.elapsed.Milliseconds()
	rows := st.ToolRows
	if len(rows) > resultToolRows {
		rows = rows[len(rows)-resultToolRows:]
	}
	// Sanitized before their previews were cut (Stream).
	res.ToolRows = append(res.ToolRows, rows...)

	full := z.Sanitize(st.FinalText)
	if f := st.Finalize; f != nil {
		res.Finalize = &api.Finalize{Status: f.Status, Result: z.Sanitize(f.Result), Error: z.Sanitize(f.Error),
			Verdict: clip(z.Sanitize(f.Verdict), verdictChars)}
		full = res.Finalize.Result
		if f.Status == "ERROR" {
			full = res.Finalize.Error
			if res.Finalize.Result != "" {
				full += "\n\n" + res.Finalize.Result
			}
		}
	}
	outputMax := a.cfg.OutputMaxChars
	if r.outputMax > 0 {
		outputMax = r.outputMax
	}
	// Cut once sanitized (above): a cut token would keep its tail.
	cut := Truncate(full, outputMax)
	res.Output = cut.Text
	res.OutputTruncated, res.OutputTotalChars, res.OutputReturnedChars = cut.Truncated, cut.TotalChars, cut.ReturnedChars
	if res.Finalize != nil {
		res.Finalize.Result = Truncate(res.Finalize.Result, outputMax).Text
		res.Finalize.Error = Truncate(res.Finalize.Error, outputMax).Text
	}
	if full != "" {
		res.ArtifactFile = artifactFile(res.SessionFile, r.in.Turn)
		if err := os.WriteFile(res.ArtifactFile, []byte(full), 0o600); err != nil {
			res.ArtifactFile = ""
		}
	}

	timeoutMsg := fmt.Sprintf("Timed out after %ds. Consider resuming with a longer timeout.", int(r.timeout/time.Second))
	switch {
	case out.spawnErr != nil:
		res.Error = errcode.NewInfo(errcode.Failed, "Failed to spawn sub-agent process: "+out.spawnErr.Error())
	case out.stop == stopTimeout:
		res.Error = errcode.NewInfo(errcode.Timeout, timeoutMsg)
	case out.stop == stopLoop:
		res.Error = errcode.NewInfo(errcode.LoopDetected, "Loop detected: sub-agent is repeating the same tool calls")
	case out.stop == stopBudget:
		res.Error = budgetError(out.budget)
	case errors.Is(out.readErr, errLineTooLong):
		res.Error = errcode.NewInfo(errcode.OutputTruncated, fmt.Sprintf(
			"A line of sub-agent output exceeded the %s limit; the child was stopped", sizeText(min(a.cfg.MaxStreamBytes, maxLineBytes))))
	case out.stop == stopOverflow:
		res.Error = errcode.NewInfo(errcode.OutputTruncated, fmt.Sprintf(
			"Sub-agent output exceeded the %s limit; the child was stopped", sizeText(a.cfg.MaxStreamBytes)))
	case out.stop != stopNone:
		// Cancelled or worker stop: RunPi decides what to return.
	case out.readErr != nil:
		res.Error = errcode.NewInfo(errcode.Failed, "reading pi's output: "+out.readErr.Error())
	case st.CommandError != "":
		// A warm child refused its prompt: nothing ran, and pi said why.
		res.Error = errcode.NewInfo(errcode.Failed, z.Sanitize("pi refused the run: "+st.CommandError))
	case st.Failed():
		msg := st.ErrorMessage
		if msg == "" {
			msg = "the model's response ended with stop reason " + st.StopReason
		}
		res.Error = errcode.NewInfo(errcode.Failed, z.Sanitize(msg))
	case out.waitErr != nil:
		msg := fmt.Sprintf("pi exited with code %d", out.exitCode)
		if tail := lastLine(out.stderr); tail != "" {
			msg += ": " + tail
		}
		res.Error = errcode.NewInfo(errcode.Failed, z.Sanitize(msg))
	case res.Finalize == nil && res.Output == "" && res.ToolCalls == 0 && !st.Settled:
		res.Error = errcode.NewInfo(errcode.Failed, "pi ended without an answer")
	case cut.Truncated:
		res.Error = errcode.NewInfo(errcode.OutputTruncated, fmt.Sprintf(
			"Output truncated to %d of %d characters; the full output is in %s", cut.ReturnedChars, cut.TotalChars, z.Sanitize(res.ArtifactFile)))
	}
	a.fillQuestions(res, st.ToolRows)
}

// artifactFile sits next to the session file: the full output of a turn.
func artifactFile(sessionFile string, turn int) string {
	return strings.TrimSuffix(sessionFile, ".jsonl") + fmt.Sprintf(".turn-%d.output.md", max(turn, 1))
}

// sizeText says n bytes in MiB, or KiB below one MiB.
func sizeText(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
