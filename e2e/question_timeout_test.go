package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestQuestionTimeoutFromAStartAndAProfile (issue 39, section 7):
// questionTimeoutSeconds, once settable only by a raw workflow start, is a
// field of a start (`subagents start --question-timeout`, a task of a JSON
// request) and of a profile: a real child's question waits as long as its
// task says, else as long as its profile says; a value out of range is
// INVALID_INPUT (profiles/profile_test.go has a profile's).
func TestQuestionTimeoutFromAStartAndAProfile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.keepWarm()
	e.model.Script("asks-start", askingScript()...)
	e.model.Script("asks-profile", askingScript()...)
	e.model.Script("asks-task", askingScript()...)
	e.startWorker(shared.client)
	c := e.cli()
	asker := e.askerProfile()
	e.writeProfile("patient", "---\nname: patient\ndescription: Waits long for answers\ntools: read, contact_supervisor\nquestionTimeoutSeconds: 7200\n---\nAsk when a decision is not yours.\n")

	// The task's own timeout, from the command line.
	started, out := c.json(0, "", "start", "--agent", asker, "--cwd", e.workDir, "--question-timeout", "90m", "[[script:asks-start]] Set up the database.")
	if len(started.Items) != 1 {
		t.Fatalf("start: %s", out)
	}
	first := started.Items[0].TaskID
	q := c.waitForQuestion(first).Question
	if got := q.Deadline.Sub(q.Asked); got != 90*time.Minute {
		t.Errorf("--question-timeout 90m: the question waits %s", got)
	}

	// A JSON request of two tasks (a delegation of its sessions): the
	// profile's for the task that names none, the task's own over it.
	req := `{"tasks":[{"name":"db","prompt":"[[script:asks-profile]] Set up the database.","profile":"patient","cwd":"` + e.workDir + `"},` +
		`{"name":"cache","prompt":"[[script:asks-task]] Set up the cache.","profile":"patient","questionTimeoutSeconds":600,"cwd":"` + e.workDir + `"}]}`
	started, out = c.json(0, req, "start", "--input", "-")
	if len(started.Items) != 2 {
		t.Fatalf("start --input: %s", out)
	}
	for i, want := range []time.Duration{2 * time.Hour, 10 * time.Minute} {
		q = c.waitForQuestion(started.Items[i].TaskID).Question
		if got := q.Deadline.Sub(q.Asked); got != want {
			t.Errorf("task %d of the request: the question waits %s, want %s", i, got, want)
		}
	}
	// Nobody answers: the waiting tasks end here.
	c.json(0, "", "cancel", first, started.Items[0].TaskID, started.Items[1].TaskID)

	// Out of range: refused before anything starts.
	if _, out := c.json(2, "", "start", "--agent", asker, "--cwd", e.workDir, "--question-timeout", "169h", "Anything."); !strings.Contains(out, "questionTimeoutSeconds must be 1 to 604800") {
		t.Errorf("--question-timeout past a week: %s", out)
	}
	bad := `{"tasks":[{"name":"db","prompt":"Anything.","questionTimeoutSeconds":-5,"cwd":"` + e.workDir + `"}]}`
	if _, out := c.json(2, bad, "start", "--input", "-"); !strings.Contains(out, "INVALID_INPUT") || !strings.Contains(out, "questionTimeoutSeconds") {
		t.Errorf("a negative questionTimeoutSeconds: %s", out)
	}
}
