// Package doctor is `subagents doctor` (docs/doctor.md): it checks what
// durable subagents need on this machine and in one folder, and says of
// each thing, in one line, whether it holds and how to fix it. Each check
// is a small function given what it looks at (a file's content, a lock's
// state, a frontend's answers), so that it is tested on its own; Run runs
// them side by side under one deadline and reports them in order, a check
// that runs out of time saying so, and a check that an earlier failure
// makes pointless (no service, no namespace) is skipped with the reason. Nothing here starts,
// stops or changes anything: a doctor that started the service would hide
// the very problem it is asked about.
package doctor

import (
	"fmt"
	"strings"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// Status is how a check came out.
type Status string

// The statuses, from good to bad; Skip is a check that could not run.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
	Skip Status = "skip"
)

// The checks' names, in the order Run runs them: stable, as the --json
// document and docs/doctor.md name them.
const (
	CheckPi               = "pi"
	CheckNode             = "node"
	CheckService          = "service"
	CheckSocket           = "socket"
	CheckAPIKey           = "api_key"
	CheckNamespace        = "namespace"
	CheckSearchAttributes = "search_attributes"
	CheckWorkers          = "workers"
	CheckProfiles         = "profiles"
	CheckPlans            = "plans"
	CheckSettings         = "settings"
	CheckModelKeys        = "model_keys"
	CheckUI               = "ui"
	CheckDisk             = "disk"
	CheckStaleLocks       = "stale_locks"
	CheckStaleWorktrees   = "stale_worktrees"
	CheckUnacknowledged   = "unacknowledged"
)

// Checks are the names of every check, in order.
var Checks = []string{
	CheckPi, CheckNode, CheckService, CheckSocket, CheckAPIKey, CheckNamespace, CheckSearchAttributes, CheckWorkers,
	CheckProfiles, CheckPlans, CheckSettings, CheckModelKeys, CheckUI, CheckDisk,
	CheckStaleLocks, CheckStaleWorktrees, CheckUnacknowledged,
}

// Result is one check's outcome: its verdict in one line and, unless it
// is ok, what to do about it.
type Result struct {
	Name    string         `json:"name"`
	Status  Status         `json:"status"`
	Verdict string         `json:"verdict"`
	Fix     string         `json:"fix,omitempty"`
	Details map[string]any `json:"details,omitempty"`
	// unavailable marks a failure to reach the service or Temporal: the
	// exit code says so (3) when nothing else failed.
	unavailable bool
	// late marks a check that ran out of time (bounds.go).
	late bool
}

func ok(name, verdict string) Result { return Result{Name: name, Status: OK, Verdict: verdict} }

func warn(name, verdict, fix string) Result {
	return Result{Name: name, Status: Warn, Verdict: verdict, Fix: fix}
}

func fail(name, verdict, fix string) Result {
	return Result{Name: name, Status: Fail, Verdict: verdict, Fix: fix}
}

func skip(name, why string) Result { return Result{Name: name, Status: Skip, Verdict: why} }

// with adds a detail.
func (r Result) with(key string, v any) Result {
	if r.Details == nil {
		r.Details = map[string]any{}
	}
	r.Details[key] = v
	return r
}

// Summary counts the checks by status.
type Summary struct {
	OK   int `json:"ok"`
	Warn int `json:"warn"`
	Fail int `json:"fail"`
	Skip int `json:"skip"`
}

// Context is what the checks looked at: the folder and the service its
// delegations go to.
type Context struct {
	Cwd        string   `json:"cwd"`
	DataDir    string   `json:"data_dir"`
	AgentDir   string   `json:"agent_dir"`
	Address    string   `json:"address"`
	Namespace  string   `json:"namespace"`
	TaskQueues []string `json:"task_queues"`
	// Local: the address is this machine's local service (subagents dev).
	Local bool   `json:"local"`
	UIURL string `json:"ui_url,omitempty"`
}

// Report is the doctor's whole answer, the --json document: its fields
// are only ever added to.
type Report struct {
	ContractVersion string `json:"contract_version"`
	Op              string `json:"op"`
	// Status is the worst of the checks' (skip counts as ok).
	Status   Status   `json:"status"`
	ExitCode int      `json:"exit_code"`
	Summary  Summary  `json:"summary"`
	Context  Context  `json:"context"`
	Checks   []Result `json:"checks"`
}

// newReport sums up results.
func newReport(ctx Context, results []Result) Report {
	r := Report{ContractVersion: client.ContractVersion, Op: "doctor", Status: OK, Context: ctx, Checks: results}
	for _, c := range results {
		switch c.Status {
		case OK:
			r.Summary.OK++
		case Warn:
			r.Summary.Warn++
			if r.Status == OK {
				r.Status = Warn
			}
		case Fail:
			r.Summary.Fail++
			r.Status = Fail
		case Skip:
			r.Summary.Skip++
		}
	}
	r.ExitCode = errcode.ExitCode(r.Err())
	return r
}

// Err is nil when no check failed (warnings pass). Otherwise it is coded
// for the command's exit code: SERVICE_UNAVAILABLE (3) when every failure
// is that the service or Temporal cannot be reached, else INVALID_INPUT
// (2: the set-up is wrong; fix it and run again).
func (r Report) Err() error {
	var failed []string
	reach := true
	for _, c := range r.Checks {
		if c.Status == Fail {
			failed = append(failed, c.Name)
			reach = reach && c.unavailable
		}
	}
	if len(failed) == 0 {
		return nil
	}
	msg := fmt.Sprintf("doctor: %d %s failed (%s)", len(failed), plural(len(failed), "check", "checks"), strings.Join(failed, ", "))
	if reach {
		return errcode.New(errcode.ServiceUnavailable, msg)
	}
	return errcode.New(errcode.InvalidInput, msg)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
