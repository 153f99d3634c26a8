package doctor

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
		Address: "127.0.0.1:7233", Namespace: "default", Local: true, TaskQueue: "subagents", GuessUIURL: "http://127.0.0.1:8233", Now: now,
	}}
	w.deps = Deps{
		FindPi: func(context.Context, worker.PiLookup) (worker.Pi, error) {
			return worker.Pi{Path: "/tree/.bin/pi", Version: PinnedPi, Source: "source tree"}, nil
		},
		NodeVersion: func(_ context.Context, prefix string) (string, string, error) {
			return prefix + "/node", "v22.23.3", nil
		},
		ServiceLock: func(d string) ServiceLock {
			return ServiceLock{Path: filepath.Join(d, "dev.lock"), Exists: true, Held: true, Pid: 42}
		},
		Answers: func(context.Context, string) error { return nil },
		AskSocket: func(context.Context, string) (SocketInfo, error) {
			return SocketInfo{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "subagents", PID: 42, Protocol: 2, UIURL: "http://127.0.0.1:8233"}, nil
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
			w.deps.Answers = func(context.Context, string) error { return ErrNoListener }
			w.deps.ReadKey = func(string) error { return fs.ErrNotExist }
		}, map[string]Status{CheckService: Fail, CheckSocket: Skip, CheckAPIKey: Skip, CheckNamespace: Skip, CheckSearchAttributes: Skip,
			CheckWorkers: Skip, CheckUI: Skip, CheckUnacknowledged: Skip}, 3, 0},
		// Issue 42: a frontend that takes connections and never answers:
		// the service check says so, and nothing that needs Temporal runs.
		{"a frontend that never answers", func(w *world) {
			w.deps.ServiceLock = func(string) ServiceLock { return ServiceLock{} }
			w.deps.Answers = func(ctx context.Context, _ string) error {
				if _, bounded := ctx.Deadline(); !bounded {
					return errors.New("asked with no bound")
				}
				return hang(ctx)
			}
			w.deps.ReadKey = func(string) error { return fs.ErrNotExist }
		}, map[string]Status{CheckService: Fail, CheckSocket: Skip, CheckAPIKey: Skip, CheckNamespace: Skip, CheckSearchAttributes: Skip,
			CheckWorkers: Skip, CheckUI: Skip, CheckUnacknowledged: Skip}, 3, 0},
		{"a remote Temporal", func(w *world) { w.cfg.Local, w.cfg.Address, w.cfg.GuessUIURL = false, "temporal.example:7233", "" },
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
		// One cause, one failure: no pi, so no Node to judge beside it.
		{"no pi", func(w *world) {
			w.deps.FindPi = func(context.Context, worker.PiLookup) (worker.Pi, error) {
				return worker.Pi{}, errors.New("pi not found: pass --pi PATH")
			}
			w.deps.NodeVersion = func(context.Context, string) (string, string, error) { return "/usr/bin/node", "v20.20.2", nil }
		}, map[string]Status{CheckPi: Fail, CheckNode: Skip}, 2, 1},
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

// TestRunAsksTheServiceForItsUI (issue 42): the UI check asks the UI
// where the running local service says it serves it, whatever its
// --ui-port; skips a service started --headless; asks the frontend's port
// + 1000 only of a service that does not say; and asks a UI given by flag
// where it was given.
func TestRunAsksTheServiceForItsUI(t *testing.T) {
	const other, guess = "http://127.0.0.1:9999", "http://127.0.0.1:8233"
	tests := []struct {
		name   string
		given  string
		says   SocketInfo
		asked  string
		status Status
		has    string
	}{
		{"another --ui-port", "", SocketInfo{UIURL: other}, other, OK, "the Temporal UI answers at " + other},
		{"headless", "", SocketInfo{Headless: true}, "", Skip, "runs without the Temporal UI (--headless)"},
		{"an older service", "", SocketInfo{}, guess, OK, "the frontend's port + 1000: the service does not say"},
		{"given", "http://ui.example", SocketInfo{UIURL: other}, "http://ui.example", OK, "answers at http://ui.example"},
		// Its socket does not answer: that one failure, no guess beside it.
		{"no answer", "", SocketInfo{PID: -1}, "", Skip, "its socket does not answer (see socket)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.cfg.UIURL = tt.given
			w.deps.AskSocket = func(context.Context, string) (SocketInfo, error) {
				if tt.says.PID == -1 {
					return SocketInfo{}, errors.New("connection refused")
				}
				info := tt.says
				info.Address, info.Namespace, info.TaskQueue, info.PID, info.Protocol = "127.0.0.1:7233", "default", "subagents", 42, 3
				return info, nil
			}
			var asked []string
			var mu sync.Mutex
			w.deps.HTTPGet = func(_ context.Context, url string) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, url)
				if url != tt.asked+"/healthz" {
					return 0, errors.New("connection refused")
				}
				return 200, nil
			}
			r := Run(context.Background(), w.cfg, w.deps)
			c := r.Checks[slices.Index(Checks, CheckUI)]
			if c.Status != tt.status || !strings.Contains(c.Verdict, tt.has) {
				t.Fatalf("ui: %+v (asked %v)", c, asked)
			}
			if tt.asked != "" && (len(asked) != 1 || r.Context.UIURL != tt.asked) {
				t.Fatalf("asked %v, the report names %q; want %s", asked, r.Context.UIURL, tt.asked)
			}
		})
	}
}

