package dev

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// The tour's steps (tour.go), one per capability. Each runs the commands
// it then prints, with --json, in the tour's project; a prompt's
// [[script:NAME]] picks the tour's scripts/NAME.json.

// failed is r with err.
func (r tourResult) failed(err error) tourResult {
	r.err = err
	return r
}

// delegation: one task, waited for.
func (t *tour) delegation(ctx context.Context) tourResult {
	args := []string{"run", "--agent", "scout", "[[script:delegate]] Where is the greeting set?"}
	r := tourResult{try: []string{command(args...)}}
	it, err := t.oneTask(ctx, args...)
	if err != nil {
		return r.failed(err)
	}
	r.lines = []string{
		fmt.Sprintf("scout %s %s: its session's workflow ran the child pi, which read greet.sh", it.TaskID, it.Status),
		"answer: " + clip(it.Output, 100),
	}
	return r
}

// batch: three tasks at once, in one delegation.
func (t *tour) batch(ctx context.Context) tourResult {
	args := []string{"run", "--input", "../batch.json"}
	r := tourResult{try: []string{command(args...)}}
	env, err := t.cli(ctx, args...)
	if err != nil {
		return r.failed(err)
	}
	if len(env.Items) != 3 {
		return r.failed(errcode.Errorf(errcode.Failed, "%d tasks in the answer, want 3", len(env.Items)))
	}
	var answers []string
	for _, it := range env.Items {
		if err := ran(it); err != nil {
			return r.failed(err)
		}
		answers = append(answers, it.Name+": "+clip(it.Output, 44))
	}
	r.lines = []string{
		fmt.Sprintf("%s: 3 tasks side by side, each a session of its own, all %s", env.DelegationID, env.Status),
		strings.Join(answers, " · "),
	}
	return r
}

// plan: two lanes of writers (one with a gate), then a review loop that
// takes two rounds.
func (t *tour) plan(ctx context.Context) tourResult {
	args := []string{"run", "--plan", "../plan.yaml"}
	r := tourResult{try: []string{command(args...)}}
	env, err := t.cli(ctx, args...)
	if err != nil {
		return r.failed(err)
	}
	for _, it := range env.Items {
		if err := ran(it); err != nil {
			return r.failed(err)
		}
	}
	if env.Plan == nil || env.Status != string(api.StateCompleted) {
		return r.failed(errcode.Errorf(errcode.Failed, "the plan %s ended %s", env.DelegationID, env.Status))
	}
	step := func(key string) api.StepState {
		i := slices.IndexFunc(env.Plan.Steps, func(s api.StepState) bool { return s.Key == key })
		if i < 0 {
			return api.StepState{}
		}
		return env.Plan.Steps[i]
	}
	gated, review := step("api"), step("review")
	if gated.GateRuns < 1 || review.Round < 2 || review.Verdict != "clean" {
		return r.failed(errcode.Errorf(errcode.Failed, "the plan %s: gate runs %d, review round %d verdict %q; want a gate run and a clean review in round 2",
			env.DelegationID, gated.GateRuns, review.Round, review.Verdict))
	}
	// The review's item is its last round's session.
	lastReview := ""
	if i := slices.IndexFunc(env.Items, func(it client.Item) bool { return it.Name == "review" }); i >= 0 {
		lastReview = env.Items[i].Output
	}
	r.lines = []string{
		fmt.Sprintf("%s %s: lanes api and ui wrote side by side; api's gate (grep -q hello out/api.txt) passed, %d run", env.DelegationID, env.Status, gated.GateRuns),
		fmt.Sprintf("review loop: round 1 asked for changes, ui's session fixed them, round %d was %s: %s", review.Round, review.Verdict, clip(lastReview, 60)),
	}
	return r
}

