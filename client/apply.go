package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/gitrepo"
)

// What `apply` did with each task's change: an apply item's status (the
// envelope's is the outcome of them all: conflict, failed, else applied or
// discarded).
const (
	// ApplyApplied: the change is in the checkout (or was already).
	ApplyApplied = "applied"
	// ApplyConflict: the change does not apply to the checkout as it is;
	// nothing of it was written (APPLY_CONFLICT names the files).
	ApplyConflict = "conflict"
	// ApplyDiscarded: the change's branch and patch are deleted.
	ApplyDiscarded = "discarded"
	// ApplyEmpty: the task changed no file: nothing to apply or discard.
	ApplyEmpty = "empty"
	// ApplyFailed: the task has no change to apply here (it ran without a
	// worktree, still runs, or its branch is gone); the error says which.
	ApplyFailed = "failed"
)

// maxNamedFiles is how many files an apply's line names; the item's
// change lists the rest in its patch.
const maxNamedFiles = 10

// Apply applies the change of the latest turn of session id, or of each
// task of delegation or plan id, to the user's checkout: the git
// repository at the session's cwd, as a three-way merge of the change from
// its base onto the files as they are now, all or nothing for each task
// (docs/worktrees.md). A task whose change conflicts with the checkout is
// an item with status conflict and an APPLY_CONFLICT error naming the
// files, and nothing of it is written. With discard, each change's branch
// and patch are deleted instead. It runs git here, where the caller is:
// the checkout and the branch must be on this machine (the local service's
// worker, or a worker that shares the file system).
func (c *Client) Apply(ctx context.Context, id string, discard bool) (Envelope, error) {
	_, k, err := c.describe(ctx, id)
	if err != nil {
		return Envelope{}, err
	}
	env := Envelope{ContractVersion: ContractVersion, Op: "apply", Backend: Backend, Done: true}
	var tasks []Item
	if k == kindSession {
		env.TaskID = id
		tasks = []Item{{TaskID: id}}
	} else {
		st, err := c.status(ctx, "status", id)
		if err != nil {
			return Envelope{}, err
		}
		env.DelegationID, env.TaskID, env.Plan = st.DelegationID, st.TaskID, nil
		tasks = st.Items
	}
	var lines []string
	for _, t := range tasks {
		it := c.applyTask(ctx, t, discard)
		env.Items = append(env.Items, it)
		lines = append(lines, it.Output)
	}
	env.Status = applyOutcome(env.Items, discard)
	env.Text = strings.Join(lines, "\n")
	return env, nil
}

// applyOutcome is the status of an apply of several tasks: conflict when
// any conflicted, failed when any failed, else what was done.
func applyOutcome(items []Item, discard bool) string {
	out := ApplyApplied
	if discard {
		out = ApplyDiscarded
	}
	for _, it := range items {
		switch it.Status {
		case ApplyConflict:
			return ApplyConflict
		case ApplyFailed:
			out = ApplyFailed
		}
	}
	return out
}