// hang blocks until ctx ends, as a thing that takes calls and never
// answers; forever ignores its context, as one that cannot be stopped,
// until the test ends.
func hang(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

type hungFrontend struct{ *fakeFrontend }

func (hungFrontend) DescribeNamespace(ctx context.Context, _ string) error { return hang(ctx) }

// TestRunDeadline: whatever hangs, the doctor answers by its deadline:
// what ran out says so, the rest report, in their order.
func TestRunDeadline(t *testing.T) {
	w := newWorld(t)
	forever := make(chan struct{})
	t.Cleanup(func() { close(forever) })
	w.deps.FindPi = func(context.Context, worker.PiLookup) (worker.Pi, error) {
		<-forever
		return worker.Pi{}, errors.New("never")
	}
	w.deps.Dial = func(context.Context) (Frontend, func(), error) { return hungFrontend{&fakeFrontend{}}, func() {}, nil }
	w.deps.Git = func(ctx context.Context, _ string, _ ...string) (string, error) { return "", hang(ctx) }
	w.cfg.Timeout = time.Second
	start := time.Now()
	r := Run(context.Background(), w.cfg, w.deps)
	// The deadline, the grace a check has to hand in what it found, and
	// room for a loaded machine.
	if took := time.Since(start); took > w.cfg.Timeout+lateGrace+2*time.Second {
		t.Fatalf("took %s with a deadline of %s", took, w.cfg.Timeout)
	}
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, Checks) {
		t.Fatalf("checks %v, want %v", names, Checks)
	}
	got := map[string]Result{}
	for _, c := range r.Checks {
		got[c.Name] = c
	}
	for name, want := range map[string]string{
		CheckPi:        "`pi --version` did not answer within the doctor's 1s (--timeout)",
		CheckNamespace: "Temporal did not answer within the doctor's 1s (--timeout)",
		// pi took its lane's time: Node, after it, had none left.
		CheckNode: "`node --version` was not checked: the doctor's 1s (--timeout) ran out before its turn",
	} {
		if c := got[name]; c.Status != Fail || c.Verdict != want || !strings.Contains(c.Fix, "--timeout") {
			t.Errorf("%s: %+v, want a failure %q", name, c, want)
		}
	}
	if c := got[CheckStaleWorktrees]; c.Status != Warn || c.Verdict != "git in the folder's repository did not answer within the doctor's 1s (--timeout)" {
		t.Errorf("stale_worktrees: %+v", c)
	}
	for _, name := range []string{CheckService, CheckSocket, CheckAPIKey, CheckProfiles, CheckPlans, CheckSettings, CheckModelKeys, CheckUI, CheckDisk, CheckStaleLocks} {
		if got[name].Status != OK {
			t.Errorf("%s: %+v, want ok: it did not hang", name, got[name])
		}
	}
	for _, name := range []string{CheckSearchAttributes, CheckWorkers, CheckUnacknowledged} {
		if got[name].Status != Skip {
			t.Errorf("%s: %+v, want a skip for want of the namespace", name, got[name])
		}
	}
	// Temporal that does not answer is unreachable, but pi's failure is not.
	if r.ExitCode != 2 {
		t.Fatalf("exit %d", r.ExitCode)
	}
}

