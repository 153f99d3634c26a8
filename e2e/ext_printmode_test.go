package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// TestExtCtrlCThenContinueAsksNoUnaskedTurn: `pi -p` is stopped with
// Ctrl-C (SIGINT to its process group, as a terminal sends it: print mode
// ends at once) while its delegation runs; `pi -c -p QUESTION` continues
// the session. Before, that run answered the question and then, when the
// earlier result came, made a second model turn nobody asked for, whose
// answer -p printed instead of the question's. Now the result comes into
// the session before the question goes to the model: one model call that
// has both, and -p prints its answer.
func TestExtCtrlCThenContinueAsksNoUnaskedTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	slow := finalizeStep("ctrl-c: 5 files checked")
	slow.DelayMS = 3000
	e.model.Script("c-ctrlc", slow)
	e.model.Script("p-ctrlc", call("delegate_to_subagents", map[string]any{"tasks": []map[string]string{{"name": "check", "prompt": "[[script:c-ctrlc]] Check the files."}}}))
	e.model.Script("p-after", scriptedmodel.Step{Text: "4, and the check found 5 files."}, scriptedmodel.Step{Text: "An unasked turn."})

	first := e.startExt([]string{"-p"}, "[[script:p-ctrlc]] Check everything.")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := e.model.WaitForRequests(ctx, 1, func(r scriptedmodel.Request) bool { return r.Script == "c-ctrlc" }); err != nil {
		t.Fatalf("the child never started: %v", err)
	}
	_ = syscall.Kill(-first.cmd.Process.Pid, syscall.SIGINT)
	if code := first.exitCode(t); code == 0 {
		t.Fatal("pi -p went on after Ctrl-C")
	}
	files, _ := filepath.Glob(filepath.Join(e.agentDir, "sessions", "*", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files: %v", files)
	}
	parentID := sessionIDOf(t, files[0])
	if n := e.openDelegations(parentID); n != 1 {
		t.Fatalf("%d open delegations after Ctrl-C, want 1", n)
	}

	after := e.startExt([]string{"-c", "-p"}, "[[script:p-after]] What is 2+2?")
	if code := after.exitCode(t); code != 0 {
		t.Fatalf("pi -c -p exited %d", code)
	}
	if out := strings.TrimSpace(after.events.String()); out != "4, and the check found 5 files." {
		t.Errorf("pi -c -p printed %q, want the question's answer", out)
	}
	reqs := e.model.RequestsFor("p-after")
	if len(reqs) != 1 {
		t.Fatalf("pi -c -p made %d model calls, want 1 (no turn of its own for the earlier result)", len(reqs))
	}
	if !strings.Contains(strings.Join(userTexts(reqs[0]), "\n"), "ctrl-c: 5 files checked") {
		t.Errorf("the question's model call did not have the earlier result: %q", userTexts(reqs[0]))
	}
	if n := e.openDelegations(parentID); n != 0 {
		t.Errorf("%d delegations still wait for the ack", n)
	}
}
