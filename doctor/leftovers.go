package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durable-pi/subagents/activities"
)

// settleFix is how the worktrees of dead runs get settled: the worker does
// it at its start and every hour after.
const settleFix = "the service's worker settles them (commits their changes onto their branches and removes them) when it starts and every hour: start it (`subagents dev`), or restart it (`subagents stop`, then `subagents dev`) to settle them now"

// checkStaleLocks: no lock file names a process that is gone. The service's
// lock (dev.lock) of a service that was killed still names its pid, which
// another process may have by now; session locks of sessions that are gone
// wait for the worker's hourly sweep.
func checkStaleLocks(lock ServiceLock, sessionLocks []string, sessionErr error, dataDir string) Result {
	var found, fixes []string
	if lock.Exists && !lock.Held && lock.Pid > 0 {
		why := "which is gone"
		if lock.PidAlive {
			why = "which no longer holds it (another process has that pid now)"
		}
		found = append(found, fmt.Sprintf("%s names pid %d, %s: a service that was killed", lock.Path, lock.Pid, why))
		fixes = append(fixes, fmt.Sprintf("start the service, which takes the lock over, or remove %s (do not `kill` the pid it names)", lock.Path))
	}
	if len(sessionLocks) > 0 {
		found = append(found, fmt.Sprintf("%d session lock %s of sessions that are gone or idle for %s (e.g. %s)",
			len(sessionLocks), plural(len(sessionLocks), "file", "files"), durationText(activities.LockIdle), sessionLocks[0]))
		fixes = append(fixes, "the running service's worker removes them every hour; remove them by hand while no service runs")
	}
	if len(found) > 0 {
		return warn(CheckStaleLocks, strings.Join(found, "; "), strings.Join(fixes, "; ")).with("session_locks", sessionLocks)
	}
	if sessionErr != nil {
		return warn(CheckStaleLocks, "cannot look through the session locks: "+oneLine(sessionErr.Error()), "check that "+filepath.Join(dataDir, "sessions")+" is readable")
	}
	return ok(CheckStaleLocks, "no lock file of a process or session that is gone")
}

// gitWorktree is one worktree `git worktree list --porcelain` names.
type gitWorktree struct {
	Path     string `json:"path"`
	Branch   string `json:"branch,omitempty"`
	Prunable bool   `json:"prunable,omitempty"`
	Orphan   bool   `json:"orphan,omitempty"`
}

// parseWorktrees reads `git worktree list --porcelain`.
func parseWorktrees(out string) []gitWorktree {
	var list []gitWorktree
	for block := range strings.SplitSeq(strings.TrimSpace(out), "\n\n") {
		var w gitWorktree
		for line := range strings.SplitSeq(block, "\n") {
			switch {
			case strings.HasPrefix(line, "worktree "):
				w.Path = strings.TrimPrefix(line, "worktree ")
			case strings.HasPrefix(line, "branch "):
				w.Branch = strings.TrimPrefix(strings.TrimPrefix(line, "branch "), "refs/heads/")
			case line == "prunable" || strings.HasPrefix(line, "prunable "):
				w.Prunable = true
			}
		}
		if w.Path != "" {
			list = append(list, w)
		}
	}
	return list
}

// staleBranch is a session's branch nobody applied or discarded.
type staleBranch struct {
	Branch  string    `json:"branch"`
	Session string    `json:"session"`
	Commit  time.Time `json:"commit"`
}

// parseBranches reads `git for-each-ref --format=%(refname:short)%09%(committerdate:unix)`.
func parseBranches(out string) []staleBranch {
	var list []staleBranch
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		name, when, found := strings.Cut(line, "\t")
		if !found || !strings.HasPrefix(name, activities.BranchPrefix) {
			continue
		}
		sec, err := strconv.ParseInt(strings.TrimSpace(when), 10, 64)
		if err != nil {
			continue
		}
		list = append(list, staleBranch{Branch: name, Session: strings.TrimPrefix(name, activities.BranchPrefix), Commit: time.Unix(sec, 0)})
	}
	return list
}