// worktree: a writer in a git worktree of its own, its change applied.
func (t *tour) worktree(ctx context.Context) tourResult {
	args := []string{"run", "--input", "../worktree.json"}
	r := tourResult{}
	if t.gitError != nil {
		r.skipped = t.gitError.Error()
		return r
	}
	it, err := t.oneTask(ctx, args...)
	if err != nil {
		return r.failed(err)
	}
	if it.Change == nil || it.Change.Empty || !slices.Contains(it.Change.Files, "greet.sh") {
		return r.failed(errcode.Errorf(errcode.Failed, "task %s: no change of greet.sh in its result (%+v)", it.TaskID, it.Change))
	}
	applied, err := t.cli(ctx, "apply", it.TaskID)
	if err != nil {
		return r.failed(err)
	}
	if applied.Status != "applied" {
		return r.failed(errcode.Errorf(errcode.Failed, "subagents apply %s: %s", it.TaskID, applied.Status))
	}
	b, err := os.ReadFile(filepath.Join(t.project, "greet.sh"))
	if err != nil || !strings.Contains(string(b), "echo hello") {
		return r.failed(errcode.Errorf(errcode.Failed, "greet.sh after the apply: %q %v", b, err))
	}
	r.lines = []string{
		fmt.Sprintf("implementer %s wrote greet.sh in a worktree of its own; the change waited on branch %s", it.TaskID, it.Change.Branch),
		"subagents apply wrote it into project/: greet.sh prints hello now (not committed: git diff shows it)",
	}
	r.try = []string{"git checkout greet.sh && " + command("apply", it.TaskID) + "   # writes the change again"}
	return r
}

// theAnswer is what the tour replies to the asker's question.
const theAnswer = "Make it hello, it is friendlier."

// question: a child asks (contact_supervisor), the tour answers with
// `subagents reply`, and the child goes on in the same turn.
func (t *tour) question(ctx context.Context) tourResult {
	args := []string{"start", "--agent", "asker", "[[script:question]] Pick the greeting greet.sh prints."}
	r := tourResult{try: []string{command(args...), command("questions") + "   # the waiting question, and the command that answers it"}}
	started, err := t.cli(ctx, args...)
	if err != nil {
		return r.failed(err)
	}
	id := started.TaskID
	if id == "" && len(started.Items) == 1 {
		id = started.Items[0].TaskID
	}
	asked, err := t.cli(ctx, "wait", "--questions", id)
	if err != nil {
		return r.failed(err)
	}
	it, err := oneItem(asked)
	if err != nil {
		return r.failed(err)
	}
	if it.Question == nil {
		return r.failed(errcode.Errorf(errcode.Failed, "task %s ended %s without asking", id, it.Status))
	}
	if _, err := t.cli(ctx, "reply", id, theAnswer); err != nil {
		return r.failed(err)
	}
	done, err := t.cli(ctx, "wait", id)
	if err != nil {
		return r.failed(err)
	}
	if it, err = oneItem(done); err == nil {
		err = ran(it)
	}
	if err != nil {
		return r.failed(err)
	}
	if !strings.Contains(it.Output, theAnswer) {
		return r.failed(errcode.Errorf(errcode.Failed, "task %s's answer does not use the reply: %q", id, it.Output))
	}
	r.lines = []string{
		fmt.Sprintf("asker %s asked (%s): %s", id, asked.Items[0].Question.Reason, asked.Items[0].Question.Message),
		fmt.Sprintf("the tour answered with subagents reply; the child went on in the same turn: %s", clip(it.Output, 80)),
	}
	return r
}

// nested: a child whose profile lists the task tool delegates to a scout of
// its own.
func (t *tour) nested(ctx context.Context) tourResult {
	args := []string{"run", "--agent", "lead", "[[script:nested-lead]] Find out, through a scout of your own, where the greeting is set."}
	r := tourResult{}
	if t.ext == "" {
		r.skipped = fmt.Sprintf("a child that delegates loads the pi extension's %s, which is in none of %s: set SUBAGENTS_EXTENSION_DIR to the extension's folder "+
			"(extension/ of a clone, after make build; or the @durable-pi/subagents that pi install npm:@durable-pi/subagents put in place) and run the tour again",
			"src/nested.ts", strings.Join(t.extDirs, ", "))
		return r
	}
	r.try = []string{command(args...)}
	it, err := t.oneTask(ctx, args...)
	if err != nil {
		return r.failed(err)
	}
	st, err := t.cli(ctx, "status", it.TaskID)
	if err != nil {
		return r.failed(err)
	}
	if len(st.Items) != 1 || len(st.Items[0].Nested) == 0 {
		return r.failed(errcode.Errorf(errcode.Failed, "status %s shows no task under it", it.TaskID))
	}
	n := st.Items[0].Nested[0]
	r.lines = []string{
		fmt.Sprintf("lead %s delegated with its own task tool: %s %s ran one level deeper, %s", it.TaskID, n.Agent, n.ID, n.Status),
		"answer: " + clip(it.Output, 100),
	}
	r.try = append(r.try, command("list", "--parent-session", it.TaskID)+"   # what the lead delegated")
	return r
}

