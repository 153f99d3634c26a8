package api

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/durable-pi/subagents/internal/errcode"
)

// nameRule is what a profile, an agent and a session ID are made of: each
// becomes part of a file name under the data dir
// (<agent>_<session>.jsonl), so no separator, dot or space may be in one.
// 128 characters hold any profile name or ID, and two of them stay well
// below a file name's 255 bytes.
var nameRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// NameRule says nameRule in words, for messages.
const NameRule = "1 to 128 letters, digits, '-' or '_'"

// ErrInvalidName is what every name error wraps: a workflow tells by it
// that only a name was wrong (workflows replay runs recorded before names
// were checked as they ran).
var ErrInvalidName = errors.New("invalid name")

// ValidName reports whether name may name a profile, an agent or a
// session.
func ValidName(name string) bool { return nameRule.MatchString(name) }

// ValidateName is nil for a valid name, else INVALID_INPUT saying what was
// wrong; what is the field ("agent", "session ID").
func ValidateName(what, name string) error {
	if ValidName(name) {
		return nil
	}
	if r := []rune(name); len(r) > 200 {
		name = string(r[:200]) + "…"
	}
	return errcode.Wrap(errcode.InvalidInput, ErrInvalidName, fmt.Sprintf("%s %q is not valid: a name is %s", what, name, NameRule))
}

// validateOptionalNames checks the names that are set, in order (the
// first error is the same on every run, as a workflow needs).
func validateOptionalNames(fields ...[2]string) error {
	for _, f := range fields {
		if f[1] != "" {
			if err := ValidateName(f[0], f[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateSession checks the names of a Session workflow's input: its
// session ID, agent and profile become the session file's path on the
// worker, so a hand-made input with "../" in one is refused before
// anything runs.
func ValidateSession(in SessionInput) error {
	if err := ValidateName("session ID", in.SessionID); err != nil {
		return err
	}
	fields := [][2]string{{"agent", in.Agent}, {"profile", in.Child.Profile}, {"agent", in.Child.Agent}}
	if d := in.Delegation; d != nil {
		fields = append(fields, [2]string{"profile", d.Task.Profile}, [2]string{"agent", d.Task.Agent})
	}
	return validateOptionalNames(fields...)
}
