package dev

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// flagLine is a flag's line in -h: "  -name placeholder".
var flagLine = regexp.MustCompile(`^  -(\S+)(?: (.+))?$`)

// valueName is a placeholder the flag package gives by a flag's type, or
// a value's name in capitals.
var valueName = regexp.MustCompile(`^(|value|string|int|uint|int64|uint64|float|duration|[A-Z][A-Z0-9_]*)$`)

// TestUsageShowsValuePlaceholders: `dev -h` and `demo -h` name each flag's
// value by its kind; `demo -h` showed "-pi subagents dev" (a back-quoted
// command in the usage became the placeholder). The other verbs are
// checked in cli.
func TestUsageShowsValuePlaceholders(t *testing.T) {
	for name, m := range map[string]func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) error{
		"dev":  func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return Main(ctx, a, o, e) },
		"demo": func(ctx context.Context, a []string, o, e *bytes.Buffer) error { return DemoMain(ctx, a, o, e) },
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := m(context.Background(), []string{"-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("-h: %v", err)
			}
			n := 0
			for line := range strings.Lines(stderr.String()) {
				f := flagLine.FindStringSubmatch(strings.TrimRight(line, "\n"))
				if f == nil {
					continue
				}
				n++
				if !valueName.MatchString(f[2]) {
					t.Errorf("subagents %s -h: flag -%s shows the placeholder %q, which names no value", name, f[1], f[2])
				}
			}
			if n == 0 {
				t.Fatalf("no flag in:\n%s", stderr.String())
			}
		})
	}
}