// schedule: a delegation that fires a few seconds ahead, whose result then
// waits for the folder's next pi session.
func (t *tour) schedule(ctx context.Context) tourResult {
	args := []string{"schedule", "create", "--at", "5s", "--agent", "scout", "[[script:schedule]] What does greet.sh print now?"}
	r := tourResult{try: []string{command(args...)}}
	made, err := t.cli(ctx, args...)
	if err != nil {
		return r.failed(err)
	}
	if len(made.Schedules) != 1 {
		return r.failed(errcode.Errorf(errcode.Failed, "schedule create answered %d schedules", len(made.Schedules)))
	}
	id := made.Schedules[0].ID
	created := time.Now()
	r.try = append(r.try, command("schedule", "describe", id)+"   # its run, and its result waiting for a pi session")
	var run client.ScheduleRun
	for {
		env, err := t.cli(ctx, "schedule", "describe", id)
		if err != nil {
			return r.failed(err)
		}
		if len(env.Schedules) == 1 && len(env.Schedules[0].Runs) > 0 {
			run = env.Schedules[0].Runs[0]
			if run.Status != "" && run.Status != string(api.StateRunning) && run.ResultID != "" {
				break
			}
		}
		select {
		case <-ctx.Done():
			return r.failed(errcode.Errorf(errcode.Failed, "schedule %s: no finished run %s after it was made (last: %+v)", id, time.Since(created).Round(time.Second), run))
		case <-time.After(500 * time.Millisecond):
		}
	}
	if run.Status != string(api.StateCompleted) {
		return r.failed(errcode.Errorf(errcode.Failed, "schedule %s: its run %s ended %s: %s", id, run.DelegationID, run.Status, run.Summary))
	}
	if run.Delivered {
		return r.failed(errcode.Errorf(errcode.Failed, "schedule %s: its result was delivered already, to %s", id, run.ClaimedBy))
	}
	if t.ext != "" {
		// The tour's pi config loads the extension (runTour), which takes
		// the folder's results at its start.
		r.try = append(r.try, "pi   # here: the result comes in as a message at its start, once (describe then says delivered)")
	}
	r.lines = []string{
		fmt.Sprintf("schedule %s fired 5 s after it was made, with no pi open; its run %s %s: %s", id, run.DelegationID, run.Status, clip(run.Summary, 60)),
		fmt.Sprintf("its result waits in workflow %s for the next pi session started in project/, which receives it once", run.ResultID),
	}
	return r
}

// crash: the worker is killed (SIGKILL) while a child runs; the next
// worker continues the child's pi session.
func (t *tour) crash(ctx context.Context) tourResult {
	args := []string{"start", "--agent", "scout", "[[script:crash]] List the project's files."}
	r := tourResult{}
	since := len(t.model.RequestsFor("crash"))
	started, err := t.cli(ctx, args...)
	if err != nil {
		return r.failed(err)
	}
	id := started.TaskID
	if id == "" && len(started.Items) == 1 {
		id = started.Items[0].TaskID
	}
	r.try = []string{command("status", "--json", id) + `   # "run_attempt": 2, "continued": true`}
	// Killed while the child waits for its last answer (the script's
	// delay): it has run a tool, and its session file holds it.
	if _, err := t.model.WaitForRequests(ctx, since+1, func(q scriptedmodel.Request) bool { return q.Script == "crash" && q.StepIdx == 1 }); err != nil {
		return r.failed(errcode.Errorf(errcode.Failed, "the crash step's child did not start: %v", err))
	}
	killed := t.worker.pid()
	t.worker.kill()
	killedAt := time.Now()
	if err := t.worker.start(); err != nil {
		return r.failed(err)
	}
	done, err := t.cli(ctx, "wait", id)
	if err != nil {
		return r.failed(err)
	}
	it, err := oneItem(done)
	if err == nil {
		err = ran(it)
	}
	if err != nil {
		return r.failed(err)
	}
	if it.RunAttempt < 2 || !it.Continued {
		return r.failed(errcode.Errorf(errcode.Failed, "task %s completed on attempt %d (continued: %v); the kill did not hit it", id, it.RunAttempt, it.Continued))
	}
	r.lines = []string{
		fmt.Sprintf("worker pid %d KILLED (SIGKILL) while scout %s ran; worker pid %d took over", killed, id, t.worker.pid()),
		fmt.Sprintf("the task completed %.0fs after the kill, on attempt %d, continuing its pi session: %s", time.Since(killedAt).Seconds(), it.RunAttempt, clip(it.Output, 60)),
	}
	return r
}
