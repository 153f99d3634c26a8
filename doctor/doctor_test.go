package doctor

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

// TestReportExitCode: no failure exits 0 (warnings too); failures that are
// all about reaching the service exit 3; any other failure 2.
func TestReportExitCode(t *testing.T) {
	down := fail(CheckService, "down", "start it")
	down.unavailable = true
	tests := []struct {
		name   string
		checks []Result
		status Status
		code   int
	}{
		{"all ok", []Result{ok(CheckPi, "fine"), skip(CheckUI, "none")}, OK, errcode.ExitOK},
		{"a warning", []Result{ok(CheckPi, "fine"), warn(CheckDisk, "low", "free some")}, Warn, errcode.ExitOK},
		{"service down", []Result{ok(CheckPi, "fine"), down, skip(CheckSocket, "no service")}, Fail, errcode.ExitUnavailable},
		{"a bad profile", []Result{fail(CheckProfiles, "bad", "edit"), warn(CheckDisk, "low", "free")}, Fail, errcode.ExitBadInput},
		{"both", []Result{down, fail(CheckPi, "none", "install")}, Fail, errcode.ExitBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReport(Context{}, tt.checks)
			if r.Status != tt.status || r.ExitCode != tt.code || errcode.ExitCode(r.Err()) != tt.code {
				t.Fatalf("status %s exit %d (err %v), want %s %d", r.Status, r.ExitCode, r.Err(), tt.status, tt.code)
			}
			n := r.Summary.OK + r.Summary.Warn + r.Summary.Fail + r.Summary.Skip
			if n != len(tt.checks) {
				t.Fatalf("summary %+v counts %d checks, want %d", r.Summary, n, len(tt.checks))
			}
		})
	}
	err := newReport(Context{}, []Result{fail(CheckPi, "x", "y"), fail(CheckNode, "x", "y")}).Err()
	if err == nil || err.Error() != "doctor: 2 checks failed (pi, node)" {
		t.Fatalf("err %v", err)
	}
}

// TestReportJSON: the document's field names, as docs/doctor.md gives
// them.
func TestReportJSON(t *testing.T) {
	r := newReport(Context{Cwd: "/w", TaskQueues: []string{"q"}}, []Result{fail(CheckPi, "no pi", "install it").with("path", "/x")})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"contract_version":"subagents.v1"`, `"op":"doctor"`, `"status":"fail"`, `"exit_code":2`,
		`"summary":{"ok":0,"warn":0,"fail":1,"skip":0}`, `"task_queues":["q"]`,
		`"checks":[{"name":"pi","status":"fail","verdict":"no pi","fix":"install it","details":{"path":"/x"}}]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("document lacks %s:\n%s", want, b)
		}
	}
}

// TestPinnedVersionsMatchThePackage: the pi release and the Node the
// checks expect are those extension/package.json pins.
func TestPinnedVersionsMatchThePackage(t *testing.T) {
	b, err := os.ReadFile("../extension/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Engines         map[string]string `json:"engines"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	if got := pkg.DevDependencies["@earendil-works/pi-coding-agent"]; got != PinnedPi {
		t.Errorf("package.json pins pi %s, the doctor expects %s", got, PinnedPi)
	}
	if got := pkg.Engines["node"]; got != ">="+MinNode {
		t.Errorf("package.json's engines say node %s, the doctor expects >=%s", got, MinNode)
	}
	if len(Checks) != 17 {
		t.Errorf("%d checks named, docs/doctor.md describes 17", len(Checks))
	}
}
