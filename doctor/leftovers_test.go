package doctor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/activities"
)

func TestCheckStaleLocks(t *testing.T) {
	tests := []struct {
		name     string
		lock     ServiceLock
		sessions []string
		status   Status
		has      string
		fix      string
	}{
		{"none", ServiceLock{}, nil, OK, "no lock file", ""},
		{"the service's, held", ServiceLock{Path: "/d/dev.lock", Exists: true, Held: true, Pid: 9}, nil, OK, "no lock file", ""},
		{"a stopped service's note", ServiceLock{Path: "/d/dev.lock", Exists: true, Text: "stopped pid=9 at=x"}, nil, OK, "no lock file", ""},
		{"a killed service's", ServiceLock{Path: "/d/dev.lock", Exists: true, Pid: 9}, nil, Warn, "/d/dev.lock names pid 9, which is gone", "remove /d/dev.lock"},
		{"a killed service's pid, reused", ServiceLock{Path: "/d/dev.lock", Exists: true, Pid: 9, PidAlive: true}, nil, Warn, "another process has that pid now", "do not `kill`"},
		{"sessions'", ServiceLock{}, []string{"/d/sessions/x/a.jsonl.lock", "/d/sessions/x/b.jsonl.lock"}, Warn, "2 session lock files of sessions that are gone or idle for 24h", "every hour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkStaleLocks(tt.lock, tt.sessions, nil, "/d")
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) || !strings.Contains(r.Fix, tt.fix) {
				t.Fatalf("%+v", r)
			}
		})
	}
}

// fakeGit answers the git commands checkStaleWorktrees runs.
type fakeGit struct {
	top, worktrees, branches string
	notRepo                  bool
}

func (g fakeGit) run(_ context.Context, dir string, args ...string) (string, error) {
	if g.notRepo {
		return "", errors.New("not a git repository")
	}
	switch args[0] {
	case "rev-parse":
		return g.top + "\n", nil
	case "worktree":
		return g.worktrees, nil
	case "for-each-ref":
		return g.branches, nil
	}
	return "", fmt.Errorf("unexpected git %v in %s", args, dir)
}

func TestCheckStaleWorktrees(t *testing.T) {
	now := time.Now()
	data := "/home/u/.pi/subagents"
	wt := filepath.Join(data, "worktrees")
	cfg := Config{Cwd: "/src/app/sub", DataDir: data, Now: now, StaleAfter: 24 * time.Hour}
	porcelain := "worktree /src/app\nHEAD abc\nbranch refs/heads/main\n\n" +
		"worktree " + wt + "/s1\nHEAD def\nbranch refs/heads/subagents/s1\n\n" +
		"worktree " + wt + "/s2\nHEAD 123\nbranch refs/heads/subagents/s2\nprunable gitdir file points to non-existent location\n"
	branches := fmt.Sprintf("subagents/old\t%d\nsubagents/new\t%d\n", now.Add(-48*time.Hour).Unix(), now.Add(-time.Hour).Unix())
	journals := map[string]bool{wt + "/s1.json": true}
	exists := func(p string) bool { return journals[p] }
	tests := []struct {
		name   string
		stale  []activities.StaleWorktree
		git    fakeGit
		status Status
		has    []string
		fix    []string
	}{
		{"clean", nil, fakeGit{top: "/src/app", worktrees: "worktree /src/app\nHEAD abc\nbranch refs/heads/main\n"}, OK, []string{"no worktree or session branch left behind"}, nil},
		{"not a repository", nil, fakeGit{notRepo: true}, OK, []string{"no worktree"}, nil},
		{"a dead run's journal", []activities.StaleWorktree{{Session: "s1", Journal: wt + "/s1.json"}}, fakeGit{notRepo: true}, Warn,
			[]string{"1 worktree of runs that died waits to be settled (" + wt + "/s1.json)"}, []string{"settles them", "subagents dev"}},
		{"a worktree with no journal", nil, fakeGit{top: "/src/app", worktrees: porcelain}, Warn,
			[]string{"1 worktree of the data dir is left in /src/app with no run to settle it (" + wt + "/s2)"}, []string{"worktree prune", "worktree remove --force"}},
		{"an old branch", nil, fakeGit{top: "/src/app", branches: branches}, Warn,
			[]string{"1 session branch in /src/app older than 24h, neither applied nor discarded (subagents/old)"}, []string{"subagents apply --discard old"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkStaleWorktrees(context.Background(), cfg, tt.stale, nil, tt.git.run, exists)
			if r.Name != CheckStaleWorktrees || r.Status != tt.status {
				t.Fatalf("%+v", r)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Verdict, h) {
					t.Errorf("verdict %q lacks %q", r.Verdict, h)
				}
			}
			for _, h := range tt.fix {
				if !strings.Contains(r.Fix, h) {
					t.Errorf("fix %q lacks %q", r.Fix, h)
				}
			}
		})
	}
}

func TestCheckUnacknowledged(t *testing.T) {
	now := time.Now()
	since := now.Add(-30 * time.Hour)
	fe := &fakeFrontend{waiting: []Waiting{{ID: "d1", Cwd: "/src/app", Since: since}}}
	r := checkUnacknowledged(context.Background(), fe, now, 24*time.Hour)
	if !fe.cutoff.Equal(now.Add(-24 * time.Hour)) {
		t.Fatalf("cutoff %v", fe.cutoff)
	}
	if r.Status != Warn || !strings.Contains(r.Verdict, "1 delegation has waited more than 24h for their pi session to take the results: d1 in /src/app since "+since.UTC().Format(time.RFC3339)) ||
		!strings.Contains(r.Fix, "/subagents-adopt") || !strings.Contains(r.Fix, "subagents ack d1") {
		t.Fatalf("%+v", r)
	}
	if r := checkUnacknowledged(context.Background(), &fakeFrontend{}, now, 24*time.Hour); r.Status != OK {
		t.Fatalf("%+v", r)
	}
}

func TestDurationText(t *testing.T) {
	for d, want := range map[time.Duration]string{24 * time.Hour: "24h", 90 * time.Minute: "1h30m", time.Second: "1s", 1500 * time.Millisecond: "1.5s", 30 * time.Minute: "30m"} {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%s) = %q, want %q", d, got, want)
		}
	}
}
