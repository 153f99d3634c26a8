package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// scheduleRequest parses `schedule ARGS` as the verb does, from dir with
// stdin, into its request.
func scheduleRequest(t *testing.T, dir, stdin string, env map[string]string, args ...string) (*command, client.ScheduleRequest, error) {
	t.Helper()
	io := IO{In: strings.NewReader(stdin), Err: io.Discard, Dir: dir, Getenv: func(k string) string { return env[k] }}
	cmd, v, err := parse("schedule", args, io)
	if err != nil {
		return cmd, client.ScheduleRequest{}, err
	}
	req, err := v.(*scheduleOptions).request(cmd, cmd.args)
	return cmd, req, err
}

func TestScheduleRequest(t *testing.T) {
	dir := t.TempDir()
	planFile := filepath.Join(dir, "review.yaml")
	if err := os.WriteFile(planFile, []byte("name: review\nsteps:\n  - task: Review the diff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	yes := true
	tests := []struct {
		name  string
		args  []string
		stdin string
		env   map[string]string
		want  client.ScheduleRequest
		json  bool
		code  errcode.Code
	}{
		{name: "create from words, flags after the action",
			args: []string{"create", "--every", "2h", "--agent", "scout", "--overlap", "buffer_one", "--quiet", "--json", "scan", "the", "logs"},
			want: client.ScheduleRequest{Action: "create", Every: "2h", Overlap: "buffer_one", Quiet: &yes, Prompt: "scan the logs", Agent: "scout", Cwd: dir}, json: true},
		{name: "create with flags before the action, a relative folder",
			args: []string{"--json", "--cron", "0 9 * * 1-5", "--timezone", "Europe/Berlin", "--cwd", "sub", "create", "--id", "standup", "--note", "daily", "--end", "30d", "standup notes"},
			want: client.ScheduleRequest{Action: "create", ID: "standup", Cron: "0 9 * * 1-5", Timezone: "Europe/Berlin", Note: "daily", End: "30d", Prompt: "standup notes", Cwd: filepath.Join(dir, "sub")}, json: true},
		{name: "create a saved plan with its arguments",
			args: []string{"create", "--calendar", "hour=9 dow=mon", "--plan", "review", "--arg", "file=cli.go", "--catchup", "none"},
			want: client.ScheduleRequest{Action: "create", Calendar: "hour=9 dow=mon", Catchup: "none", Plan: json.RawMessage(`"review"`), Args: map[string]string{"file": "cli.go"}, Cwd: dir}},
		{name: "create a plan file", args: []string{"create", "--at", "10m", "--plan", planFile},
			want: client.ScheduleRequest{Action: "create", At: "10m", Plan: json.RawMessage(`{"name":"review","steps":[{"task":"Review the diff"}]}`), Cwd: dir}},
		{name: "create from work JSON (as start --input)", args: []string{"create", "--every", "1d", "--input", "-"},
			stdin: `{"tasks": [{"name": "a", "prompt": "look"}, {"name": "b", "prompt": "check", "profile": "scout"}], "max_concurrency": 1}`,
			want:  client.ScheduleRequest{Action: "create", Every: "1d", Tasks: []api.TaskSpec{{Name: "a", Prompt: "look"}, {Name: "b", Prompt: "check", Profile: "scout"}}, MaxConcurrency: 1, Cwd: dir}},
		{name: "the task tool's request", args: []string{"--json", "--input", "-"},
			stdin: `{"action": "create", "cwd": "` + dir + `", "every": "2s", "quiet": true, "tasks": [{"prompt": "look", "agent": "scout"}]}`,
			want:  client.ScheduleRequest{Action: "create", Every: "2s", Quiet: &yes, Tasks: []api.TaskSpec{{Prompt: "look", Agent: "scout"}}, Cwd: dir}, json: true},
		{name: "pause with a note, the ID before the flags", args: []string{"pause", "nightly", "--note", "holidays"},
			want: client.ScheduleRequest{Action: "pause", ID: "nightly", Note: "holidays"}},
		{name: "pause from the tool", args: []string{"--input", "-"}, stdin: `{"action": "pause", "id": "nightly", "cwd": "/x"}`,
			want: client.ScheduleRequest{Action: "pause", ID: "nightly", Cwd: "/x"}},
		{name: "list of a folder", args: []string{"list", "--cwd", "sub"}, want: client.ScheduleRequest{Action: "list", Cwd: filepath.Join(dir, "sub")}},
		{name: "list of all", args: []string{"list"}, want: client.ScheduleRequest{Action: "list"}},
		{name: "trigger with a policy", args: []string{"trigger", "--overlap", "skip", "nightly"}, want: client.ScheduleRequest{Action: "trigger", ID: "nightly", Overlap: "skip"}},
		{name: "claim as the extension asks", args: []string{"--json", "--by", "sess-1", "--pid", "42", "--pid-start", "777", "--replace", "a, b", "--", "claim"},
			want: client.ScheduleRequest{Action: "claim", By: "sess-1", Holder: &api.ResultHolder{PID: 42, Start: "777"}, Replace: []string{"a", "b"}, Cwd: dir}, json: true},
		{name: "ack of two results", args: []string{"ack", "--by", "s", "x-result", "y-result"}, want: client.ScheduleRequest{Action: "ack", By: "s", IDs: []string{"x-result", "y-result"}}},
		{name: "a subagent's depth comes with it", args: []string{"create", "--every", "1h", "x"}, env: map[string]string{"PI_SUBAGENT_DEPTH": "1"},
			want: client.ScheduleRequest{Action: "create", Every: "1h", Prompt: "x", Cwd: dir, Depth: 1}},
		{name: "no action", args: []string{"--every", "1h"}, code: errcode.InvalidInput},
		{name: "an unknown action", args: []string{"frob"}, code: errcode.InvalidInput},
		{name: "describe without an ID", args: []string{"describe"}, code: errcode.InvalidInput},
		{name: "work where none is taken", args: []string{"pause", "nightly", "and", "more"}, code: errcode.InvalidInput},
		{name: "a connection flag after the action", args: []string{"list", "--task-queue", "q", "--json"},
			want: client.ScheduleRequest{Action: "list"}, json: true},
		{name: "prompt words after --, one that looks like a flag", args: []string{"create", "--every", "1h", "--", "--verbose", "logs"},
			want: client.ScheduleRequest{Action: "create", Every: "1h", Prompt: "--verbose logs", Cwd: dir}},
		{name: "a mistyped flag", args: []string{"create", "--evry", "1h", "x"}, code: errcode.InvalidInput},
		{name: "--arg without a plan", args: []string{"create", "--every", "1h", "--arg", "a=b", "x"}, code: errcode.InvalidInput},
		{name: "an unknown field in the request", args: []string{"--input", "-"}, stdin: `{"action": "create", "evry": "1h"}`, code: errcode.InvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, got, err := scheduleRequest(t, dir, tt.stdin, tt.env, tt.args...)
			if tt.code != "" {
				if !errcode.Is(err, tt.code) {
					t.Fatalf("err = %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(tt.want)
			if !bytes.Equal(a, b) || got.Depth != tt.want.Depth {
				t.Errorf("request\n %s (depth %d)\nwant\n %s (depth %d)", a, got.Depth, b, tt.want.Depth)
			}
			if cmd.asJSON != tt.json {
				t.Errorf("asJSON = %v, want %v", cmd.asJSON, tt.json)
			}
		})
	}
}

func TestPrintSchedules(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	end := now.Add(48 * time.Hour)
	env := client.Envelope{Schedules: []client.ScheduleItem{{
		ID: "nightly-3fa9c1", Name: "scan the logs", Cwd: "/repo", Kind: "delegation", Spec: "every 2h", Overlap: "skip", Catchup: "none",
		End: &end, Quiet: true, Paused: true, Note: "holidays", NextFires: []time.Time{now.Add(time.Hour)}, Fires: 3, Missed: 1,
		Runs: []client.ScheduleRun{{ID: "nightly-3fa9c1-2026-11-26T08:00:00Z", DelegationID: "delegation-nightly-3fa9c1-2026-11-26T080000Z", Status: "failed",
			Fired: now.Add(-2 * time.Hour), Summary: "Subagent timed out", ResultID: "r-result"}},
	}}}
	var list, desc bytes.Buffer
	printSchedules(&list, "list", env, now)
	printSchedules(&desc, "describe", env, now)
	for _, want := range []string{"nightly-3fa9c1", "paused", "every 2h", "failed", "scan the logs"} {
		if !strings.Contains(list.String(), want) {
			t.Errorf("list lacks %q:\n%s", want, list.String())
		}
	}
	for _, want := range []string{"delegation in /repo", "note:      holidays", "catchup:   none", "only failed runs' results (quiet)", "3 run(s), 1 missed",
		"today 08:00:00", "waiting for a pi session", "Subagent timed out"} {
		if !strings.Contains(desc.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, desc.String())
		}
	}
	var empty bytes.Buffer
	printSchedules(&empty, "list", client.Envelope{}, now)
	if empty.String() != "no schedules\n" {
		t.Errorf("an empty list prints %q", empty.String())
	}
}

// TestPrintPausedSchedule: a paused schedule has no next fire (the times
// Temporal gives for it are where it stood at the pause, past ones too):
// list and describe say it is paused, since when and why, and the command
// that resumes it; an active one says when it fires next.
func TestPrintPausedSchedule(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	since := now.Add(-3 * time.Hour)
	for _, tt := range []struct {
		name       string
		item       client.ScheduleItem
		list, desc []string
		not        []string
	}{{
		name: "paused, with a past next fire from an older service",
		item: client.ScheduleItem{ID: "scan-1", Spec: "every 2h", Paused: true, PausedSince: &since, Note: "holidays",
			NextFires: []time.Time{now.Add(-time.Hour)}},
		list: []string{"(paused)", "scan-1 is paused (since today 07:00:00: holidays): `subagents schedule resume scan-1` lets it fire again"},
		desc: []string{"state:     paused since today 07:00:00", "note:      holidays", "next:      none while paused: `subagents schedule resume scan-1` lets it fire again"},
		not:  []string{"today 09:00:00"},
	}, {
		name: "paused elsewhere (the UI): no time known",
		item: client.ScheduleItem{ID: "scan-2", Spec: "every 2h", Paused: true, Note: "Paused via UI"},
		list: []string{"scan-2 is paused (Paused via UI): `subagents schedule resume scan-2`"},
		desc: []string{"state:     paused\n", "none while paused"},
		not:  []string{"since"},
	}, {
		name: "active",
		item: client.ScheduleItem{ID: "scan-3", Spec: "every 2h", NextFires: []time.Time{now.Add(time.Hour)}},
		list: []string{"active", "today 11:00:00"},
		desc: []string{"state:     active", "next:      today 11:00:00"},
		not:  []string{"paused", "resume"},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			env := client.Envelope{Schedules: []client.ScheduleItem{tt.item}}
			var list, desc bytes.Buffer
			printSchedules(&list, "list", env, now)
			printSchedules(&desc, "describe", env, now)
			for _, want := range tt.list {
				if !strings.Contains(list.String(), want) {
					t.Errorf("list lacks %q:\n%s", want, list.String())
				}
			}
			for _, want := range tt.desc {
				if !strings.Contains(desc.String(), want) {
					t.Errorf("describe lacks %q:\n%s", want, desc.String())
				}
			}
			for _, not := range tt.not {
				if strings.Contains(list.String()+desc.String(), not) {
					t.Errorf("says %q:\n%s\n%s", not, list.String(), desc.String())
				}
			}
		})
	}
}

// TestScheduleMistakesNeedNoService: every mistake of a schedule command is
// found before any connection (the verb runs here with no client at all),
// so that it is INVALID_INPUT whether or not a service runs; a subagent's
// change of a schedule is refused the same way, its look allowed.
func TestScheduleMistakesNeedNoService(t *testing.T) {
	dir := t.TempDir()
	noService := map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1"}
	sub := map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1", "PI_SUBAGENT_DEPTH": "1"}
	tests := []struct {
		name  string
		args  []string
		stdin string
		env   map[string]string
		code  errcode.Code
		said  string
	}{
		{name: "an interval of 0s", args: []string{"create", "--every", "0s", "x"}, code: errcode.InvalidInput, said: "every"},
		{name: "a cron line that is none", args: []string{"create", "--cron", "bad", "x"}, code: errcode.InvalidInput, said: "cron"},
		{name: "at yesterday", args: []string{"create", "--at", "yesterday", "x"}, code: errcode.InvalidInput, said: "at"},
		{name: "at a time past", args: []string{"create", "--at", "2020-01-01T00:00:00Z", "x"}, code: errcode.InvalidInput, said: "in the past"},
		{name: "two whens", args: []string{"create", "--every", "1h", "--cron", "@daily", "x"}, code: errcode.InvalidInput, said: "only one of"},
		{name: "no when", args: []string{"create", "x"}, code: errcode.InvalidInput, said: "one of"},
		{name: "nothing to run", args: []string{"create", "--every", "1h"}, code: errcode.InvalidInput, said: "say what the schedule runs"},
		{name: "an unknown action", args: []string{"bogus"}, code: errcode.InvalidInput, said: "schedule -h"},
		{name: "no action", args: []string{"--every", "1h"}, code: errcode.InvalidInput, said: "takes an action"},
		{name: "a bad overlap", args: []string{"create", "--every", "1h", "--overlap", "sometimes", "x"}, code: errcode.InvalidInput, said: "overlap"},
		{name: "a bad catch-up", args: []string{"create", "--every", "1h", "--catchup", "latest", "x"}, code: errcode.InvalidInput, said: "catchup"},
		{name: "an end past", args: []string{"create", "--every", "1h", "--end", "2020-01-01T00:00:00Z", "x"}, code: errcode.InvalidInput, said: "end"},
		{name: "an unknown timezone", args: []string{"create", "--cron", "@daily", "--timezone", "Mars/Olympus", "x"}, code: errcode.InvalidInput, said: "timezone"},
		{name: "a bad schedule ID", args: []string{"pause", "no/such"}, code: errcode.InvalidInput, said: "schedule ID"},
		{name: "an update of nothing", args: []string{"update", "nightly"}, code: errcode.InvalidInput, said: "nothing to update"},
		{name: "an update to a bad timezone", args: []string{"update", "nightly", "--timezone", "Mars/Olympus"}, code: errcode.InvalidInput, said: "timezone"},
		{name: "a trigger with a bad overlap", args: []string{"trigger", "nightly", "--overlap", "sometimes"}, code: errcode.InvalidInput, said: "overlap"},
		{name: "a batch with one bad task", args: []string{"create", "--every", "1h", "--input", "-"},
			stdin: `{"tasks": [{"name": "good", "prompt": "look"}, {"name": "bad", "prompt": "  "}]}`, code: errcode.InvalidInput, said: "tasks[1] (bad)"},
		{name: "a subagent creates", args: []string{"create", "--every", "1h", "x"}, env: sub, code: errcode.DepthExceeded},
		{name: "a subagent pauses", args: []string{"pause", "nightly"}, env: sub, code: errcode.DepthExceeded},
		{name: "a subagent resumes", args: []string{"resume", "nightly"}, env: sub, code: errcode.DepthExceeded},
		{name: "a subagent triggers", args: []string{"trigger", "nightly"}, env: sub, code: errcode.DepthExceeded},
		{name: "a subagent updates", args: []string{"update", "nightly", "--note", "x"}, env: sub, code: errcode.DepthExceeded},
		{name: "a subagent deletes", args: []string{"delete", "nightly"}, env: sub, code: errcode.DepthExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := cmpOr(tt.env, noService)
			io := IO{In: strings.NewReader(tt.stdin), Out: io.Discard, Err: io.Discard, Dir: dir, Getenv: func(k string) string { return env[k] }}
			cmd, v, err := parse("schedule", tt.args, io)
			if err == nil {
				// No client: a mistake must be found before one is needed.
				err = v.run(t.Context(), cmd, nil)
			}
			if !errcode.Is(err, tt.code) {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.said) {
				t.Errorf("err %q does not say %q", err, tt.said)
			}
			if tt.code == errcode.InvalidInput && errcode.ExitCode(err) != errcode.ExitBadInput {
				t.Errorf("exit code %d, want %d", errcode.ExitCode(err), errcode.ExitBadInput)
			}
		})
	}
	// A subagent still looks: list and describe pass the check.
	for _, args := range [][]string{{"list"}, {"describe", "nightly"}} {
		io := IO{In: strings.NewReader(""), Err: io.Discard, Dir: dir, Getenv: func(k string) string { return sub[k] }}
		cmd, v, err := parse("schedule", args, io)
		if err == nil {
			err = v.(*scheduleOptions).prepare(cmd)
		}
		if err != nil {
			t.Errorf("a subagent's %v: %v", args, err)
		}
	}
}

func cmpOr(a, b map[string]string) map[string]string {
	if a != nil {
		return a
	}
	return b
}

// TestScheduleHelp: -h after the action prints the help that -h before it
// adds to the flags: the actions and an example of each kind of schedule.
func TestScheduleHelp(t *testing.T) {
	var stderr bytes.Buffer
	io := IO{In: strings.NewReader(""), Out: io.Discard, Err: &stderr, Dir: t.TempDir(), Getenv: func(string) string { return "" }}
	_, v, err := parse("schedule", []string{"create", "-h"}, io)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("create -h: %v, want the help", err)
	}
	help := stderr.String()
	for _, want := range []string{
		"Usage of subagents schedule:", "-every INTERVAL", "Actions:",
		"create ", "list ", "describe ID", "pause ID", "resume ID", "trigger ID", "update ID", "delete ID",
		"--at 30m", "--every 6h", "--cron \"0 9 * * 1-5\"", "--calendar \"hour=2 day_of_week=sun\"", "--plan nightly-review",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("the help lacks %q:\n%s", want, help)
		}
	}
	if v.(*scheduleOptions).helpText() != scheduleHelp || !strings.HasSuffix(help, scheduleHelp) {
		t.Errorf("-h after the action and -h before it (helpText) say different things")
	}
}

