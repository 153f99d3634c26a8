package cli

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// TestReplyParse: reply's and questions' flags and arguments, registered
// beside the other verbs.
func TestReplyParse(t *testing.T) {
	if !slices.Contains(Verbs, "reply") || !slices.Contains(Verbs, "questions") {
		t.Fatalf("verbs %v lack reply and questions", Verbs)
	}
	stdio := IO{Getenv: func(string) string { return "" }}
	for _, tc := range []struct {
		name string
		verb string
		args []string
		want verb
		rest []string
	}{
		{"an answer", "reply", []string{"--json", "--question", "call_1", "--by", "ps-1", "s-1", "Use", "PostgreSQL."},
			&replyOptions{question: "call_1", by: "ps-1"}, []string{"s-1", "Use", "PostgreSQL."}},
		{"an answer from stdin", "reply", []string{"--input", "-", "s-1"}, &replyOptions{input: "-"}, []string{"s-1"}},
		{"questions of a folder", "questions", []string{"--cwd", "/repo", "--parent-session", "ps", "--limit", "5"},
			&questionsOptions{cwd: "/repo", parent: "ps", limit: 5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, v, err := parse(tc.verb, tc.args, stdio)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, tc.want) || !slices.Equal(cmd.args, tc.rest) {
				t.Fatalf("options %+v args %q, want %+v %q", v, cmd.args, tc.want, tc.rest)
			}
		})
	}
}

// TestReplyRefusedBeforeTheService: an answer that is missing, empty or
// too long is INVALID_INPUT before any call to Temporal (the client here
// has none).
func TestReplyRefusedBeforeTheService(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(long, []byte(strings.Repeat("a", api.MaxAnswerBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"no ID", nil, "", "usage: subagents reply"},
		{"no answer", []string{"s-1"}, "", "must not be empty"},
		{"a blank answer on stdin", []string{"--input", "-", "s-1"}, " \n", "must not be empty"},
		{"arguments and a file", []string{"--input", "-", "s-1", "yes"}, "", "not both"},
		{"an answer too long", []string{"--input", "long.txt", "s-1"}, "", "more than the 65536"},
		{"a missing file", []string{"--input", "missing.txt", "s-1"}, "", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, v, err := parse("reply", tc.args, IO{Getenv: func(string) string { return "" }, In: strings.NewReader(tc.stdin), Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			err = v.run(context.Background(), cmd, &client.Client{})
			if !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want INVALID_INPUT saying %q", err, tc.want)
			}
		})
	}
}
