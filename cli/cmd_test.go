package cli

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/worker"
)

// TestSecondsFlag: every time flag takes seconds or a Go duration, the
// same on every verb.
func TestSecondsFlag(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"600", 600 * time.Second, false},
		{"0", 0, false},
		{"10m", 10 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"250ms", 250 * time.Millisecond, false},
		{"-5", 0, true},
		{"-1s", 0, true},
		{"ten", 0, true},
		{"", 0, true},
	} {
		var d time.Duration
		err := seconds{&d}.Set(tc.in)
		if (err != nil) != tc.wantErr || (err == nil && d != tc.want) {
			t.Errorf("Set(%q) = %v, %v; want %v, error %v", tc.in, d, err, tc.want, tc.wantErr)
		}
	}
}

// TestParse: each verb's flags and arguments fill its options and the
// common flags, the same time units on every verb; a bad flag is
// INVALID_INPUT.
func TestParse(t *testing.T) {
	env := func(string) string { return "" }
	tests := []struct {
		name    string
		verb    string
		args    []string
		want    verb
		wantCmd command // the fields compared: args, asJSON, taskQueue, host
		wantErr bool
	}{
		{name: "start with flags", verb: "start", args: []string{"--agent", "scout", "--timeout", "90", "--file", "a.go", "--max-concurrency", "2", "look", "around"},
			want:    &startOptions{agent: "scout", timeout: 90 * time.Second, files: fileFlags{{Path: "a.go"}}, maxConcurrency: 2},
			wantCmd: command{args: []string{"look", "around"}, taskQueue: "subagents"}},
		{name: "start timeout as a duration", verb: "start", args: []string{"--timeout", "10m", "p"},
			want: &startOptions{timeout: 10 * time.Minute}, wantCmd: command{args: []string{"p"}, taskQueue: "subagents"}},
		{name: "run with its wait timeout", verb: "run", args: []string{"--timeout", "90s", "--wait-timeout", "120", "--deliver", "--parent-session", "ps", "p"},
			want: &startOptions{timeout: 90 * time.Second, waitTimeout: 2 * time.Minute, deliver: true, parentSession: "ps"}, wantCmd: command{args: []string{"p"}, taskQueue: "subagents"}},
		{name: "start from a file", verb: "start", args: []string{"--input", "-", "--json", "--task-queue", "q", "--host", "auto"},
			want: &startOptions{input: "-"}, wantCmd: command{args: []string{}, asJSON: true, taskQueue: "q", host: "auto"}},
		{name: "a negative timeout", verb: "start", args: []string{"--timeout", "-1", "p"}, wantErr: true},
		{name: "a file entry without a path", verb: "start", args: []string{"--file", "", "p"}, wantErr: true},
		{name: "status of several", verb: "status", args: []string{"--json", "a", "b"},
			want: &idsOptions{}, wantCmd: command{args: []string{"a", "b"}, asJSON: true, taskQueue: "subagents"}},
		{name: "wait in seconds", verb: "wait", args: []string{"--timeout", "30", "id"},
			want: &waitOptions{timeout: 30 * time.Second}, wantCmd: command{args: []string{"id"}, taskQueue: "subagents"}},
		{name: "wait as a duration, with progress", verb: "wait", args: []string{"--timeout", "30s", "--progress", "--json", "id"},
			want: &waitOptions{timeout: 30 * time.Second, progress: true}, wantCmd: command{args: []string{"id"}, asJSON: true, taskQueue: "subagents"}},
		{name: "wait in milliseconds", verb: "wait", args: []string{"--timeout-ms", "500", "id"},
			want: &waitOptions{timeoutMS: 500}, wantCmd: command{args: []string{"id"}, taskQueue: "subagents"}},
		{name: "wait that is no time", verb: "wait", args: []string{"--timeout", "soon", "id"}, wantErr: true},
		{name: "wait in the past", verb: "wait", args: []string{"--timeout", "-1s", "id"}, wantErr: true},
		{name: "send with files", verb: "send", args: []string{"--agent", "scout", "--wait", "--file", "b.go", "s-1", "go", "on"},
			want: &sendOptions{agent: "scout", wait: true, files: fileFlags{{Path: "b.go"}}}, wantCmd: command{args: []string{"s-1", "go", "on"}, taskQueue: "subagents"}},
		{name: "list filtered", verb: "list", args: []string{"--status", "running", "--agent", "scout", "--open", "--limit", "5", "--kind", "session"},
			want: &listOptions{filter: client.ListFilter{Status: "running", Agent: "scout", Open: true, Limit: 5, Kind: "session"}}, wantCmd: command{args: []string{}, taskQueue: "subagents"}},
		{name: "output by default", verb: "output", args: []string{"s-1"},
			want: &outputOptions{from: -1}, wantCmd: command{args: []string{"s-1"}, taskQueue: "subagents"}},
		{name: "output paged", verb: "output", args: []string{"--full", "--from", "10", "s-1"},
			want: &outputOptions{full: true, from: 10}, wantCmd: command{args: []string{"s-1"}, taskQueue: "subagents"}},
		{name: "ack by a parent", verb: "ack", args: []string{"--by", "parent-1", "d-1"},
			want: &ackOptions{by: "parent-1"}, wantCmd: command{args: []string{"d-1"}, taskQueue: "subagents"}},
		{name: "a flag another verb has", verb: "ack", args: []string{"--full", "d-1"}, wantErr: true},
		// Flags after the positional arguments count as before them (issue
		// 42: `status ID --json` looked for a session "--json").
		{name: "status with --json after the ID", verb: "status", args: []string{"s-1", "--json"},
			want: &idsOptions{}, wantCmd: command{args: []string{"s-1"}, asJSON: true, taskQueue: "subagents"}},
		{name: "wait with flags on both sides of the IDs", verb: "wait", args: []string{"--progress", "a", "--timeout", "30s", "b", "-json"},
			want: &waitOptions{timeout: 30 * time.Second, progress: true}, wantCmd: command{args: []string{"a", "b"}, asJSON: true, taskQueue: "subagents"}},
		{name: "run with flags after the prompt", verb: "run", args: []string{"fix", "the", "bug", "--agent", "scout", "--timeout=90", "--deliver"},
			want: &startOptions{agent: "scout", timeout: 90 * time.Second, deliver: true}, wantCmd: command{args: []string{"fix", "the", "bug"}, taskQueue: "subagents"}},
		{name: "-- ends the flags", verb: "send", args: []string{"--wait", "s-1", "--", "--json", "-v", "means", "verbose"},
			want: &sendOptions{wait: true}, wantCmd: command{args: []string{"s-1", "--json", "-v", "means", "verbose"}, taskQueue: "subagents"}},
		{name: "a flag's value that looks like a flag", verb: "run", args: []string{"--name", "--", "p", "--description", "-x-"},
			want: &startOptions{name: "--", description: "-x-"}, wantCmd: command{args: []string{"p"}, taskQueue: "subagents"}},
		{name: "a lone - is an argument", verb: "send", args: []string{"s-1", "-", "--wait"},
			want: &sendOptions{wait: true}, wantCmd: command{args: []string{"s-1", "-"}, taskQueue: "subagents"}},
		{name: "a prompt word that looks like a flag, without --", verb: "run", args: []string{"fix", "-x"}, wantErr: true},
		{name: "an unknown verb", verb: "frobnicate", args: []string{"--json"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, got, err := parse(tt.verb, tt.args, IO{Err: io.Discard, Getenv: env})
			if tt.wantErr {
				if !errcode.Is(err, errcode.InvalidInput) {
					t.Fatalf("err = %v, want INVALID_INPUT", err)
				}
				if cmd == nil {
					t.Fatal("no command to answer the error with")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("options %+v, want %+v", got, tt.want)
			}
			gotCmd := command{args: cmd.args, asJSON: cmd.asJSON, taskQueue: cmd.taskQueue, host: cmd.host}
			if !reflect.DeepEqual(gotCmd, tt.wantCmd) {
				t.Errorf("command %+v, want %+v", gotCmd, tt.wantCmd)
			}
		})
	}
}

// TestParseOtherVerbs: profiles, setup and worker fill their options from
// their flags; a bad value or an unknown flag is INVALID_INPUT.
func TestParseOtherVerbs(t *testing.T) {
	tests := []struct {
		name    string
		verb    string
		args    []string
		opts    interface{ register(*flag.FlagSet) }
		check   func(any) bool
		wantErr bool
	}{
		{name: "profiles as JSON", verb: "profiles", args: []string{"--json", "--cwd", "/repo", "--internal"}, opts: &profilesOptions{},
			check: func(o any) bool {
				return *o.(*profilesOptions) == profilesOptions{asJSON: true, internal: true, cwd: "/repo"}
			}},
		{name: "setup with its retention", verb: "setup", args: []string{"--retention", "72h", "--address", "temporal:7233", "--namespace", "agents"}, opts: &setupOptions{},
			check: func(o any) bool {
				s := o.(*setupOptions)
				return s.retention == 72*time.Hour && s.conn.Address == "temporal:7233" && s.conn.Namespace == "agents"
			}},
		{name: "setup by default", verb: "setup", opts: &setupOptions{},
			check: func(o any) bool { return o.(*setupOptions).retention == worker.DefaultRetention }},
		{name: "worker with socket and setup", verb: "worker", args: []string{"--socket", "--setup", "--host", "box", "--warm-pool", "2", "--warm-ttl", "30s", "--tls", "true"}, opts: &workerOptions{},
			check: func(o any) bool {
				w := o.(*workerOptions)
				return w.socket && w.setup && w.flags.Host == "box" && w.flags.WarmPool == 2 && w.flags.WarmTTL == 30*time.Second && w.conn.TLS == "true"
			}},
		{name: "setup with a retention that is no duration", verb: "setup", args: []string{"--retention", "a month"}, opts: &setupOptions{}, wantErr: true},
		{name: "profiles with a worker's flag", verb: "profiles", args: []string{"--warm-pool", "2"}, opts: &profilesOptions{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFlags(tt.verb, tt.args, io.Discard, tt.opts.register)
			if tt.wantErr {
				if !errcode.Is(err, errcode.InvalidInput) {
					t.Fatalf("err = %v, want INVALID_INPUT", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(tt.opts) {
				t.Errorf("options %+v", tt.opts)
			}
		})
	}
}

// TestFailureSaysWhichAndWhy (issue 42): a call whose work did not all
// complete ends with one line that says which task or step did not, and
// why: its error's code and message (`run --plan` said only "1 of 1 tasks
// did not complete"); for a plan, the command that runs it again.
func TestFailureSaysWhichAndWhy(t *testing.T) {
	budget := &errcode.Info{Code: errcode.BudgetExceeded, Message: "Budget exceeded: 2 tool calls of a budget of 2; the child was stopped"}
	tests := []struct {
		name string
		env  client.Envelope
		want string
	}{
		{name: "a plan's step failed, the next skipped",
			env: client.Envelope{DelegationID: "plan-1", Status: "failed", Done: true,
				Plan: &api.PlanView{Steps: []api.StepState{{Key: "a", Path: []string{"api"}, State: api.StateFailed}, {Key: "b", State: api.StateSkipped}}},
				Items: []client.Item{
					{TaskID: "plan-1-a", Name: "a", Status: "failed", Done: true, Error: budget},
					{Name: "b", Status: "skipped", Done: true, Error: &errcode.Info{Code: errcode.Skipped, Message: `not started: step "a" ended failed`}},
				}},
			want: `2 of 2 steps did not complete: step "api/a" (plan-1-a) failed with BUDGET_EXCEEDED: Budget exceeded: 2 tool calls of a budget of 2; the child was stopped, and 1 more; subagents resume plan-1 runs what did not complete again`},
		{name: "a plan of one step",
			env: client.Envelope{DelegationID: "plan-2", Status: "failed", Done: true,
				Plan:  &api.PlanView{Steps: []api.StepState{{Key: "a", State: api.StateFailed}}},
				Items: []client.Item{{TaskID: "plan-2-a", Name: "a", Status: "failed", Done: true, Error: budget}}},
			want: `1 of 1 step did not complete: step "a" (plan-2-a) failed with BUDGET_EXCEEDED: Budget exceeded: 2 tool calls of a budget of 2; the child was stopped; subagents resume plan-2 runs what did not complete again`},
		{name: "a plan stopped before its steps",
			env: client.Envelope{DelegationID: "plan-3", Status: "failed", Done: true,
				Plan: &api.PlanView{Steps: []api.StepState{{Key: "a", State: api.StateSkipped}},
					Stopped: &errcode.Info{Code: errcode.BudgetExceeded, Message: "the plan's budget of $1 is spent"}},
				Items: []client.Item{{Name: "a", Status: "skipped", Done: true}}},
			want: `1 of 1 step did not complete: the plan stopped: BUDGET_EXCEEDED: the plan's budget of $1 is spent; subagents resume plan-3 runs what did not complete again`},
		{name: "one task of two, an unknown profile",
			env: client.Envelope{DelegationID: "delegation-1", Status: "failed", Done: true, Items: []client.Item{
				{TaskID: "s-1", Name: "alpha", Status: "completed", Done: true},
				{TaskID: "s-2", Name: "ghost", Agent: "nope", Status: "failed", Done: true, Error: &errcode.Info{Code: errcode.UnknownAgent, Message: `Unknown profile: "nope"`}},
			}},
			want: `1 of 2 tasks did not complete: task "ghost" (s-2) failed with UNKNOWN_AGENT: Unknown profile: "nope"`},
		{name: "a task that timed out, without a code",
			env:  client.Envelope{Done: true, Items: []client.Item{{TaskID: "s-3", Agent: "scout", Status: "timed_out", Done: true, Error: &errcode.Info{Message: "Timed out after 600s."}}}},
			want: `1 of 1 task did not complete: task "scout" (s-3) timed out: Timed out after 600s.`},
		{name: "a child that finalized with an error",
			env:  client.Envelope{Done: true, Items: []client.Item{{TaskID: "s-4", Name: "fix", Status: "cancelled", Done: true, Output: "stopped by the user"}}},
			want: `1 of 1 task did not complete: task "fix" (s-4) was cancelled: stopped by the user`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &command{verb: "run", io: IO{Out: io.Discard}}
			err := cmd.finish(tt.env, func(client.Envelope) {})
			if !errcode.Is(err, errcode.Failed) || errcode.ExitCode(err) != errcode.ExitFailed {
				t.Fatalf("err = %v, want FAILED", err)
			}
			var coded *errcode.Error
			if !errors.As(err, &coded) || coded.Message != tt.want {
				t.Fatalf("message\n %s\nwant\n %s", err, tt.want)
			}
		})
	}
}
