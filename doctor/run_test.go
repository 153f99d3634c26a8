package doctor

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/worker"
)

// world is a machine for Run: a folder and pi config dir that hold
// nothing wrong, and deps that answer as a healthy local service does;
// each test breaks one thing.
type world struct {
	cfg  Config
	deps Deps
	// dialed counts the connections to Temporal.
	dialed int
}

func newWorld(t *testing.T) *world {
	root := t.TempDir()
	write(t, root, map[string]string{
		"agent/models.json":   `{"providers": {"scripted": {"apiKey": "k"}}}`,
		"agent/settings.json": `{"defaultProvider": "scripted"}`,
		"work/README":         "x",
	})
	now := time.Now()
	live := []Poller{{Identity: "1@vm", LastAccess: now}}
	fe := &fakeFrontend{attrs: api.SearchAttributes(), pollers: map[string][]Poller{"subagents workflow": live, "subagents activity": live}}
	w := &world{cfg: Config{
		Cwd: filepath.Join(root, "work"), DataDir: filepath.Join(root, "data"), AgentDir: filepath.Join(root, "agent"),
		Address: "127.0.0.1:7233", Namespace: "default", Local: true, TaskQueue: "subagents", UIURL: "http://127.0.0.1:8233", Now: now,
	}}
	w.deps = Deps{
		FindPi: func(context.Context) (worker.Pi, error) {
			return worker.Pi{Path: "/tree/.bin/pi", Version: PinnedPi, Source: "source tree"}, nil
		},
		NodeVersion: func(_ context.Context, prefix string) (string, string, error) {
			return prefix + "/node", "v22.23.3", nil
		},
		ServiceLock: func(d string) ServiceLock {
			return ServiceLock{Path: filepath.Join(d, "dev.lock"), Exists: true, Held: true, Pid: 42}
		},
		Answers: func(string) bool { return true },
		AskSocket: func(context.Context, string) (SocketInfo, error) {
			return SocketInfo{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "subagents", PID: 42, Protocol: 2}, nil
		},
		ReadKey: func(string) error { return nil },
		Dial: func(context.Context) (Frontend, func(), error) {
			w.dialed++
			return fe, func() {}, nil
		},
		HTTPGet:   func(context.Context, string) (int, error) { return 200, nil },
		FreeSpace: func(string) (uint64, error) { return 64 << 30, nil },
		Git: func(context.Context, string, ...string) (string, error) {
			return "", errors.New("not a git repository")
		},
		StaleWorktrees:    func(string) ([]activities.StaleWorktree, error) { return nil, nil },
		StaleSessionLocks: func(string, time.Time) ([]string, error) { return nil, nil },
	}
	return w
}

// statuses are a report's statuses by check.
func statuses(r Report) map[string]Status {
	out := map[string]Status{}
	for _, c := range r.Checks {
		out[c.Name] = c.Status
	}
	return out
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		breaks func(w *world)
		want   map[string]Status
		exit   int
		dials  int
	}{
		{"healthy", func(*world) {}, nil, 0, 1},
		{"the service down", func(w *world) {
			w.deps.ServiceLock = func(string) ServiceLock { return ServiceLock{} }
			w.deps.Answers = func(string) bool { return false }
			w.deps.ReadKey = func(string) error { return fs.ErrNotExist }
		}, map[string]Status{CheckService: Fail, CheckSocket: Skip, CheckAPIKey: Skip, CheckNamespace: Skip, CheckSearchAttributes: Skip,
			CheckWorkers: Skip, CheckUI: Skip, CheckUnacknowledged: Skip}, 3, 0},
		{"a remote Temporal", func(w *world) { w.cfg.Local, w.cfg.Address, w.cfg.UIURL = false, "temporal.example:7233", "" },
			map[string]Status{CheckService: Skip, CheckSocket: Skip, CheckAPIKey: Skip, CheckUI: Skip}, 0, 1},
		{"the key open to others", func(w *world) { w.deps.ReadKey = func(string) error { return errors.New("mode 0644") } },
			map[string]Status{CheckAPIKey: Fail, CheckNamespace: Skip, CheckSearchAttributes: Skip, CheckWorkers: Skip, CheckUnacknowledged: Skip}, 2, 0},
		{"Temporal unreachable", func(w *world) {
			w.deps.ServiceLock = func(string) ServiceLock { return ServiceLock{} }
			w.deps.ReadKey = func(string) error { return fs.ErrNotExist }
			w.deps.Dial = func(context.Context) (Frontend, func(), error) {
				w.dialed++
				return nil, nil, errors.New("connection refused")
			}
		}, map[string]Status{CheckSocket: Skip, CheckNamespace: Fail, CheckSearchAttributes: Skip, CheckWorkers: Skip, CheckUnacknowledged: Skip}, 3, 1},
		{"no worker", func(w *world) {
			fe := &fakeFrontend{attrs: api.SearchAttributes()}
			w.deps.Dial = func(context.Context) (Frontend, func(), error) { w.dialed++; return fe, func() {}, nil }
		}, map[string]Status{CheckWorkers: Fail}, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			tt.breaks(w)
			r := Run(context.Background(), w.cfg, w.deps)
			var names []string
			for _, c := range r.Checks {
				names = append(names, c.Name)
				if c.Verdict == "" || (c.Status == Fail || c.Status == Warn) && c.Fix == "" {
					t.Errorf("%s: verdict %q fix %q", c.Name, c.Verdict, c.Fix)
				}
			}
			if !slices.Equal(names, Checks) {
				t.Fatalf("checks %v, want %v", names, Checks)
			}
			got := statuses(r)
			for _, name := range Checks {
				want, broken := tt.want[name]
				if !broken {
					want = OK
				}
				if got[name] != want {
					t.Errorf("%s: %s, want %s (%s)", name, got[name], want, r.Checks[slices.Index(names, name)].Verdict)
				}
			}
			if r.ExitCode != tt.exit || w.dialed != tt.dials {
				t.Fatalf("exit %d after %d dials, want %d after %d", r.ExitCode, w.dialed, tt.exit, tt.dials)
			}
		})
	}
}
