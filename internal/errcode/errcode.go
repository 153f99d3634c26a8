// Package errcode holds the one error type every layer of the service returns:
// a stable code from the error code table of docs/errors.md, its category, and a
// message meant for people.
//
// Codes are part of the public contract (tool results, --json envelopes, exit
// codes), so they never change spelling; messages may.
package errcode

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code.
type Code string

// The codes of the contracts (docs/pi.md "The contracts"), then ours. Keep in step with docs/errors.md.
const (
	InvalidInput       Code = "INVALID_INPUT"
	SubagentsDisabled  Code = "SUBAGENTS_DISABLED"
	SubagentDisabled   Code = "SUBAGENT_DISABLED"
	UnknownAgent       Code = "UNKNOWN_AGENT"
	DepthExceeded      Code = "SUBAGENT_DEPTH_EXCEEDED"
	Timeout            Code = "SUBAGENT_TIMEOUT"
	Failed             Code = "SUBAGENT_FAILED"
	OutputTruncated    Code = "SUBAGENT_OUTPUT_TRUNCATED"
	SessionNotFound    Code = "SESSION_NOT_FOUND"
	SessionRunning     Code = "SESSION_RUNNING"
	FinalizeMissing    Code = "FINALIZE_MISSING"
	LoopDetected       Code = "LOOP_DETECTED"
	Cancelled          Code = "CANCELLED"
	PermissionDenied   Code = "PERMISSION_DENIED"
	ServiceUnavailable Code = "SERVICE_UNAVAILABLE"
	// Terminated: an operator terminated the task's workflow (`temporal
	// workflow terminate`); its child run reported no result.
	Terminated Code = "TERMINATED"
	// BudgetExceeded: a step or a plan spent the tool calls, tokens or cost
	// its budget allows; nothing further starts.
	BudgetExceeded Code = "BUDGET_EXCEEDED"
	// GateFailed: a plan step's verification command still failed after
	// its corrective rounds.
	GateFailed Code = "GATE_FAILED"
	// LoopExhausted: a plan's loop ran its most rounds without its exit
	// condition being met.
	LoopExhausted Code = "LOOP_EXHAUSTED"
	// Skipped: a plan step did not run because an earlier step of its lane
	// failed, or the plan stopped.
	Skipped Code = "SKIPPED"
	// WorktreeDirty: a task asked for a worktree (worktree: true) but its
	// folder's checkout has uncommitted changes or untracked files, which
	// the worktree, made from a commit, would not hold.
	WorktreeDirty Code = "WORKTREE_DIRTY"
	// ApplyConflict: a task's change does not apply to the user's checkout
	// as it is now; nothing of it was applied.
	ApplyConflict Code = "APPLY_CONFLICT"
	// QuestionTimeout: a child's question to its supervisor
	// (contact_supervisor) was not answered within the session's question
	// timeout; the child is told so and goes on without the answer.
	QuestionTimeout Code = "QUESTION_TIMEOUT"
)

// Category groups codes the way callers branch on them.
type Category string

// Categories, as docs/errors.md lists them.
const (
	CategoryInvalidInput Category = "invalid_input"
	CategoryNotFound     Category = "not_found"
	CategoryPermission   Category = "permission"
	CategoryTimeout      Category = "timeout"
	CategoryRuntime      Category = "runtime"
	CategoryUnavailable  Category = "unavailable"
)