// TestWithin: a check's own bound, and the doctor's deadline, each named
// in what the check says; a check that ended just in time keeps its word.
func TestWithin(t *testing.T) {
	l := lanes{ctx: context.Background(), timeout: time.Minute}
	_, got, late, why := within(l, 50*time.Millisecond, func(ctx context.Context) error { return hang(ctx) })
	if !late || !got || why != "did not answer within 50ms" {
		t.Fatalf("own bound: got %v late %v %q", got, late, why)
	}
	r := l.check(CheckUI, 50*time.Millisecond, func(ctx context.Context) Result {
		return fail(CheckUI, oneLine(hang(ctx).Error()), "x").with("url", "http://u")
	})
	if r.Status != Fail || r.Verdict != "the Temporal UI did not answer within 50ms" || r.Details["url"] != "http://u" || r.Details["said"] != "context deadline exceeded" {
		t.Fatalf("%+v", r)
	}
	r = l.check(CheckDisk, 0, func(context.Context) Result { return ok(CheckDisk, "room") })
	if r.Status != OK || r.Verdict != "room" {
		t.Fatalf("%+v", r)
	}
	// A check that passes over the error of what it was cut short in (git
	// in a folder that is no repository says nothing either) and returns
	// all well: it ran out, and says so.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r = lanes{ctx: ctx, timeout: 50 * time.Millisecond}.check(CheckStaleWorktrees, time.Minute, func(ctx context.Context) Result {
		_ = hang(ctx)
		return ok(CheckStaleWorktrees, "nothing left behind")
	})
	if r.Status != Warn || r.Verdict != "git in the folder's repository did not answer within the doctor's 50ms (--timeout)" {
		t.Fatalf("a check that passed over its cut: %+v", r)
	}
}

// TestRunJudgesTheServicesPi: with a service running, the pi its children
// run on is judged, read from its process; --pi judges the one it names;
// a service whose process cannot be read leaves the doctor's own, said so.
func TestRunJudgesTheServicesPi(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flag  string
		known bool
		want  string
		has   string
	}{
		{"the service's", "", true, "/svc/pi", "the running service's (pid 42"},
		{"--pi", "/mine/pi", true, "/mine/pi", "(--pi)"},
		{"not readable", "", false, "", "the running service (pid 42) found its own at its start"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.cfg.Pi = tt.flag
			w.deps.PiLookup = func(flag string) worker.PiLookup { return worker.PiLookup{Flag: flag} }
			w.deps.ServicePiLookup = func(pid int) (worker.PiLookup, bool) {
				if pid != 42 {
					t.Errorf("pid %d", pid)
				}
				return worker.PiLookup{Flag: "/svc/pi"}, tt.known
			}
			w.deps.FindPi = func(_ context.Context, l worker.PiLookup) (worker.Pi, error) {
				source := "$SUBAGENTS_PI"
				if l.Flag == "" {
					return worker.Pi{Path: "/tree/pi", Version: PinnedPi, Source: "source tree"}, nil
				}
				if l.Flag == "/mine/pi" {
					source = "--pi"
				}
				return worker.Pi{Path: l.Flag, Version: PinnedPi, Source: source}, nil
			}
			r := Run(context.Background(), w.cfg, w.deps)
			c := r.Checks[slices.Index(Checks, CheckPi)]
			if want := cmp.Or(tt.want, "/tree/pi"); c.Status != OK || c.Details["path"] != want || !strings.Contains(c.Verdict, tt.has) {
				t.Fatalf("%+v, want %s with %q", c, want, tt.has)
			}
		})
	}
}
