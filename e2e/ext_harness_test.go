package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// extPi is a real parent pi with the extension, started with the
// arguments a test gives (a print run with -p or -c, an RPC session with
// no first prompt, ...), its stderr kept: where a print run says what the
// extension has to tell.
type extPi struct {
	*parentPi
	stderr *syncBuffer
}

// startExt starts pi with the extension and args (the mode, the session)
// in the test's folder. For an RPC session, prompt (when set) is sent as
// the first command; otherwise it is the run's one prompt.
func (e *env) startExt(args []string, prompt string) *extPi {
	e.t.Helper()
	rpc := false
	for i, a := range args {
		rpc = rpc || (a == "--mode" && i+1 < len(args) && args[i+1] == "rpc")
	}
	all := append([]string{"-e", parentExtension(e.t)}, args...)
	if !rpc && prompt != "" {
		all = append(all, prompt)
	}
	stderr := &syncBuffer{}
	p := &extPi{parentPi: e.spawnPi(all, stderr), stderr: stderr}
	if !rpc {
		_ = p.stdin.Close()
	} else if prompt != "" {
		p.send(e.t, map[string]any{"type": "prompt", "message": prompt})
	}
	e.t.Cleanup(func() {
		p.kill()
		<-p.done
		if e.t.Failed() {
			e.t.Logf("pi %v events in short:\n%s\nstderr:\n%s", args, eventSummary(p.parentPi), p.stderr.String())
			var asked []string
			for _, r := range e.model.Requests() {
				asked = append(asked, fmt.Sprintf("%s#%d", r.Script, r.StepIdx))
			}
			e.t.Logf("model requests (script#step): %v", asked)
		}
	})
	return p
}

// exitCode waits for the pi to end by itself and returns its exit code.
func (p *extPi) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * testTimeout):
		t.Fatal("pi did not finish")
	}
	return p.cmd.ProcessState.ExitCode()
}

// toolEnd is what pi reported of one tool call's end (tool_execution_end).
type toolEnd struct {
	Tool    string
	IsError bool
	Text    string
	Details map[string]any
}

// toolEnds are the ends of every call of tool, in order ("" for every tool).
func toolEnds(p *parentPi, tool string) []toolEnd {
	var out []toolEnd
	for _, line := range strings.Split(p.events.String(), "\n") {
		var ev struct {
			Type     string `json:"type"`
			ToolName string `json:"toolName"`
			IsError  bool   `json:"isError"`
			Result   struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
				Details map[string]any `json:"details"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Type != "tool_execution_end" || (tool != "" && ev.ToolName != tool) {
			continue
		}
		var text []string
		for _, c := range ev.Result.Content {
			text = append(text, c.Text)
		}
		out = append(out, toolEnd{Tool: ev.ToolName, IsError: ev.IsError, Text: strings.Join(text, "\n"), Details: ev.Result.Details})
	}
	return out
}

// waitToolEnds waits until tool has ended n times and returns the ends.
func waitToolEnds(t *testing.T, p *parentPi, tool string, n int) []toolEnd {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		if ends := toolEnds(p, tool); len(ends) >= n {
			return ends
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s ended %d times, want %d", tool, len(toolEnds(p, tool)), n)
		}
		select {
		case <-p.done:
			if ends := toolEnds(p, tool); len(ends) >= n {
				return ends
			}
			t.Fatalf("pi exited after %d ends of %s, want %d: %v", len(toolEnds(p, tool)), tool, n, p.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sessionEntries are the entries of a pi session file, each decoded.
func sessionEntries(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("session line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// countIn counts the lines of p's events that hold every one of subs.
func countIn(p *parentPi, subs ...string) int {
	n := 0
	for _, line := range strings.Split(p.events.String(), "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

// extWaitFor polls cond until it holds, failing the test after testTimeout.
func extWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eventSummary is one short line per event of p: its type, and what names
// it (a tool, a custom message's type, a notification's text, a response's
// command), so that a failure's log shows the run's course in a screenful.
func eventSummary(p *parentPi) string {
	var out []string
	for _, line := range strings.Split(p.events.String(), "\n") {
		var ev struct {
			Type     string `json:"type"`
			ToolName string `json:"toolName"`
			Method   string `json:"method"`
			Message  any    `json:"message"`
			Command  string `json:"command"`
			Success  *bool  `json:"success"`
			Error    string `json:"error"`
			IsError  bool   `json:"isError"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			out = append(out, fmt.Sprintf("%.200s", line))
			continue
		}
		s := ev.Type
		switch m := ev.Message.(type) {
		case string:
			s += fmt.Sprintf(" %.160q", m)
		case map[string]any:
			s += fmt.Sprintf(" %v", m["role"])
			if ct, ok := m["customType"]; ok {
				s += fmt.Sprintf(" %v", ct)
			}
			if sr, ok := m["stopReason"]; ok {
				s += fmt.Sprintf(" stop=%v %.120v", sr, m["errorMessage"])
			}
		}
		if ev.ToolName != "" {
			s += fmt.Sprintf(" %s isError=%v", ev.ToolName, ev.IsError)
		}
		if ev.Command != "" {
			s += fmt.Sprintf(" %s success=%v %s", ev.Command, ev.Success != nil && *ev.Success, ev.Error)
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

// eventsOfType counts p's events whose own type is typ (a nested object
// of that type, such as a task's timeline in a result's details, is not
// one).
func eventsOfType(p *parentPi, typ string) int {
	n := 0
	for _, line := range strings.Split(p.events.String(), "\n") {
		var ev struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == typ {
			n++
		}
	}
	return n
}

// waitEventCount waits until p has had n events of type typ.
func waitEventCount(t *testing.T, p *parentPi, typ string, n int) {
	t.Helper()
	extWaitFor(t, fmt.Sprintf("%d %s events", n, typ), func() bool { return eventsOfType(p, typ) >= n })
}
