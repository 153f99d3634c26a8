package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"

	"github.com/durable-pi/subagents/api"
)

// What a turn tells Temporal while it runs: its progress in every
// heartbeat, heartbeats while it waits on something else (its child
// starting, git), and, once its heartbeats cannot reach the server, how it
// still learns that the workflow cancelled it.

// heartbeatToolRows is how many tool rows a heartbeat's progress keeps
// (the latest ones), lastTextChars how much of the last text: both keep
// history small.
const (
	heartbeatToolRows = 10
	lastTextChars     = 500
)

// progress is the run as its heartbeats report it: the latest tool rows and
// the tail of its last text.
func (r *childRun) progress(elapsed time.Duration) api.Progress {
	rows := r.stream.ToolRows
	if len(rows) > heartbeatToolRows {
		rows = rows[len(rows)-heartbeatToolRows:]
	}
	// The rows were sanitized before their previews were cut (Stream);
	// the last text is sanitized whole, then its tail kept.
	clean := append([]api.ToolRow(nil), rows...)
	last := []rune(r.a.sanitizer.Sanitize(r.stream.FinalText))
	if len(last) > lastTextChars {
		last = last[len(last)-lastTextChars:]
	}
	return api.Progress{
		ToolRows:       clean,
		ToolCalls:      r.stream.ToolCallCount(),
		EventCount:     r.stream.Captured,
		Usage:          r.stream.Usage,
		Model:          r.stream.Model,
		LastText:       string(last),
		ElapsedMS:      elapsed.Milliseconds(),
		TimeoutSeconds: int(r.timeout / time.Second),
		Attempt:        r.attempt,
		PriorUsage:     r.prior,
		MessagesBefore: r.before,
		Fallbacks:      r.fallbacks,
	}
}

// beatMeanwhile heartbeats the run's progress (its elapsed time from
// start) at once and every interval until stop is called (it waits for the
// last heartbeat to be done, so the run's stream is the caller's again) or
// ctx ends: the heartbeats of a run whose child is not yet reading its
// events, and of an attempt between its runs on fallback models. stop may
// be called more than once.
func (r *childRun) beatMeanwhile(ctx context.Context, start time.Time) (stop func()) {
	stopBeats := beatEvery(ctx, r.a.cfg.HeartbeatInterval, func() {
		r.a.recordHeartbeat(ctx, r.progress(time.Since(start)))
	})
	var once sync.Once
	return func() { once.Do(stopBeats) }
}

// beatEvery calls beat at once and then every interval until stop: the
// heartbeats of an attempt busy with git (a checkout of a large repository
// takes longer than the heartbeat timeout), or between its runs. The first
// beat is at once because phases follow each other: a run of short phases,
// each ended before its first tick, would otherwise never heartbeat, and
// the server would time out an attempt that is working (the SDK sends at
// most one heartbeat per 0.8 of the timeout, so the extra calls cost
// nothing).
func beatEvery(ctx context.Context, interval time.Duration, beat func()) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if ctx.Err() == nil {
			beat()
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// serverUnreachable is whether the attempt's context ended because its
// heartbeats could not reach the server (the SDK's cause is then a
// transient gRPC error), not because the workflow cancelled it, the server
// no longer knows the attempt, or its time is up.
func serverUnreachable(ctx context.Context) bool {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
		return false
	}
	switch serviceerror.ToStatus(cause).Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// cancelRequested heartbeats an attempt whose context the SDK already
// cancelled (see serverUnreachable) through the client, the one way left to
// learn that the workflow asked to cancel it since. Any other answer (the
// server still away, or the attempt timed out and retried) lets the child
// run on: its retry reads the result from the session file.
func (a *Activities) cancelRequested(ctx context.Context, details api.Progress) bool {
	if a.cfg.Heartbeat == nil {
		return false
	}
	// One heartbeat interval: the next tick tries again.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.HeartbeatInterval)
	defer cancel()
	err := a.cfg.Heartbeat(hctx, activity.GetInfo(ctx).TaskToken, details)
	var cancelled *temporal.CanceledError
	return errors.As(err, &cancelled)
}

// RecordHeartbeatNow records details as the running activity's heartbeat
// and returns once the server has it (through the worker's client, not
// the SDK's batching): for a record a retry must find even when the worker
// dies a moment later. It does nothing without Config.Heartbeat (a test's
// worker) or outside an activity.
func (a *Activities) RecordHeartbeatNow(ctx context.Context, details any) error {
	if a.cfg.Heartbeat == nil || !activity.IsActivity(ctx) {
		return nil
	}
	return a.cfg.Heartbeat(ctx, activity.GetInfo(ctx).TaskToken, details)
}
