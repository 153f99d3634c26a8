package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

// flagLine is a flag's line in a verb's -h: "  -name placeholder".
var flagLine = regexp.MustCompile(`^  -(\S+)(?: (.+))?$`)

// valueNames are the placeholders the flag package gives a flag by its
// type; a back-quoted word in capitals (`FILE`) may name one too.
var valueNames = map[string]bool{"": true, "value": true, "string": true, "int": true, "uint": true, "int64": true, "uint64": true, "float": true, "duration": true}

// checkPlaceholders fails t for each flag of a -h text whose placeholder
// is no value's name (e.g. "-ui-url subagents dev"), and returns how many
// flags it saw.
func checkPlaceholders(t *testing.T, verb, usage string) int {
	t.Helper()
	n := 0
	for line := range strings.Lines(usage) {
		m := flagLine.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		n++
		if !valueNames[m[2]] && !metavariable.MatchString(m[2]) {
			t.Errorf("subagents %s -h: flag -%s shows the placeholder %q, which names no value", verb, m[1], m[2])
		}
	}
	return n
}

// TestEveryVerbsUsageShowsValuePlaceholders: every verb's -h names each
// flag's value by its kind; `run -h` showed "-ui-url subagents dev" (a
// back-quoted command in the usage became the placeholder), and `worker -h`
// "-setup subagents setup". dev and demo are checked in cli/dev.
func TestEveryVerbsUsageShowsValuePlaceholders(t *testing.T) {
	verbs := append([]string{"worker", "setup", "ui", "stop", "doctor", "service"}, Verbs...)
	for _, verb := range verbs {
		t.Run(verb, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), []string{verb, "-h"}, &stdout, &stderr, nil)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("-h: %v", err)
			}
			if n := checkPlaceholders(t, verb, stdout.String()+stderr.String()); n == 0 {
				t.Fatalf("no flag in the usage of %s:\n%s", verb, stderr.String())
			}
		})
	}
}

// TestPlainUsages: a back-quoted command prints as plain quotes; a
// back-quoted value name stays the placeholder.
func TestPlainUsages(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("ui-url", "", "default: as `subagents dev` serves it")
	fs.String("input", "", "read the request from `FILE`, or - for stdin")
	fs.Bool("setup", false, "as `subagents setup` does, then `twice`")
	plainUsages(fs)
	for _, tc := range []struct{ flag, name, usage string }{
		{"ui-url", "string", "default: as 'subagents dev' serves it"},
		{"input", "FILE", "read the request from FILE, or - for stdin"},
		{"setup", "", "as 'subagents setup' does, then 'twice'"},
	} {
		name, usage := flag.UnquoteUsage(fs.Lookup(tc.flag))
		if name != tc.name || usage != tc.usage {
			t.Errorf("-%s: placeholder %q, usage %q; want %q, %q", tc.flag, name, usage, tc.name, tc.usage)
		}
	}
}

// TestMistypedFlag: a mistyped flag is one line: the error, the flag meant
// when one is close, and where the verb's flags are listed; no usage; exit
// code 2 (INVALID_INPUT). It printed the verb's whole usage (40 to 51
// lines) and no hint.
func TestMistypedFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" for no suggestion
	}{
		{[]string{"run", "--tiemout", "5", "p"}, "did you mean --timeout?"},
		{[]string{"run", "--agnet", "scout", "p"}, "did you mean --agent?"},
		{[]string{"status", "--jsno", "id"}, "did you mean --json?"},
		{[]string{"list", "--stat", "failed"}, "did you mean --status?"},
		{[]string{"wait", "--Timeout", "5", "id"}, "did you mean --timeout?"},
		{[]string{"send", "--wiat", "id", "p"}, "did you mean --wait?"},
		{[]string{"worker", "--warm-pol", "2"}, "did you mean --warm-pool?"},
		{[]string{"stop", "--data-dri", "/x"}, "did you mean --data-dir?"},
		{[]string{"output", "--xyzzy", "id"}, ""},
		// Flags are read after the arguments too: a prompt word that
		// starts with - is told to go after --.
		{[]string{"run", "fix", "-x is broken"}, "arguments that start with - go after --: subagents run [flags] -- ARGS"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), tt.args, &stdout, &stderr, nil)
			if code := errcode.ExitCode(err); code != errcode.ExitBadInput {
				t.Fatalf("exit code %d (%v), want %d", code, err, errcode.ExitBadInput)
			}
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Fatalf("printed more than the error line:\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
			}
			Report(err, &stderr)
			got := stderr.String()
			if strings.Count(got, "\n") != 1 {
				t.Fatalf("want one line, got:\n%s", got)
			}
			if !strings.Contains(got, "flag provided but not defined") || !strings.Contains(got, "`subagents "+tt.args[0]+" -h` lists its flags") {
				t.Errorf("line %q", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) || tt.want == "" && strings.Contains(got, "did you mean") {
				t.Errorf("line %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMistypedCommand: an unknown command is one line too, with the
// command meant; it printed the whole usage.
func TestMistypedCommand(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		{"strat", "did you mean start?"},
		{"stauts", "did you mean status?"},
		{"lsit", "did you mean list?"},
		{"frobnicate", ""},
	} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), []string{tc.cmd}, &stdout, &stderr, nil)
		if errcode.ExitCode(err) != errcode.ExitBadInput || stdout.Len() != 0 || stderr.Len() != 0 {
			t.Fatalf("%s: %v, printed %q %q", tc.cmd, err, stdout.String(), stderr.String())
		}
		msg := err.Error()
		if !strings.Contains(msg, `unknown command "`+tc.cmd+`"`) || !strings.Contains(msg, "`subagents -h` lists the commands") ||
			tc.want != "" && !strings.Contains(msg, tc.want) || tc.want == "" && strings.Contains(msg, "did you mean") {
			t.Errorf("%s: %q", tc.cmd, msg)
		}
	}
}

// TestClosest: a swap, a letter off, a prefix, a case slip; nothing for a
// word that is far from every name.
func TestClosest(t *testing.T) {
	names := []string{"timeout", "timeout-ms", "progress", "json", "task-queue", "address"}
	for _, tc := range []struct{ in, want string }{
		{"tiemout", "timeout"},
		{"timeuot", "timeout"},
		{"timout", "timeout"},
		{"time", "timeout"},
		{"timeout-m", "timeout-ms"},
		{"JSON", "json"},
		{"jsn", "json"},
		{"prog", "progress"},
		{"task", "task-queue"},
		{"adress", "address"},
		{"t", ""},
		{"xyz", ""},
		{"verbose", ""},
	} {
		if got := closest(tc.in, names); got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
