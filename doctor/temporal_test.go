package doctor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// fakeFrontend answers as a test sets it up.
type fakeFrontend struct {
	nsErr    error
	attrs    map[string]enumspb.IndexedValueType
	attrsErr error
	// pollers by queue and kind ("q workflow").
	pollers map[string][]Poller
	waiting []Waiting
	cutoff  time.Time
}

func (f *fakeFrontend) DescribeNamespace(context.Context, string) error { return f.nsErr }

func (f *fakeFrontend) SearchAttributes(context.Context, string) (map[string]enumspb.IndexedValueType, error) {
	return f.attrs, f.attrsErr
}

func (f *fakeFrontend) Pollers(_ context.Context, queue string, kind enumspb.TaskQueueType) ([]Poller, error) {
	return f.pollers[queue+" "+kindWord(kind)], nil
}

func (f *fakeFrontend) Waiting(_ context.Context, cutoff time.Time) ([]Waiting, error) {
	f.cutoff = cutoff
	return f.waiting, nil
}

func TestCheckNamespace(t *testing.T) {
	local := Config{Address: "127.0.0.1:7233", Namespace: "default", Local: true, DataDir: "/d"}
	remote := Config{Address: "temporal.example:7233", Namespace: "team"}
	tests := []struct {
		name    string
		cfg     Config
		dialErr error
		nsErr   error
		status  Status
		has     string
		fix     string
	}{
		{"there", local, nil, nil, OK, "namespace default on 127.0.0.1:7233", ""},
		{"missing", remote, nil, serviceerror.NewNamespaceNotFound("team"), Fail, `namespace "team" does not exist`, "subagents setup --namespace team"},
		{"missing locally", local, nil, serviceerror.NewNamespaceNotFound("default"), Fail, "does not exist", "subagents dev --namespace default"},
		{"refused, local", local, nil, serviceerror.NewPermissionDenied("bad key", ""), Fail, "refused this caller", "not the running service's"},
		{"refused, remote", remote, nil, serviceerror.NewPermissionDenied("bad key", ""), Fail, "refused this caller", "TEMPORAL_API_KEY"},
		{"stranger on the port", local, errcode.New(errcode.PermissionDenied, "belongs to user 1000"), nil, Fail, "belongs to user 1000", "restart"},
		{"unreachable", remote, errors.New("connection refused; start one with `make run`"), nil, Fail, "cannot reach Temporal at temporal.example:7233: connection refused", "TEMPORAL_ADDRESS"},
		// Issue 42: the dial's own error says "cannot reach Temporal at"
		// too; the verdict says it once.
		{"unreachable, as the dial says it", local, connection.Unavailable("127.0.0.1:7233", errors.New("failed reaching server: context deadline exceeded")), nil, Fail,
			"cannot reach Temporal at 127.0.0.1:7233: failed reaching server: context deadline exceeded", "subagents dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fe Frontend
			if tt.dialErr == nil {
				fe = &fakeFrontend{nsErr: tt.nsErr}
			}
			r := checkNamespace(context.Background(), fe, tt.dialErr, tt.cfg)
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) || !strings.Contains(r.Fix, tt.fix) {
				t.Fatalf("%+v", r)
			}
			if strings.Contains(r.Verdict, "make run") {
				t.Fatalf("the verdict carries the dial's own hint: %q", r.Verdict)
			}
			if n := strings.Count(r.Verdict, "cannot reach Temporal"); n > 1 {
				t.Fatalf("the verdict says it %d times: %q", n, r.Verdict)
			}
		})
	}
}

func TestCheckSearchAttributes(t *testing.T) {
	all := api.SearchAttributes()
	some := map[string]enumspb.IndexedValueType{}
	wrong := map[string]enumspb.IndexedValueType{}
	for k, v := range all {
		wrong[k] = v
		if k != "SubagentDelegation" {
			some[k] = v
		}
	}
	wrong["SubagentCwd"] = enumspb.INDEXED_VALUE_TYPE_TEXT
	tests := []struct {
		name   string
		attrs  map[string]enumspb.IndexedValueType
		err    error
		status Status
		has    string
	}{
		{"all", all, nil, OK, "has the 6 search attributes"},
		{"one missing", some, nil, Fail, "lacks the search attributes SubagentDelegation"},
		{"one a text", wrong, nil, Fail, "SubagentCwd is Text"},
		{"refused", nil, errors.New("permission denied"), Fail, "cannot list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkSearchAttributes(context.Background(), &fakeFrontend{attrs: tt.attrs, attrsErr: tt.err}, "default")
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) {
				t.Fatalf("%+v", r)
			}
			if r.Status == Fail && tt.err == nil && !strings.Contains(r.Fix, "subagents setup --namespace default") {
				t.Fatalf("fix %q", r.Fix)
			}
		})
	}
}

func TestCheckWorkers(t *testing.T) {
	now := time.Now()
	live := []Poller{{Identity: "1@vm", LastAccess: now.Add(-10 * time.Second)}}
	gone := []Poller{{Identity: "1@vm", LastAccess: now.Add(-4 * time.Minute)}}
	both := map[string][]Poller{"subagents workflow": live, "subagents activity": live}
	tests := []struct {
		name    string
		cfg     Config
		pollers map[string][]Poller
		status  Status
		has     string
		fix     string
	}{
		{"base polled", Config{TaskQueue: "subagents", Local: true}, both, OK, "subagents: 1 for workflow tasks, 1 for activity tasks", ""},
		{"nobody", Config{TaskQueue: "subagents", Local: true}, nil, Fail, "no worker polls subagents (workflow tasks) and subagents (activity tasks)", "subagents dev --task-queue subagents"},
		{"a worker that stopped", Config{TaskQueue: "subagents"}, map[string][]Poller{"subagents workflow": gone, "subagents activity": gone}, Fail, "no worker polls", "subagents worker --task-queue subagents"},
		{"host polled", Config{TaskQueue: "subagents", Host: "vm"}, map[string][]Poller{"subagents workflow": live, "subagents activity": live, "subagents@vm activity": live}, OK, "subagents@vm: 1 for activity tasks", ""},
		{"host not polled", Config{TaskQueue: "subagents", Host: "elsewhere"}, both, Fail, "no worker polls subagents@elsewhere (activity tasks)", "unset SUBAGENTS_HOST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkWorkers(context.Background(), &fakeFrontend{pollers: tt.pollers}, folderQueues(tt.cfg), now)
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) || !strings.Contains(r.Fix, tt.fix) {
				t.Fatalf("%+v", r)
			}
		})
	}
}