// checkStaleWorktrees: no worktree a dead run left waits to be settled, no
// worktree of the data dir is left in this folder's repository without its
// run, and no session branch there has waited past staleAfter to be
// applied or discarded (docs/worktrees.md).
func checkStaleWorktrees(ctx context.Context, cfg Config, stale []activities.StaleWorktree, staleErr error,
	git func(context.Context, string, ...string) (string, error), exists func(string) bool) Result {
	var found, fixes []string
	r := Result{}
	if staleErr != nil {
		found = append(found, "cannot read the worktree journals: "+oneLine(staleErr.Error()))
		fixes = append(fixes, "check that "+filepath.Join(cfg.DataDir, "worktrees")+" is readable")
	}
	if len(stale) > 0 {
		var names []string
		for _, s := range stale {
			names = append(names, s.Journal)
		}
		found = append(found, fmt.Sprintf("%d %s of runs that died %s to be settled (%s)", len(stale),
			plural(len(stale), "worktree", "worktrees"), plural(len(stale), "waits", "wait"), strings.Join(names, ", ")))
		fixes = append(fixes, settleFix)
		r = r.with("journals", stale)
	}
	if top, err := git(ctx, cfg.Cwd, "rev-parse", "--show-toplevel"); err == nil {
		top = strings.TrimSpace(top)
		r = r.with("repository", top)
		worktreesDir := filepath.Join(cfg.DataDir, "worktrees") + string(filepath.Separator)
		if out, err := git(ctx, top, "worktree", "list", "--porcelain"); err == nil {
			var left []gitWorktree
			for _, w := range parseWorktrees(out) {
				if !strings.HasPrefix(w.Path, worktreesDir) {
					continue
				}
				journal := strings.TrimSuffix(w.Path, string(filepath.Separator)) + ".json"
				switch {
				case w.Prunable:
					left = append(left, w)
				case !exists(journal):
					w.Orphan = true
					left = append(left, w)
				}
			}
			if len(left) > 0 {
				var paths []string
				prune := false
				for _, w := range left {
					paths = append(paths, w.Path)
					prune = prune || w.Prunable
				}
				found = append(found, fmt.Sprintf("%d %s of the data dir %s left in %s with no run to settle %s (%s)", len(left),
					plural(len(left), "worktree", "worktrees"), plural(len(left), "is", "are"), top, plural(len(left), "it", "them"), strings.Join(paths, ", ")))
				fix := fmt.Sprintf("`git -C %s worktree remove --force PATH` for each (its branch keeps what was committed)", top)
				if prune {
					fix = fmt.Sprintf("`git -C %s worktree prune` forgets those whose folder is gone; ", top) + fix
				}
				fixes = append(fixes, fix)
				r = r.with("worktrees", left)
			}
		}
		if out, err := git(ctx, top, "for-each-ref", "--format=%(refname:short)%09%(committerdate:unix)", "refs/heads/"+activities.BranchPrefix); err == nil {
			var old []staleBranch
			for _, b := range parseBranches(out) {
				if cfg.Now.Sub(b.Commit) > cfg.StaleAfter {
					old = append(old, b)
				}
			}
			slices.SortFunc(old, func(a, b staleBranch) int { return a.Commit.Compare(b.Commit) })
			if len(old) > 0 {
				var names, ids []string
				for _, b := range old {
					names = append(names, b.Branch)
					ids = append(ids, b.Session)
				}
				found = append(found, fmt.Sprintf("%d session %s in %s older than %s, neither applied nor discarded (%s)", len(old),
					plural(len(old), "branch", "branches"), top, durationText(cfg.StaleAfter), strings.Join(names, ", ")))
				fixes = append(fixes, fmt.Sprintf("`subagents apply ID` takes a change into your checkout, `subagents apply --discard %s` deletes %s", strings.Join(ids, " "), plural(len(old), "it", "them")))
				r = r.with("branches", old)
			}
		}
	}
	if len(found) > 0 {
		r.Name, r.Status, r.Verdict, r.Fix = CheckStaleWorktrees, Warn, strings.Join(found, "; "), strings.Join(fixes, "; ")
		return r
	}
	r.Name, r.Status, r.Verdict = CheckStaleWorktrees, OK, "no worktree or session branch left behind"
	return r
}

// checkUnacknowledged: no delegation's results have waited longer than
// staleAfter for the pi session that started it to take them.
func checkUnacknowledged(ctx context.Context, fe Frontend, now time.Time, staleAfter time.Duration) Result {
	waiting, err := fe.Waiting(ctx, now.Add(-staleAfter))
	if err != nil {
		return warn(CheckUnacknowledged, "cannot list the delegations that wait for their parent: "+oneLine(err.Error()), "check the connection to Temporal, then run the doctor again")
	}
	if len(waiting) == 0 {
		return ok(CheckUnacknowledged, fmt.Sprintf("no delegation's results have waited more than %s for their pi session", durationText(staleAfter)))
	}
	var parts, ids []string
	for i, w := range waiting {
		ids = append(ids, w.ID)
		if i < shown {
			parts = append(parts, fmt.Sprintf("%s in %s since %s", w.ID, w.Cwd, w.Since.UTC().Format(time.RFC3339)))
		}
	}
	if len(waiting) > shown {
		parts = append(parts, fmt.Sprintf("and %d more", len(waiting)-shown))
	}
	return warn(CheckUnacknowledged, fmt.Sprintf("%d %s waited more than %s for their pi session to take the results: %s", len(waiting),
		plural(len(waiting), "delegation has", "delegations have"), durationText(staleAfter), strings.Join(parts, "; ")),
		fmt.Sprintf("start pi in the delegation's folder and run /subagents-adopt to take the results into that session, or let them go with `subagents ack %s`", strings.Join(ids, " "))).
		with("waiting", waiting)
}

// durationText says d as a person would: "24h", "90m", "1.5s".
func durationText(d time.Duration) string {
	s := d.String()
	for _, zero := range []string{"0s", "0m"} {
		if strings.HasSuffix(s, "m"+zero) || strings.HasSuffix(s, "h"+zero) {
			s = strings.TrimSuffix(s, zero)
		}
	}
	return s
}
