package doctor

import (
	"strings"
	"testing"
)

// TestPrint: one line per check with its status and verdict, the fix under
// each failure and warning (not under an ok or a skip), and the total.
func TestPrint(t *testing.T) {
	r := newReport(Context{Cwd: "/src/app", DataDir: "/d", Address: "127.0.0.1:7233", Namespace: "default", TaskQueues: []string{"subagents"}, Local: true},
		[]Result{ok(CheckPi, "pi 0.87.1"), fail(CheckService, "no service", "start it"), skip(CheckSocket, "no service"), warn(CheckDisk, "low", "free some")})
	var b strings.Builder
	if err := Print(&b, r); err != nil {
		t.Fatal(err)
	}
	want := `subagents doctor: /src/app
  (local service in /d, Temporal 127.0.0.1:7233, namespace default, task queue subagents)

ok    pi       pi 0.87.1
FAIL  service  no service
               fix: start it
skip  socket   no service
WARN  disk     low
               fix: free some

1 failed, 1 warning, 1 ok, 1 skipped
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