// TestScheduleFolderThroughALink: a folder reached through a symbolic link
// is the schedule's by its real path, as pi names the folder it runs in,
// so that the mark, the schedule's folder and a claim's agree.
func TestScheduleFolderThroughALink(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(real)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"create", "--every", "1h", "x"},
		{"claim", "--by", "s"},
		{"list", "--cwd", "."},
		{"create", "--every", "1h", "--cwd", link, "x"},
	} {
		_, req, err := scheduleRequest(t, link, "", nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		if req.Cwd != want {
			t.Errorf("%v from %s: cwd %q, want the real %q", args, link, req.Cwd, want)
		}
	}
}

// TestScheduleUnavailableSaysHowToKeepItRunning: the service not
// answering a schedule's call says what keeps schedules firing.
func TestScheduleUnavailableSaysHowToKeepItRunning(t *testing.T) {
	o := &scheduleOptions{}
	err := o.unavailable(errcode.New(errcode.ServiceUnavailable, "cannot reach Temporal at 127.0.0.1:7233"))
	if !errcode.Is(err, errcode.ServiceUnavailable) || !strings.Contains(err.Error(), "cannot reach Temporal") || !strings.Contains(err.Error(), "subagents service install") {
		t.Fatalf("err = %v", err)
	}
	other := errcode.New(errcode.InvalidInput, "x")
	if o.unavailable(other) != other {
		t.Fatalf("another error changed")
	}
}

