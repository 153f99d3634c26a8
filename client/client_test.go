package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

func TestListQuery(t *testing.T) {
	tests := []struct {
		name    string
		f       ListFilter
		want    string
		wantErr string
	}{
		{name: "everything", want: "(WorkflowType = 'Session' OR WorkflowType = 'Delegation' OR WorkflowType = 'Plan')"},
		{name: "a parent's open delegations: running ones", f: ListFilter{Kind: "delegation", ParentSessionID: "p-1", Open: true},
			want: "(WorkflowType IN ('Delegation', 'Plan') OR SubagentDelegation = 'open') AND SubagentParentSession = 'p-1' AND ExecutionStatus = 'Running'"},
		{name: "everything open", f: ListFilter{Open: true, now: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)},
			want: "(WorkflowType = 'Session' OR WorkflowType = 'Delegation' OR WorkflowType = 'Plan') AND (ExecutionStatus = 'Running' OR SubagentSendUntil > '2026-11-28T10:00:00Z')"},
		{name: "open sessions: running, or closed and still taking a send", f: ListFilter{Kind: "session", Open: true, now: time.Date(2026, 11, 28, 10, 0, 0, 5, time.FixedZone("x", 3600))},
			want: "WorkflowType = 'Session' AND (ExecutionStatus = 'Running' OR SubagentSendUntil > '2026-11-28T09:00:00.000000005Z')"},
		{name: "running only (the questions' list)", f: ListFilter{Kind: "session", Open: true, running: true},
			want: "WorkflowType = 'Session' AND ExecutionStatus = 'Running'"},
		{name: "delegations, one-task ones closed too", f: ListFilter{Kind: "delegation"},
			want: "(WorkflowType IN ('Delegation', 'Plan') OR SubagentDelegation IN ('open', 'closed'))"},
		{name: "sessions by state, agent and folder", f: ListFilter{Kind: "session", Status: "failed", Agent: "scout", Cwd: "/w"},
			want: "WorkflowType = 'Session' AND ((SubagentStatus = 'failed' AND ExecutionStatus IN ('Running', 'Completed', 'ContinuedAsNew')) OR (ExecutionStatus = 'Failed' AND (SubagentStatus IS NULL OR SubagentStatus != 'timed_out'))) AND SubagentAgent = 'scout' AND SubagentCwd = '/w'"},
		{name: "terminated: Temporal's record only", f: ListFilter{Status: "terminated"},
			want: "(WorkflowType = 'Session' OR WorkflowType = 'Delegation' OR WorkflowType = 'Plan') AND ExecutionStatus = 'Terminated'"},
		{name: "an unknown state", f: ListFilter{Status: "done"}, wantErr: `unknown status "done"`},
		{name: "a quote cannot escape the value", f: ListFilter{Agent: "x' OR 'a'='a"}, wantErr: "must not hold quotes"},
		{name: "plans only (docs/fleet.md shows the kind)", f: ListFilter{Kind: "plan"}, want: "WorkflowType = 'Plan'"},
		{name: "open plans: running ones", f: ListFilter{Kind: "plan", Open: true, Cwd: "/w"},
			want: "WorkflowType = 'Plan' AND SubagentCwd = '/w' AND ExecutionStatus = 'Running'"},
		{name: "unknown kind", f: ListFilter{Kind: "reader"}, wantErr: "kind must be session, delegation or plan"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := listQuery(tc.f)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errcode.CodeOf(err) != errcode.InvalidInput {
					t.Fatalf("err = %v, want INVALID_INPUT %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("query = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestSessionEnvelopeStates(t *testing.T) {
	turn := &api.TurnResult{Turn: 1, State: api.StateCompleted, ChildRuns: 1,
		Result: api.RunPiResult{Output: "found it", OutputTotalChars: 8, OutputReturnedChars: 8, ToolCalls: 2, DurationMS: 1500}}
	started := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	c := &Client{UIURL: "http://127.0.0.1:8233", Now: func() time.Time { return started.Add(90 * time.Second) }}
	tests := []struct {
		name       string
		st         api.SessionStatus
		open       bool
		live       *liveSession
		wantStatus string
		wantDone   bool
		wantOutput string
		wantElapse int64
	}{
		{name: "first turn running, with a heartbeat", open: true,
			st:   api.SessionStatus{State: api.StateRunning, Turn: 1, Accepted: 1, TurnStarted: started, TimeoutSeconds: 600},
			live: &liveSession{progress: &api.Progress{ToolCalls: 3, LastText: "reading", ElapsedMS: 88000}}, wantStatus: "running", wantElapse: 90000},
		{name: "turn ended, session waits for input", open: true,
			st:         api.SessionStatus{State: api.StateWaitingForInput, Turn: 1, Accepted: 1, LastTurn: turn},
			wantStatus: "completed", wantDone: true, wantOutput: "found it", wantElapse: 1500},
		{name: "second turn running: the first turn's output is not this turn's", open: true,
			st:         api.SessionStatus{State: api.StateRunning, Turn: 2, Accepted: 2, LastTurn: turn, TurnStarted: started},
			wantStatus: "running", wantElapse: 90000},
		{name: "a send is queued behind a finished turn", open: true,
			st:         api.SessionStatus{State: api.StateWaitingForInput, Turn: 1, Accepted: 2, LastTurn: turn},
			wantStatus: "running", wantElapse: 0},
		{name: "closed session", open: false,
			st:         api.SessionStatus{State: api.StateCompleted, Turn: 1, Accepted: 1, LastTurn: turn},
			wantStatus: "completed", wantDone: true, wantOutput: "found it", wantElapse: 1500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.st.SessionID = "s-1"
			env := c.sessionEnvelope("status", tc.st, tc.live, tc.open, "memo-name")
			it := env.Items[0]
			if env.Status != tc.wantStatus || it.Status != tc.wantStatus || env.Done != tc.wantDone || it.Output != tc.wantOutput || it.ElapsedMS != tc.wantElapse {
				t.Fatalf("status %q done %v output %q elapsed %d", it.Status, env.Done, it.Output, it.ElapsedMS)
			}
			if env.ContractVersion != ContractVersion || env.TaskID != "s-1" || it.Name != "memo-name" || it.UIURL != "http://127.0.0.1:8233/namespaces/default/workflows/s-1" {
				t.Fatalf("envelope %+v", env)
			}
			if it.Provider != "default" || it.Model != "default" || it.Agent != "default" {
				t.Fatalf("model %q/%q agent %q", it.Provider, it.Model, it.Agent)
			}
		})
	}
}

func TestDelegationEnvelope(t *testing.T) {
	st := api.DelegationStatus{
		DelegationID: "delegation-1", State: api.StateRunning, TotalCount: 3, AcceptedCount: 2, RejectedCount: 1, BatchStatus: "partial",
		Tasks: []api.TaskResult{
			{Index: 0, Name: "a", SessionID: "s-a", Profile: "scout", Model: "scripted/scripted-1", State: api.StateCompleted,
				Turn: &api.TurnResult{Turn: 1, State: api.StateCompleted, Result: api.RunPiResult{Output: "A"}}},
			{Index: 1, Name: "b", SessionID: "s-b", Profile: "nope", State: api.StateFailed,
				Error: &errcode.Info{Code: errcode.UnknownAgent, Message: `Unknown profile: "nope". Available profiles: scout`}},
			{Index: 2, Name: "c", SessionID: "s-c", Profile: "scout", State: api.StateRunning},
		},
	}
	c := &Client{}
	env := c.delegationEnvelope("status", st, map[string]*liveSession{"s-c": {progress: &api.Progress{ToolCalls: 4}}})
	if env.TaskID != "" || len(env.Items) != 3 || env.BatchStatus != "partial" || env.Done {
		t.Fatalf("envelope %+v", env)
	}
	if a := env.Items[0]; a.Provider != "scripted" || a.Model != "scripted-1" || !a.Done || !a.OutputAvailable {
		t.Fatalf("item a %+v", a)
	}
	if b := env.Items[1]; b.Error.Code != errcode.UnknownAgent || !b.Done || b.Status != "failed" {
		t.Fatalf("item b %+v", b)
	}
	if c := env.Items[2]; c.Done || c.ToolCount != 4 {
		t.Fatalf("item c %+v", c)
	}
	if got := []string{env.Items[0].Status, env.Items[1].Status, env.Items[2].Status}; got[0] != "completed" || got[1] != "failed" || got[2] != "running" {
		t.Fatalf("item statuses %v", got)
	}
}

// FuzzStartRequest decodes arbitrary bytes as `start --input` does and
// checks them as Start does: never a panic, and every refusal carries a
// stable code.
func FuzzStartRequest(f *testing.F) {
	for _, seed := range []string{
		`{"tasks":[{"name":"a","prompt":"p","cwd":"/w"}]}`,
		`{"tasks":[{"prompt":"p","cwd":"/w","files":["a.go",{"path":"b.go","head":3}],"resume":"s-1"}],"profile":"scout","max_concurrency":16}`,
		`{"tasks":[]}`, `{"tasks":[{"prompt":"","cwd":"rel"}]}`, `{"tasks":[{"prompt":"x","cwd":"/a/../b","timeout":-1}]}`,
		`{"tasks":[{"prompt":"x","cwd":"/w","files":[{"path":"a","head":1,"tail":1}]}],"host":"a@b"}`,
		`{"tasks":"no"}`, `{"surprise":1}`, "\xff\xfe", `{"tasks":[{"prompt":"x","cwd":"/w","agent":"a","profile":"b"}]}`,
	} {
		f.Add([]byte(seed))
	}
	codes := map[errcode.Code]bool{}
	for _, c := range errcode.All() {
		codes[c] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req StartRequest
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if dec.Decode(&req) != nil {
			return
		}
		n := 0
		c := &Client{NewID: func() string { n++; return fmt.Sprintf("id-%d", n) }}
		in, err := c.delegationInput(req)
		if err != nil {
			if !codes[errcode.CodeOf(err)] {
				t.Fatalf("refusal without a stable code: %v", err)
			}
			return
		}
		if len(in.SessionIDs) != len(in.Tasks) || len(in.Tasks) == 0 || len(in.Tasks) > api.MaxTasks {
			t.Fatalf("accepted %d tasks with %d IDs", len(in.Tasks), len(in.SessionIDs))
		}
		for _, task := range in.Tasks {
			if strings.TrimSpace(task.Name) == "" || strings.TrimSpace(task.Prompt) == "" {
				t.Fatalf("accepted a task without a name or prompt: %+v", task)
			}
		}
	})
}

// TestEnvelopeKeepsZerosAndFalse: a delegation's --json envelope says
// `rejected_count: 0`, `accepted_count`, `total_count`, `done: false` and
// each item's `output_truncated: false` (the task contract), where an omitted field
// would read as unknown; an envelope of another kind has no counts.
func TestEnvelopeKeepsZerosAndFalse(t *testing.T) {
	c := &Client{}
	tests := []struct {
		name    string
		env     Envelope
		want    []string
		wantNot []string
	}{
		{
			name: "a one-task delegation just started",
			env: c.delegationEnvelope("start", api.DelegationStatus{DelegationID: "delegation-1", State: api.StateQueued,
				TotalCount: 1, AcceptedCount: 1, BatchStatus: "accepted",
				Tasks: []api.TaskResult{{Index: 0, SessionID: "s-a", Profile: "scout", State: api.StateQueued}}}, nil),
			want: []string{`"rejected_count":0`, `"accepted_count":1`, `"total_count":1`, `"done":false`, `"output_truncated":false`},
		},
		{
			name: "every task rejected",
			env: c.delegationEnvelope("start", api.DelegationStatus{DelegationID: "delegation-2", State: api.StateFailed, Done: true,
				TotalCount: 1, RejectedCount: 1, BatchStatus: "rejected"}, nil),
			want: []string{`"accepted_count":0`, `"rejected_count":1`, `"done":true`},
		},
		{
			name:    "a list",
			env:     Envelope{ContractVersion: ContractVersion, Op: "list", Runs: []ListItem{}},
			wantNot: []string{`"total_count"`, `"accepted_count"`, `"rejected_count"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.env)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("no %s in %s", w, b)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(string(b), w) {
					t.Errorf("%s in %s", w, b)
				}
			}
		})
	}
}

// TestStartRefusesWhatTemporalWouldNot: a request beyond Temporal's payload
// limit is INVALID_INPUT before anything starts, with what to do instead;
// one batch item's bad prompt is that item's error only.
func TestStartRefusesWhatTemporalWouldNot(t *testing.T) {
	c := &Client{}
	big := StartRequest{Tasks: []api.TaskSpec{{Name: "a", Prompt: strings.Repeat("x", 3<<20), Cwd: "/repo"}}}
	if _, err := c.delegationInput(big); !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "files[]") {
		t.Fatalf("a 3 MiB prompt: %v", err)
	}
	batch := StartRequest{Tasks: []api.TaskSpec{{Name: "a", Prompt: "go", Cwd: "/repo"}, {Name: "b", Prompt: " ", Cwd: "/repo"}}, MaxConcurrency: 2}
	in, err := c.delegationInput(batch)
	if err != nil || in.Tasks[0].Rejected != nil || in.Tasks[1].Rejected == nil || in.Tasks[1].Rejected.Code != errcode.InvalidInput {
		t.Fatalf("batch: %v %+v", err, in.Tasks)
	}
}

// TestJustMinted: only an ID this project's clients made a moment ago is
// waited for; an old, foreign or mistyped one is not found at once.
func TestJustMinted(t *testing.T) {
	now := time.Now()
	v7, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		id   string
		at   time.Time
		want bool
	}{
		{"made now", v7.String(), now, true},
		{"asked on a machine a minute behind", v7.String(), now.Add(-time.Minute), true},
		{"made ten minutes ago", v7.String(), now.Add(10 * time.Minute), false},
		{"a v4 ID", uuid.NewString(), now, false},
		{"a delegation ID", "delegation-" + v7.String(), now, false},
		{"a typo", "not-an-id", now, false},
	} {
		if got := justMinted(tc.id, tc.at); got != tc.want {
			t.Errorf("%s: justMinted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOneTaskSession(t *testing.T) {
	sid := uuid.NewString()
	tests := []struct{ id, want string }{
		{api.OneTaskDelegationID(sid), sid},
		{sid, ""},
		// A sticky session's own ID (client/sticky.go).
		{"delegation-notes-1", "notes-1"},
		{"delegation-../etc", ""},
		{"delegation-", ""},
		{"session-" + sid, ""},
	}
	for _, tc := range tests {
		if got := oneTaskSession(tc.id); got != tc.want {
			t.Errorf("oneTaskSession(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

// TestDelegationLinks: a delegation's UI link opens the workflow that holds
// it: its own, or a one-task delegation's session.
func TestDelegationLinks(t *testing.T) {
	c := &Client{UIURL: "http://ui", Namespace: "ns"}
	sid, other := uuid.NewString(), uuid.NewString()
	tests := []struct {
		name string
		st   api.DelegationStatus
		want string
	}{
		{"one task: its session", api.DelegationStatus{DelegationID: api.OneTaskDelegationID(sid), Tasks: []api.TaskResult{{SessionID: sid}}}, sid},
		{"several tasks: its own", api.DelegationStatus{DelegationID: "delegation-" + other, Tasks: []api.TaskResult{{SessionID: sid}, {SessionID: other}}}, "delegation-" + other},
		{"one task of a version 2 delegation: its own", api.DelegationStatus{DelegationID: "delegation-" + other, Tasks: []api.TaskResult{{SessionID: sid}}}, "delegation-" + other},
	}
	for _, tc := range tests {
		if got := c.delegationEnvelope("status", tc.st, nil).UIURL; got != "http://ui/namespaces/ns/workflows/"+tc.want {
			t.Errorf("%s: %s", tc.name, got)
		}
	}
}
