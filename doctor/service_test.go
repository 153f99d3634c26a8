package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

func TestCheckService(t *testing.T) {
	nothing := fmt.Errorf("%w (connection refused)", ErrNoListener)
	tests := []struct {
		name     string
		lock     ServiceLock
		answered error
		status   Status
		state    serviceState
		has, fix string
	}{
		{"runs", ServiceLock{Path: "/d/dev.lock", Exists: true, Held: true, Pid: 42}, nil, OK, serviceRuns, "subagents dev runs for data dir /d (pid 42)", ""},
		{"another Temporal", ServiceLock{}, nil, OK, serviceOther, "a Temporal answers at 127.0.0.1:7233", ""},
		{"nothing", ServiceLock{}, nothing, Fail, serviceDown, "no subagents service runs for data dir /d", "subagents dev"},
		{"killed", ServiceLock{Path: "/d/dev.lock", Exists: true, Pid: 42}, nothing, Fail, serviceDown, "nothing answers", "subagents dev"},
		// Issue 42: a port that takes connections and never answers is no
		// Temporal.
		{"hung", ServiceLock{}, errors.New("it did not answer within 2s"), Fail, serviceHung,
			"no subagents dev runs for data dir /d, and something takes connections at 127.0.0.1:7233 but does not answer as Temporal: it did not answer within 2s",
			"`ss -ltnp 'sport = :7233'`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, state := checkService(tt.lock, tt.answered, "127.0.0.1:7233", "/d")
			if r.Status != tt.status || state != tt.state || !strings.Contains(r.Verdict, tt.has) {
				t.Fatalf("%+v state %d", r, state)
			}
			if r.Status == Fail && (!strings.Contains(r.Fix, tt.fix) || !strings.Contains(r.Fix, "subagents dev") || !r.unavailable) {
				t.Fatalf("%+v", r)
			}
		})
	}
}

func TestCheckSocket(t *testing.T) {
	want := SocketInfo{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "subagents"}
	tests := []struct {
		name   string
		info   SocketInfo
		err    error
		status Status
		has    string
	}{
		{"answers", SocketInfo{Address: "localhost:7233", Namespace: "default", TaskQueue: "subagents", PID: 7, Protocol: 2}, nil, OK, "answers on /d/subagents.sock"},
		{"silent", SocketInfo{}, errors.New("connection refused"), Fail, "nothing answers on its socket /d/subagents.sock: connection refused"},
		{"another queue", SocketInfo{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "other", Protocol: 2}, nil, Warn, "task queue other, not subagents"},
		{"another port and namespace", SocketInfo{Address: "127.0.0.1:7234", Namespace: "ns", TaskQueue: "subagents", Protocol: 2}, nil, Warn,
			"address 127.0.0.1:7234, not 127.0.0.1:7233 and namespace ns, not default"},
		{"an old service", SocketInfo{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "subagents", Protocol: 1}, nil, Warn, "protocol 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkSocket(context.Background(), func(_ context.Context, path string) (SocketInfo, error) {
				if path != "/d/subagents.sock" {
					t.Fatalf("asked %s", path)
				}
				return tt.info, tt.err
			}, "/d/subagents.sock", want)
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) {
				t.Fatalf("%+v", r)
			}
			if r.Status != OK && !strings.Contains(r.Fix, "subagents") {
				t.Fatalf("fix %q", r.Fix)
			}
		})
	}
}

func TestCheckAPIKey(t *testing.T) {
	denied := errcode.New(errcode.PermissionDenied, "the API key /d/frontend.key may be read or written by other users (mode 0644): refusing to use it")
	tests := []struct {
		name   string
		err    error
		mode   keyMode
		status Status
		has    string
		fix    string
	}{
		{"readable", nil, keyNeeded, OK, "/d/frontend.key is readable", ""},
		{"missing while the service runs", fs.ErrNotExist, keyNeeded, Fail, "its API key /d/frontend.key is missing", "subagents stop"},
		{"missing, another Temporal", fs.ErrNotExist, keyOptional, OK, "needs none", ""},
		{"missing, nothing runs", fs.ErrNotExist, keyLater, Skip, "first start", ""},
		{"open to others", denied, keyNeeded, Fail, "mode 0644", "chmod 600 /d/frontend.key"},
		{"unreadable", errors.New("input/output error"), keyNeeded, Fail, "cannot be read", "chmod 600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkAPIKey(func(string) error { return tt.err }, "/d", tt.mode)
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) || !strings.Contains(r.Fix, tt.fix) {
				t.Fatalf("%+v", r)
			}
		})
	}
}