// applyTask applies (or discards) the change of task t's latest turn.
func (c *Client) applyTask(ctx context.Context, t Item, discard bool) Item {
	it := Item{TaskID: t.TaskID, Index: t.Index, Name: t.Name, Agent: t.Agent, Done: true}
	label := taskLabel(t)
	fail := func(err error) Item {
		it.Status, it.Error = ApplyFailed, errcode.InfoOf(err)
		it.Output = fmt.Sprintf("%s: %s", label, it.Error.Message)
		return it
	}
	_, st, err := c.sessionStatus(ctx, "apply", t.TaskID)
	if err != nil {
		return fail(err)
	}
	if it.Agent == "" {
		it.Agent = api.AgentName(st.Agent)
	}
	if (st.State == api.StateRunning || st.State == api.StateQueued) && c.open(ctx, t.TaskID) {
		return fail(errcode.Errorf(errcode.SessionRunning,
			"still running: its change is whole once the turn has ended (subagents wait %s)", t.TaskID))
	}
	var ch *api.Change
	if st.LastTurn != nil {
		ch = st.LastTurn.Result.Change
	}
	if ch == nil {
		return fail(errcode.New(errcode.InvalidInput,
			"no change to apply: its latest turn did not run in a worktree (worktree: true) or ended before it had one"))
	}
	it.ArtifactFile = ch.PatchFile
	if ch.Empty {
		it.Status, it.Output = ApplyEmpty, label+": changed no file; nothing to "+map[bool]string{false: "apply", true: "discard"}[discard]
		return it
	}
	if err := sameCheckout(ctx, st.Cwd, ch.Repo); err != nil {
		return fail(err)
	}
	if ch.Worktree != "" {
		// Its capture failed: the child's work may still be in its
		// worktree, not on the branch.
		refused, err := settleWorktree(ctx, ch, t.TaskID, discard)
		if err != nil {
			return fail(err)
		}
		if len(refused) > 0 {
			// As the worker's own capture fails the run: the rest is on
			// the branch, and a second apply takes it knowingly.
			return fail(errcode.Errorf(errcode.PermissionDenied,
				"its worktree held paths git refuses to write (outside the checkout, or in its .git folder): %s; they were left out of its change (branch %s) and nothing was applied. "+
					"Apply again to apply the rest (subagents apply %s), or discard it (subagents apply --discard %s)",
				refusalList(refused), ch.Branch, t.TaskID, t.TaskID))
		}
	}
	tip, err := gitrepo.BranchTip(ctx, ch.Repo, ch.Branch)
	if err != nil {
		return fail(errcode.Wrap(errcode.Failed, err, err.Error()))
	}
	if tip == "" {
		if ch.Worktree != "" && discard {
			// The worktree held nothing on the branch yet: gone with it.
			it.Status, it.ArtifactFile = ApplyDiscarded, ""
			it.Output = fmt.Sprintf("%s: discarded its change (its worktree removed)", label)
			return it
		}
		return fail(errcode.Errorf(errcode.InvalidInput, "its branch %s is gone from %s: the change was discarded", ch.Branch, ch.Repo))
	}
	if discard {
		if err := gitrepo.DeleteBranch(ctx, ch.Repo, ch.Branch); err != nil {
			return fail(errcode.Wrap(errcode.Failed, err, err.Error()))
		}
		if err := removePatch(ch.PatchFile, t.TaskID); err != nil {
			return fail(errcode.Wrap(errcode.Failed, err, err.Error()))
		}
		it.Status, it.ArtifactFile = ApplyDiscarded, ""
		it.Output = fmt.Sprintf("%s: discarded its change (branch %s and its patch deleted)", label, ch.Branch)
		return it
	}
	res, err := gitrepo.ApplyChange(ctx, ch.Repo, ch.Base, tip)
	if err != nil {
		return fail(errcode.Wrap(errcode.Failed, err, err.Error()))
	}
	if len(res.Refused) > 0 {
		return fail(errcode.Errorf(errcode.PermissionDenied,
			"its change names paths git refuses to write in %s: %s; nothing of it was applied. Discard it (subagents apply --discard %s)",
			ch.Repo, refusalList(res.Refused), t.TaskID))
	}
	if len(res.Conflicts) > 0 {
		var named []string
		for _, cf := range res.Conflicts[:min(len(res.Conflicts), maxNamedFiles)] {
			named = append(named, fmt.Sprintf("%s (%s)", cf.Path, cf.Why))
		}
		if more := len(res.Conflicts) - len(named); more > 0 {
			named = append(named, fmt.Sprintf("and %d more", more))
		}
		it.Status = ApplyConflict
		it.Error = errcode.NewInfo(errcode.ApplyConflict, fmt.Sprintf(
			"the change of %s conflicts with %s in %s; nothing of it was applied. Commit or stash your changes to those files and apply again, or merge its branch yourself (git merge %s)",
			label, ch.Repo, strings.Join(named, ", "), ch.Branch))
		it.Output = label + ": " + it.Error.Message
		return it
	}
	it.Status = ApplyApplied
	if len(res.Files) == 0 {
		it.Output = fmt.Sprintf("%s: its change is in %s already", label, ch.Repo)
	} else {
		it.Output = fmt.Sprintf("%s: applied %d %s to %s: %s (branch %s)", label, len(res.Files), plural(len(res.Files), "file", "files"),
			ch.Repo, namedFiles(res.Files), ch.Branch)
	}
	if len(res.OutsideLinks) > 0 {
		var links []string
		for _, l := range res.OutsideLinks[:min(len(res.OutsideLinks), maxNamedFiles)] {
			links = append(links, l.String())
		}
		it.Output += fmt.Sprintf(". Mind the %s it wrote that %s outside the checkout or into .git: %s",
			plural(len(links), "link", "links"), plural(len(links), "points", "point"), strings.Join(links, ", "))
	}
	return it
}