// TestScheduleChecksBeforeConnecting: the command finds a schedule's
// mistakes before it connects (the dial here fails as with no service,
// and must not be reached); a good request that finds no service says
// what keeps schedules firing.
func TestScheduleChecksBeforeConnecting(t *testing.T) {
	dialed := 0
	noService := func(cmd *command, ctx context.Context) (*client.Client, func(), error) {
		dialed++
		return nil, nil, connection.Unavailable("127.0.0.1:1", errors.New("connection refused"))
	}
	for _, args := range [][]string{
		{"create", "--every", "0s", "x"}, {"create", "--cron", "bad", "x"}, {"create", "--at", "yesterday", "x"},
		{"create", "--every", "1h", "--cron", "@daily", "x"}, {"bogus"}, {"update", "nightly"},
	} {
		stdio := IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard, Dir: t.TempDir(), Getenv: func(string) string { return "" }}
		err := runVerb(t.Context(), append([]string{"schedule"}, args...), stdio, noService)
		if !errcode.Is(err, errcode.InvalidInput) || errcode.ExitCode(err) != errcode.ExitBadInput {
			t.Errorf("schedule %v: %v (exit %d), want INVALID_INPUT, exit 2", args, err, errcode.ExitCode(err))
		}
	}
	var help bytes.Buffer
	stdio := IO{In: strings.NewReader(""), Out: io.Discard, Err: &help, Getenv: func(string) string { return "" }}
	for _, args := range [][]string{{"-h"}, {"create", "-h"}} {
		help.Reset()
		if err := runVerb(t.Context(), append([]string{"schedule"}, args...), stdio, noService); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "Examples:") {
			t.Errorf("schedule %v: %v\n%s", args, err, help.String())
		}
	}
	if dialed != 0 {
		t.Fatalf("a mistake dialed %d times", dialed)
	}
	stdio = IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard, Dir: t.TempDir(), Getenv: func(string) string { return "" }}
	err := runVerb(t.Context(), []string{"schedule", "list"}, stdio, noService)
	if !errcode.Is(err, errcode.ServiceUnavailable) || !strings.Contains(err.Error(), "subagents service install") || dialed != 1 {
		t.Fatalf("list with no service: %v (dialed %d)", err, dialed)
	}
}
