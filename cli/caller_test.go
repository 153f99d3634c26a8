package cli

import (
	"context"
	"testing"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// TestProvenDepth: a caller's depth is the deepest of its claim and of the
// session its token proves; a lie about the session or a copied token is
// refused, and a claim never makes a caller shallower than its session.
func TestProvenDepth(t *testing.T) {
	const key = "k3y"
	// Temporal's record: session "deep" runs a depth-2 child, "top" a
	// depth-1 one.
	depths := map[string]int{"deep": 2, "top": 1}
	depthOf := func(_ context.Context, id string) (int, error) {
		d, ok := depths[id]
		if !ok {
			return 0, errcode.Errorf(errcode.SessionNotFound, "the calling session %q is not found", id)
		}
		return d, nil
	}
	tests := []struct {
		name    string
		env     map[string]string
		key     string
		claimed int
		want    int
		code    errcode.Code
	}{
		{name: "a top-level pi", key: key, want: 0},
		{name: "a claim deepens a top-level pi", key: key, claimed: 5, want: 5},
		{name: "a child's session, proven", key: key, env: map[string]string{"PI_SUBAGENT_PARENT_SESSION": "deep", "PI_SUBAGENT_TOKEN": connection.SessionToken(key, "deep")}, claimed: 1, want: 2},
		{name: "a claim cannot make it shallower", key: key, env: map[string]string{"PI_SUBAGENT_PARENT_SESSION": "deep", "PI_SUBAGENT_TOKEN": connection.SessionToken(key, "deep")}, claimed: 0, want: 2},
		{name: "a deeper claim stands", key: key, env: map[string]string{"PI_SUBAGENT_PARENT_SESSION": "top", "PI_SUBAGENT_TOKEN": connection.SessionToken(key, "top")}, claimed: 3, want: 3},
		{name: "another session named with its own token", key: key, env: map[string]string{"PI_SUBAGENT_PARENT_SESSION": "top", "PI_SUBAGENT_TOKEN": connection.SessionToken(key, "deep")}, code: errcode.PermissionDenied},
		{name: "a session without a token", key: key, env: map[string]string{"PI_SUBAGENT_PARENT_SESSION": "top"}, code: errcode.PermissionDenied},
		{name: "a token of another key (another service)", key: key, env: map[string]string{"PI_SUBAGENT_PARENT_SESSION": "deep", "PI_SUBAGENT_TOKEN": connection.SessionToken("other", "deep")}, code: errcode.PermissionDenied},
		{name: "a proven session Temporal does not know", key: key, env: map[string]string{"PI_SUBAGENT_PARENT_SESSION": "gone", "PI_SUBAGENT_TOKEN": connection.SessionToken(key, "gone")}, code: errcode.SessionNotFound},
		{name: "no key here: the session is a lower bound", env: map[string]string{"PI_SUBAGENT_PARENT_SESSION": "deep", "PI_SUBAGENT_TOKEN": "anything"}, claimed: 1, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := provenDepth(context.Background(), func(k string) string { return tt.env[k] }, tt.key, tt.claimed, depthOf)
			if tt.code != "" {
				if errcode.CodeOf(err) != tt.code {
					t.Fatalf("depth %d, error %v; want %s", got, err, tt.code)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("depth %d, error %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestClaimedDepth: what a caller says of itself.
func TestClaimedDepth(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want int
		bad  bool
	}{
		{env: nil, want: 0},
		{env: map[string]string{"PI_SUBAGENT_CHILD": "1"}, want: 1},
		{env: map[string]string{"PI_SUBAGENT_CHILD": "1", "PI_SUBAGENT_DEPTH": "2"}, want: 2},
		{env: map[string]string{"PI_SUBAGENT_DEPTH": "5"}, want: 5},
		{env: map[string]string{"PI_SUBAGENT_DEPTH": "-1"}, bad: true},
		{env: map[string]string{"PI_SUBAGENT_DEPTH": "two"}, bad: true},
	}
	for _, tt := range tests {
		got, err := claimedDepth(func(k string) string { return tt.env[k] })
		if tt.bad {
			if errcode.CodeOf(err) != errcode.InvalidInput {
				t.Errorf("%v: %d %v, want INVALID_INPUT", tt.env, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: %d %v, want %d", tt.env, got, err, tt.want)
		}
	}
}

// TestCallerEnvIsNeverTheService's: a shared service answers each request
// with the caller's CallerPiEnv, never its own (the pi that started it);
// stdio serve, which a pi starts for itself, reads its own when a request
// carries none.
func TestCallerEnvIsNeverTheServices(t *testing.T) {
	own := map[string]string{"PI_SUBAGENT_DEPTH": "2", "OHM_SUBAGENTS_OUTPUT_MAX_CHARS": "100", "SUBAGENTS_HOST": "svc"}
	base := func(k string) string { return own[k] }
	tests := []struct {
		name       string
		callersEnv bool
		req        ServeRequest
		key, want  string
	}{
		{name: "shared, no caller", req: ServeRequest{}, key: "PI_SUBAGENT_DEPTH", want: ""},
		{name: "shared, no caller: knob", req: ServeRequest{}, key: "OHM_SUBAGENTS_OUTPUT_MAX_CHARS", want: ""},
		{name: "shared, the caller's", req: ServeRequest{Caller: map[string]string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS": "50"}}, key: "OHM_SUBAGENTS_OUTPUT_MAX_CHARS", want: "50"},
		{name: "shared, env does not carry it", req: ServeRequest{Env: map[string]string{"PI_SUBAGENT_DEPTH": "0"}}, key: "PI_SUBAGENT_DEPTH", want: ""},
		{name: "stdio, no caller", callersEnv: true, req: ServeRequest{}, key: "PI_SUBAGENT_DEPTH", want: "2"},
		{name: "stdio, the caller's", callersEnv: true, req: ServeRequest{Caller: map[string]string{}}, key: "PI_SUBAGENT_DEPTH", want: ""},
		{name: "other variables as before", req: ServeRequest{}, key: "SUBAGENTS_HOST", want: "svc"},
		{name: "other variables from env", req: ServeRequest{Env: map[string]string{}}, key: "SUBAGENTS_HOST", want: ""},
	}
	for _, tt := range tests {
		s := &Server{Getenv: base, CallersEnv: tt.callersEnv}
		if got := s.getenvFor(tt.req)(tt.key); got != tt.want {
			t.Errorf("%s: %s = %q, want %q", tt.name, tt.key, got, tt.want)
		}
	}
}

// TestNestingKeyWithoutADataDir: a call that cannot name its data dir is
// refused, not left without the token check.
func TestNestingKeyWithoutADataDir(t *testing.T) {
	t.Setenv("SUBAGENTS_DATA_DIR", "")
	t.Setenv("HOME", "")
	cmd := &command{}
	if key, err := cmd.nestingKey(); err == nil {
		t.Fatalf("key %q and no error without a data dir", key)
	}
}
