package cli

import (
	"flag"
	"fmt"
	"regexp"
	"strings"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/nearest"
)

// What a user sees when a verb's flags are wrong or asked for: one line for
// a mistake (the flag package's error, a close flag's name, where the flags
// are listed) instead of the 40 to 51 lines of a verb's whole usage; the
// usage itself only for -h, with a placeholder after a flag that is a kind
// of value, never a phrase lifted from its description.

// metavariable is a back-quoted word that the flag package may show as a
// flag's placeholder: a value's name in capitals (`FILE`, `DIR`).
var metavariable = regexp.MustCompile("^[A-Z][A-Z0-9_]*$")

// plainUsages keeps the flag package from taking a back-quoted command in
// a usage (as `subagents dev` serves it) for the flag's placeholder, which
// printed "-ui-url subagents dev": such back-quotes print as plain quotes.
// Usages quote commands the way the README does, so this holds for every
// verb's flags, those registered elsewhere too.
func plainUsages(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		i := strings.IndexByte(f.Usage, '`')
		if i < 0 {
			return
		}
		j := strings.IndexByte(f.Usage[i+1:], '`')
		if j >= 0 && metavariable.MatchString(f.Usage[i+1:i+1+j]) {
			return
		}
		f.Usage = strings.ReplaceAll(f.Usage, "`", "'")
	})
}

// flagError is the one line that says what was wrong with a verb's flags:
// the flag package's error, a close flag when the one given is unknown, and
// where the verb's flags are listed.
func flagError(verb string, fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := closest(name, names); s != "" {
			msg += "; did you mean --" + s + "?"
		} else if strings.ContainsAny(name, " \t\n") || (name != "" && name[0] >= '0' && name[0] <= '9') {
			// Flags are read after the arguments too: a prompt word or a
			// number that starts with - needs the -- before it.
			msg += fmt.Sprintf("; arguments that start with - go after --: subagents %s [flags] -- ARGS", verb)
		}
	}
	return fmt.Sprintf("%s (`subagents %s -h` lists its flags)", msg, verb)
}

// commands are the words `subagents` takes first, for a mistyped one.
var commands = append([]string{"dev", "worker", "setup", "ui", "demo", "stop", "help"}, Verbs...)

// unknownCommand is the error for a first word that is no command: one
// line, with a close command when there is one.
func unknownCommand(name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if s := closest(name, commands); s != "" {
		msg += "; did you mean " + s + "?"
	}
	return errcode.New(errcode.InvalidInput, msg+" (`subagents -h` lists the commands)")
}

// closest is the candidate a mistyped name most likely meant, or ""
// (nearest.Closest: a flag the name starts, or one a few edits away).
func closest(name string, candidates []string) string { return nearest.Closest(name, candidates) }