// settleWorktree settles the worktree a failed capture left (ch.Worktree):
// an apply captures what it holds onto the branch, a discard drops it;
// either removes it. Only a worktree of the change's repository other than
// its main checkout is touched. One that is gone (the worker's sweep
// captured it) leaves the branch as it is. refused are the paths the
// capture left out (gitrepo.UnsafePath), as the worker's would.
func settleWorktree(ctx context.Context, ch *api.Change, session string, discard bool) (refused []gitrepo.Refusal, err error) {
	linked, err := gitrepo.LinkedWorktree(ctx, ch.Repo, ch.Worktree)
	if err != nil {
		return nil, errcode.Wrap(errcode.Failed, err, err.Error())
	}
	if !linked {
		return nil, nil
	}
	if !discard {
		msg := fmt.Sprintf("subagents: session %s, captured by apply", session)
		captured, err := gitrepo.Capture(ctx, ch.Worktree, ch.Branch, msg, ch.Base, session, gitrepo.CaptureIdentity)
		if err != nil {
			return nil, errcode.Errorf(errcode.Failed,
				"its change is still in the worktree %s and could not be captured: %v. Fix that and apply again, or discard it (subagents apply --discard %s)",
				ch.Worktree, err, session)
		}
		refused = captured.Refused
	}
	if err := gitrepo.RemoveWorktree(ctx, ch.Repo, ch.Worktree); err != nil {
		return nil, errcode.Wrap(errcode.Failed, err, err.Error())
	}
	return refused, nil
}

// refusalList names refused paths, each with why, for an apply's error.
func refusalList(refused []gitrepo.Refusal) string {
	var named []string
	for _, r := range refused[:min(len(refused), maxNamedFiles)] {
		named = append(named, r.String())
	}
	if more := len(refused) - len(named); more > 0 {
		named = append(named, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(named, ", ")
}

// open reports whether session id's workflow is open: a closed one (ended
// by Temporal) runs nothing, whatever its last status said.
func (c *Client) open(ctx context.Context, id string) bool {
	desc, err := c.Temporal.DescribeWorkflowExecution(ctx, id, "")
	return err != nil || desc.GetWorkflowExecutionInfo().GetCloseTime() == nil
}

// taskLabel names a task in an apply's lines.
func taskLabel(t Item) string {
	if t.Name != "" {
		return fmt.Sprintf("task %s (%s)", t.Name, t.TaskID)
	}
	return "task " + t.TaskID
}

func namedFiles(files []string) string {
	named := strings.Join(files[:min(len(files), maxNamedFiles)], ", ")
	if more := len(files) - maxNamedFiles; more > 0 {
		named += fmt.Sprintf(" and %d more", more)
	}
	return named
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// sameCheckout checks that the change's repository is the checkout of the
// session's cwd, here: a change recorded on another machine (a remote
// worker) names folders this one does not have.
func sameCheckout(ctx context.Context, cwd, repo string) error {
	top, err := gitrepo.Toplevel(ctx, cwd)
	if err != nil {
		return errcode.Errorf(errcode.InvalidInput,
			"its folder %s is not a git checkout on this machine (%v): apply the change where its worker ran", cwd, err)
	}
	if resolved(top) != resolved(repo) {
		return errcode.Errorf(errcode.InvalidInput, "its change is of %s, not of %s, the checkout of its folder %s", repo, top, cwd)
	}
	return nil
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// removePatch deletes a discarded change's patch file: only a file named
// for the session (<session>.patch, as the worker writes it), so that a
// result written by hand cannot have any other file deleted.
func removePatch(path, session string) error {
	if path == "" || filepath.Base(path) != session+".patch" {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
