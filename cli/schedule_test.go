package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
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
	o := v.(*scheduleOptions)
	pos, err := o.scheduleArgs(cmd)
	if err != nil {
		return cmd, client.ScheduleRequest{}, err
	}
	req, err := o.request(cmd, pos)
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
		{name: "a connection flag after the action", args: []string{"list", "--task-queue", "q"}, code: errcode.InvalidInput},
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
	for _, want := range []string{"nightly-3fa9c1", "paused", "every 2h", "today 11:00:00", "failed", "scan the logs"} {
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
