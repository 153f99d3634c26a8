package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
)

// scheduleID is a schedule ID of this test's own: the shared server holds
// every test's schedules.
func scheduleID(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
}

// scheduleCmd runs `subagents schedule --json ARGS` as the test's user in
// its folder, against env (the shared server when nil), and returns its
// envelope and exit code.
func (e *env) scheduleCmd(env []string, args ...string) (client.Envelope, int) {
	e.t.Helper()
	if env == nil {
		env = e.parentEnv()
	}
	code, stdout, stderr := runSubagentsIn(e.t, e.workDir, env, append([]string{"schedule", "--json"}, args...)...)
	var out client.Envelope
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		e.t.Fatalf("subagents schedule %v: exit %d, no envelope: %v\n%s\n%s", args, code, err, stdout, stderr)
	}
	return out, code
}

// mustSchedule is scheduleCmd that must succeed, with one schedule in its
// answer unless the action answers with none.
func (e *env) mustSchedule(env []string, args ...string) client.Envelope {
	e.t.Helper()
	out, code := e.scheduleCmd(env, args...)
	if code != 0 || out.Error != nil {
		e.t.Fatalf("subagents schedule %v: exit %d, %+v", args, code, out.Error)
	}
	return out
}

// waitForSchedule describes id until ok holds, and returns it then.
func (e *env) waitForSchedule(env []string, id, what string, ok func(client.ScheduleItem) bool) client.ScheduleItem {
	e.t.Helper()
	deadline := time.Now().Add(2 * testTimeout)
	for {
		out := e.mustSchedule(env, "describe", id)
		if len(out.Schedules) == 1 && ok(out.Schedules[0]) {
			return out.Schedules[0]
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("schedule %s: no %s after %s: %+v", id, what, 2*testTimeout, out.Schedules)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// finishedRuns counts item's runs that ended, and says whether none runs.
func finishedRuns(item client.ScheduleItem) (int, bool) {
	n, idle := 0, true
	for _, r := range item.Runs {
		if r.Status == string(api.StateRunning) {
			idle = false
		} else {
			n++
		}
	}
	return n, idle
}

// waitingResults are the IDs of cwd's scheduled results that wait for a
// pi session (open ScheduledResult workflows), and their delegations.
func (e *env) waitingResults(c sdkclient.Client, cwd string) (results, delegations []string) {
	t := e.t
	t.Helper()
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = '%s'", api.ScheduledResultWorkflowName, api.CwdKey.GetName(), cwd)
	resp, err := c.ListWorkflow(e.ctx(), &workflowservice.ListWorkflowExecutionsRequest{Query: q})
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range resp.GetExecutions() {
		results = append(results, info.GetExecution().GetWorkflowId())
		var d string
		if p, ok := info.GetMemo().GetFields()["delegation"]; ok {
			_ = json.Unmarshal(p.GetData(), &d)
		}
		delegations = append(delegations, d)
	}
	slices.Sort(results)
	slices.Sort(delegations)
	return results, delegations
}

// deliveredResults are the delegation IDs of the subagents-result messages
// of a pi session file, in order, each as often as it was delivered.
func deliveredResults(t *testing.T, sessionFile string) []string {
	t.Helper()
	var out []string
	for _, entry := range sessionEntries(t, sessionFile) {
		if entry["type"] != "custom_message" || entry["customType"] != "subagents-result" {
			continue
		}
		details, _ := entry["details"].(map[string]any)
		id, _ := details["delegationId"].(string)
		out = append(out, id)
	}
	return out
}

// runSubagentsIn runs the command in dir ("": the test's folder) to its
// end and returns its exit code and output.
func runSubagentsIn(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// The build (once per test binary, a minute on a loaded machine) is
	// not the command's time.
	bin := subagentsBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout(args))
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("run subagents: %v", err)
		}
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}
