package profiles

import (
	"cmp"
	"slices"

	"github.com/durable-pi/subagents/api"
)

// Nested delegation (docs/pi.md, "Nesting"): a child whose profile lists a
// delegation tool gets that tool, with this project's extension loaded in
// its pi, while its depth is below the limit; its delegations go to the
// same service as its parent's, one level deeper.

// DefaultMaxDepth is how deep subagents nest when the settings say
// nothing: a child of a top-level pi (depth 1) may delegate, its own
// children (depth 2) run but may not.
const DefaultMaxDepth = 2

// MaxSettingsDepth is the largest maxDepth the settings accept: every
// level is a pi process and a workflow per task, and a chain deeper than
// this is a loop rather than a plan.
const MaxSettingsDepth = 5

// ChildDelegationTools are the delegation tools this project's extension
// registers in a child that may delegate: those that start work and read
// what it did. A profile lists them in its tools to grant them.
var ChildDelegationTools = []string{"subagent", "task", "delegate_to_subagents", "get_subagent_output", "get_subagent_session"}

// serviceMaxDepth is the deepest caller the command's own check
// (api.ValidateDelegation) lets delegate, plus one: a child at that depth
// or deeper would get a tool that only ever refuses, so it gets none. A
// variable so that the tests can run the nesting the service will allow.
var serviceMaxDepth = api.DefaultMaxDepth

// DepthLimit is how deep children of profile p may run under cfg and a
// worker limit (0: none): the settings' maxDepth (default
// DefaultMaxDepth), lowered by the worker's and by the profile's own.
func DepthLimit(cfg Config, worker int, p *Profile) int {
	limit := cmp.Or(cfg.MaxDepth, DefaultMaxDepth)
	if worker > 0 {
		limit = min(limit, worker)
	}
	if p != nil && p.MaxDepth > 0 {
		limit = min(limit, p.MaxDepth)
	}
	return limit
}

// NestedTools are the delegation tools a child of p at depth gets: those
// its tools list (an allowlist: a delegation tool is never granted by
// default or by a blacklist), when a child at that depth may delegate
// (depth below limit, and below what the service lets delegate).
func (p *Profile) NestedTools(depth, limit int) []string {
	if p.NoTools || depth < 1 || depth >= limit || depth >= serviceMaxDepth {
		return nil
	}
	var out []string
	for _, t := range p.Tools {
		if slices.Contains(ChildDelegationTools, t) && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Nested reports whether a run's tools hold a delegation tool: its pi
// gets this project's extension, and what it delegates is one level
// deeper and belongs to its session.
func Nested(tools []string) bool {
	return slices.ContainsFunc(tools, func(t string) bool { return slices.Contains(ChildDelegationTools, t) })
}

// The variables that tell this project's extension, in a child's pi, that
// it registers the delegation tools (NestedEnv) and which session
// delegates (ParentSessionEnv: the task's own session ID, which the
// workflow set; every delegation of the child records it as its parent),
// with the worker's proof of that session (TokenEnv: only a worker with the
// nesting key makes it, connection.SessionToken). The child's depth is
// DepthEnv, from the run's input as well; ChildEnv marks every child.
//
// The service takes a delegation's depth from the session the token
// proves, as Temporal records it; DepthEnv and ChildEnv are the caller's
// word, which may only make it deeper (cli's callerDepth).
const (
	NestedEnv        = "PI_SUBAGENT_NESTED"
	ParentSessionEnv = "PI_SUBAGENT_PARENT_SESSION"
	TokenEnv         = "PI_SUBAGENT_TOKEN"
	DepthEnv         = "PI_SUBAGENT_DEPTH"
	ChildEnv         = "PI_SUBAGENT_CHILD"
)
