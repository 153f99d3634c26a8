package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The doctor has one deadline for all its checks (Config.Timeout, the
// command's --timeout), and each check a bound of its own within it: a
// check that runs out says so as its verdict, and the others still
// report. A user runs the doctor when something hangs; a doctor that hung
// with it, or was stopped before it printed anything, would say nothing.

// Each check's own bound: how long its one thing may take before the check
// gives up on it. Each is what its thing takes on a loaded machine, with
// room; none is longer than the lane it runs in can spare within
// DefaultTimeout (Run).
const (
	// piTimeout is the worker's own bound on `pi --version` (worker.FindPi):
	// a cold Node start takes about a second; twenty cover a loaded CI
	// machine.
	piTimeout = 20 * time.Second
	// localTimeout bounds a check that reads local files (profiles, plans,
	// settings, keys, the disk, the locks): each takes milliseconds, so ten
	// seconds is a filesystem that hangs (a network mount gone away).
	localTimeout = 10 * time.Second
	// socketTimeout bounds asking the service on its socket: the ask has
	// its own 2 s bound (cli's askServiceTimeout); this one also catches a
	// hang in making the connection.
	socketTimeout = 5 * time.Second
	// namespaceTimeout is dialling Temporal and one call to it.
	namespaceTimeout = dialTimeout + callTimeout
	// worktreesTimeout bounds the three git commands of the worktrees
	// check together: each answers within a second in a repository of any
	// size; commandTimeout is the bound of any one of them.
	worktreesTimeout = commandTimeout
)

// DefaultTimeout is the doctor's deadline (--timeout): the checks run in
// four lanes side by side (Run), and the longest lane's worst case, the
// service's (its socket 5 s, Temporal's dial and namespace 15 s, then its
// other calls 10 s side by side), is 30 s. pi's lane (pi 20 s, then Node
// 20 s) may take longer only when both hang; Node's check is then cut
// short and says so. The pi extension waits this long and a margin more
// (extension/src/doctor.ts).
const DefaultTimeout = 30 * time.Second

// lateGrace is how long a check whose bound passed may still take to hand
// in what it found: one that honours its context returns at once (a child
// process killed, a call cancelled), and what it says is kept in its
// details; one that does not is left behind.
const lateGrace = 500 * time.Millisecond

// lateRule is how a check that runs out comes out: its status, whether it
// counts as the service being unreachable, what it was doing, and the fix.
type lateRule struct {
	status      Status
	unavailable bool
	doing       string
	fix         string
}

// fsFix is the fix of a check that reads local files and hung.
const fsFix = "a file it reads does not answer: check the filesystem (a network mount that went away?)"

// lateRules say how each check comes out when it runs out of time.
var lateRules = map[string]lateRule{
	CheckPi:               {Fail, false, "`pi --version`", "run pi --version by hand to see why it hangs, or point --pi or SUBAGENTS_PI at a pi that answers"},
	CheckNode:             {Fail, false, "`node --version`", "run node --version by hand, from pi's folder, to see why it hangs"},
	CheckSocket:           {Fail, true, "the service on its socket", restartFix},
	CheckAPIKey:           {Fail, false, "reading the API key", fsFix},
	CheckNamespace:        {Fail, true, "Temporal", "Temporal takes connections but does not answer: " + restartFix + ", or check the cluster and the network to it"},
	CheckSearchAttributes: {Fail, true, "Temporal", "Temporal does not answer: " + restartFix + ", or check the cluster"},
	CheckWorkers:          {Fail, true, "Temporal", "Temporal does not answer: " + restartFix + ", or check the cluster"},
	CheckProfiles:         {Fail, false, "reading the profiles", fsFix},
	CheckPlans:            {Fail, false, "reading the saved plans", fsFix},
	CheckSettings:         {Fail, false, "reading the settings", fsFix},
	CheckModelKeys:        {Fail, false, "reading pi's keys", fsFix},
	CheckUI:               {Fail, false, "the Temporal UI", "the UI takes connections but does not answer: " + restartFix},
	CheckDisk:             {Warn, false, "the data dir's filesystem", fsFix},
	CheckStaleLocks:       {Warn, false, "reading the locks", fsFix},
	CheckStaleWorktrees:   {Warn, false, "git in the folder's repository", "run `git worktree list` there by hand to see why it hangs"},
	CheckUnacknowledged:   {Warn, false, "Temporal", "Temporal does not answer: " + restartFix + ", or check the cluster"},
}

// lanes runs checks under the doctor's deadline.
type lanes struct {
	// ctx ends at the doctor's deadline; timeout is how long that was.
	ctx     context.Context
	timeout time.Duration
}

// within runs f with a context that ends after bound (0: at the doctor's
// deadline only), and waits for it until then and lateGrace more. late is
// true when f's context had ended by the time it returned, or it had not
// returned by then: what it found may be the cut itself (a command killed,
// a call cancelled, or an error a check passes over), so it is not taken
// as the verdict; got says f handed in v all the same, for the details. A
// check left behind may still run: what it returns is dropped.
func within[T any](l lanes, bound time.Duration, f func(context.Context) T) (v T, got, late bool, why string) {
	if l.ctx.Err() != nil {
		// An earlier check in its lane took the time this one had.
		return v, false, true, fmt.Sprintf("was not checked: the doctor's %s (--timeout) ran out before its turn", durationText(l.timeout))
	}
	ctx, cancel := l.ctx, context.CancelFunc(func() {})
	if bound > 0 {
		ctx, cancel = context.WithTimeout(l.ctx, bound)
	}
	defer cancel()
	type answer struct {
		v    T
		late bool
	}
	out := make(chan answer, 1)
	go func() {
		v := f(ctx)
		out <- answer{v, ctx.Err() != nil}
	}()
	var a answer
	select {
	case a = <-out:
		got = true
	case <-ctx.Done():
		select {
		case a = <-out:
			got = true
		case <-time.After(lateGrace):
			a.late = true
		}
	}
	if !a.late {
		return a.v, got, false, ""
	}
	switch {
	case errors.Is(l.ctx.Err(), context.Canceled):
		why = "was stopped before it answered (the doctor was interrupted)"
	case l.ctx.Err() != nil:
		why = fmt.Sprintf("did not answer within the doctor's %s (--timeout)", durationText(l.timeout))
	default:
		why = fmt.Sprintf("did not answer within %s", durationText(bound))
	}
	return a.v, got, true, why
}

// check runs a check within bound: one that runs out comes out as its
// lateRule says.
func (l lanes) check(name string, bound time.Duration, f func(context.Context) Result) Result {
	r, got, late, why := within(l, bound, f)
	if !late {
		return r
	}
	return lateResult(name, why, r, got)
}

// lateResult is name's verdict when it ran out: why, and what it said, if
// it said anything, in its details.
func lateResult(name, why string, said Result, got bool) Result {
	rule := lateRules[name]
	out := Result{Name: name, Status: rule.status, Verdict: rule.doing + " " + why, Fix: rule.fix + " (or give the doctor longer: --timeout)"}
	out.unavailable, out.late = rule.unavailable, true
	for k, v := range said.Details {
		out = out.with(k, v)
	}
	if got && said.Verdict != "" {
		out = out.with("said", said.Verdict)
	}
	return out
}
