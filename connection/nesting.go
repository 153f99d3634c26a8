package connection

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// A child that delegates (docs/pi.md, "Nesting") proves which task's child
// it is with a token the worker gives it in its environment: an HMAC of
// its task's session ID under a key in the worker's data dir. The service
// that takes the child's delegation checks the token with the same key and
// reads the depth of that session from Temporal, so a child that delegates
// through its pi's own tools and extension, or a caller with a copied token
// or a session it merely names, cannot make itself shallower. It does not
// bind a child's bash: that runs as the user, who can unset the variables
// (a top-level caller then) and read this key (docs/security.md, "The
// bound on nesting"). The key
// lives in a file, not in the service's memory: a token a worker gave
// before a restart still checks after it, with no state to keep, and
// neither key nor token is ever written into a workflow history.

// NestingKeyName is the nesting key's file in the data dir.
const NestingKeyName = "nesting.key"

// EnsureNestingKey returns the nesting key of dataDir, making it on the
// first use (a 0600 file, as the API key).
func EnsureNestingKey(dataDir string) (string, error) {
	return ensureSecret(dataDir, NestingKeyName, "the nesting key")
}

// ReadNestingKey reads dataDir's nesting key: fs.ErrNotExist when no worker
// made one there (the worker runs elsewhere, with a data dir of its own).
func ReadNestingKey(dataDir string) (string, error) {
	return readSecret(dataDir, NestingKeyName, "the nesting key")
}

// SessionToken is the token of the child that runs session sessionID,
// under key.
func SessionToken(key, sessionID string) string {
	m := hmac.New(sha256.New, []byte(key))
	// The purpose first: a token is never also some other derived secret.
	m.Write([]byte("subagents nesting session\x00" + sessionID))
	return hex.EncodeToString(m.Sum(nil))
}

// ValidSessionToken reports whether token is session sessionID's under key,
// in constant time.
func ValidSessionToken(key, sessionID, token string) bool {
	return hmac.Equal([]byte(SessionToken(key, sessionID)), []byte(token))
}
