package cli

import (
	"context"
	"errors"
	"io/fs"
	"strconv"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// Who calls a verb that starts work (docs/pi.md, "Nesting"). A delegation's
// depth is a fact of the tree: a child that delegates runs as its task's
// session, which the worker proves with a token (connection.SessionToken)
// and whose depth Temporal records. What the caller says of itself
// (PI_SUBAGENT_DEPTH, PI_SUBAGENT_CHILD) is its word: it may make the call
// deeper; with a session named, never shallower than that session. A
// caller that names no session and claims no depth is a top-level pi.
//
// What this binds: a child that delegates through its pi's own tools and
// extension (they send what the worker gave it), a token copied from
// another child, a session a caller merely names. What it does not: a
// child's bash runs as the user, who can unset these variables (it calls
// as a top-level pi then) and read the data dir's nesting key
// (docs/security.md, "The bound on nesting").

// callerOf is the caller's side of a call handed to the service
// (ServeRequest.Caller): its values of CallerPiEnv, never nil, so that the
// service reads none of its own.
func callerOf(getenv func(string) string) map[string]string {
	out := map[string]string{}
	for _, k := range CallerPiEnv {
		if v := getenv(k); v != "" {
			out[k] = v
		}
	}
	return out
}

// claimedDepth is the depth the caller claims: PI_SUBAGENT_DEPTH, else 1
// for a child (PI_SUBAGENT_CHILD=1), else 0.
func claimedDepth(getenv func(string) string) (int, error) {
	if d := getenv(profiles.DepthEnv); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, errcode.Errorf(errcode.InvalidInput, "%s must be a number, not %q", profiles.DepthEnv, d)
		}
		return n, nil
	}
	if getenv(profiles.ChildEnv) == "1" {
		return 1, nil
	}
	return 0, nil
}

// sessionDepthFunc reads the depth of a session's child from Temporal
// (client.SessionDepth).
type sessionDepthFunc func(ctx context.Context, sessionID string) (int, error)

// provenDepth is the depth of a caller that claims claimed: the deepest of
// the claim and of the session it names (PI_SUBAGENT_PARENT_SESSION). With
// the nesting key (key != ""), the session counts only with its token
// (PI_SUBAGENT_TOKEN): a wrong or missing one is PERMISSION_DENIED, for a
// child that names a session not its own, or whose token was copied from
// another's. Without the key (the worker keeps its data dir on another
// machine) the session is the caller's word: it can still only deepen.
// A session Temporal does not know refuses the call (SESSION_NOT_FOUND).
func provenDepth(ctx context.Context, getenv func(string) string, key string, claimed int, depthOf sessionDepthFunc) (int, error) {
	session := getenv(profiles.ParentSessionEnv)
	if session == "" {
		return claimed, nil
	}
	if key != "" && !connection.ValidSessionToken(key, session, getenv(profiles.TokenEnv)) {
		return 0, errcode.Errorf(errcode.PermissionDenied,
			"Permission denied: the caller names session %q (%s) without the token its worker gave that session's child (%s): a subagent delegates only as its own task",
			session, profiles.ParentSessionEnv, profiles.TokenEnv)
	}
	d, err := depthOf(ctx, session)
	if err != nil {
		return 0, err
	}
	return max(claimed, d), nil
}

// nestingKey is the key of the worker this call's service runs (the data
// dir's; "" when no worker made one there). A data dir that cannot be
// named is an error, not "no key": that would turn the token check off.
func (cmd *command) nestingKey() (string, error) {
	dir := cmd.io.DataDir
	if dir == "" {
		d, err := connection.DefaultDataDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	key, err := connection.ReadNestingKey(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return key, err
}

// depth is the caller's depth for a call that starts work, claimed
// depth its word (fillDefaults).
func (cmd *command) depth(ctx context.Context, c *client.Client, claimed int) (int, error) {
	if cmd.io.getenv(profiles.ParentSessionEnv) == "" {
		// No session to prove: no key to read (a top-level caller runs
		// where no data dir may be named).
		return claimed, nil
	}
	key, err := cmd.nestingKey()
	if err != nil {
		return 0, err
	}
	return provenDepth(ctx, cmd.io.getenv, key, claimed, c.SessionDepth)
}