var categories = map[Code]Category{
	InvalidInput:       CategoryInvalidInput,
	SubagentsDisabled:  CategoryPermission,
	SubagentDisabled:   CategoryPermission,
	UnknownAgent:       CategoryNotFound,
	DepthExceeded:      CategoryPermission,
	Timeout:            CategoryTimeout,
	Failed:             CategoryRuntime,
	OutputTruncated:    CategoryRuntime,
	SessionNotFound:    CategoryNotFound,
	SessionRunning:     CategoryInvalidInput,
	FinalizeMissing:    CategoryRuntime,
	LoopDetected:       CategoryRuntime,
	Cancelled:          CategoryRuntime,
	PermissionDenied:   CategoryPermission,
	ServiceUnavailable: CategoryUnavailable,
	Terminated:         CategoryRuntime,
	BudgetExceeded:     CategoryRuntime,
	GateFailed:         CategoryRuntime,
	LoopExhausted:      CategoryRuntime,
	Skipped:            CategoryRuntime,
	WorktreeDirty:      CategoryInvalidInput,
	ApplyConflict:      CategoryInvalidInput,
	QuestionTimeout:    CategoryTimeout,
}

// All lists every code, in the order docs/errors.md gives them.
func All() []Code {
	return []Code{
		InvalidInput, SubagentsDisabled, SubagentDisabled, UnknownAgent, DepthExceeded, Timeout,
		Failed, OutputTruncated, SessionNotFound, SessionRunning, FinalizeMissing,
		LoopDetected, Cancelled, PermissionDenied, ServiceUnavailable, Terminated,
		BudgetExceeded, GateFailed, LoopExhausted, Skipped, WorktreeDirty, ApplyConflict,
		QuestionTimeout,
	}
}

// Parse returns the code spelled s, if it is one of All.
func Parse(s string) (Code, bool) {
	c := Code(s)
	_, ok := categories[c]
	return c, ok
}

// Category returns the code's category; an unknown code is a runtime error.
func (c Code) Category() Category {
	if cat, ok := categories[c]; ok {
		return cat
	}
	return CategoryRuntime
}

// Info is a coded error as results carry it (tool results, envelopes,
// workflow and activity results): its code, a message for people, and the
// code's category. NewInfo and InfoOf make one.
type Info struct {
	Code     Code     `json:"code"`
	Message  string   `json:"message"`
	Category Category `json:"category"`
}

// NewInfo is a result's coded error; its category is the code's.
func NewInfo(code Code, message string) *Info {
	return &Info{Code: code, Message: message, Category: code.Category()}
}

// InfoOf is err as a result's coded error: its code (SUBAGENT_FAILED when it
// carries none) and message.
func InfoOf(err error) *Info { return NewInfo(CodeOf(err), err.Error()) }

// Error is an error with a stable code.
type Error struct {
	Code    Code
	Message string
	// Err is the underlying cause, if any; it is not part of Error().
	Err error
}

// New returns an error with code and message.
func New(code Code, message string) *Error {
	return &Error{Code: code, Message: message}
}

// Errorf returns an error with code and a formatted message. A %w verb wraps
// its operand as the cause, as with fmt.Errorf.
func Errorf(code Code, format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: wrapped.Error(), Err: errors.Unwrap(wrapped)}
}

// Wrap returns an error with code whose message is message, caused by err.
func Wrap(code Code, err error, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Category returns the error's category.
func (e *Error) Category() Category { return e.Code.Category() }

// CodeOf returns the code of the first *Error in err's chain, or Failed when
// there is none: an error nobody classified is a runtime failure.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Failed
}

// Is reports whether err carries code.
func Is(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Exit codes of the subagents command: what a script calling it branches on.
const (
	ExitOK          = 0
	ExitFailed      = 1 // the task ran and failed, or an unexpected error
	ExitBadInput    = 2 // the request or the set-up is wrong: fix it and retry
	ExitUnavailable = 3 // Temporal cannot be reached: start it and retry
	ExitPending     = 4 // a wait ended before the work did: wait again
)

// ErrPending is returned (wrapped) when a wait ends before the work it
// waits for; it is not a failure of that work.
var ErrPending = errors.New("still running")

// ExitCode maps an error to the command's exit code by its category.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, ErrPending) {
		return ExitPending
	}
	switch CodeOf(err).Category() {
	case CategoryInvalidInput, CategoryNotFound, CategoryPermission:
		return ExitBadInput
	case CategoryUnavailable:
		return ExitUnavailable
	default:
		return ExitFailed
	}
}
