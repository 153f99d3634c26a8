package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// change commits, on a branch from the repository's HEAD, what edit does
// to a worktree, and returns the base and the tip.
func change(t *testing.T, top string, edit func(wt string)) (base, tip string) {
	t.Helper()
	ctx := context.Background()
	base = git(t, top, "rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "wt")
	if err := AddWorktree(ctx, top, wt, "task", base); err != nil {
		t.Fatal(err)
	}
	edit(wt)
	if _, err := Capture(ctx, wt, "task", "task", base, "s", Identity{Name: "t", Email: "t@t"}); err != nil {
		t.Fatal(err)
	}
	tip = git(t, wt, "rev-parse", "HEAD")
	if err := RemoveWorktree(ctx, top, wt); err != nil {
		t.Fatal(err)
	}
	return base, tip
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

func TestApplyChange(t *testing.T) {
	start := map[string]string{
		"a.txt":    "one\ntwo\nthree\nfour\nfive\n",
		"gone.txt": "bye\n",
		"keep.bin": "\x00\x01bin",
	}
	tests := []struct {
		name string
		// task is what the child did in its worktree; here what the user
		// did to the checkout meanwhile.
		task, here    func(t *testing.T, dir string)
		wantApplied   []string
		wantConflicts []string
		// want are files of the checkout after the apply.
		want map[string]string
	}{
		{
			name: "clean checkout takes the change",
			task: func(t *testing.T, wt string) {
				writeFiles(t, wt, map[string]string{"a.txt": "one\ntwo\nTHREE\nfour\nfive\n", "new/n.txt": "new\n"})
				_ = os.Remove(filepath.Join(wt, "gone.txt"))
			},
			here:        func(*testing.T, string) {},
			wantApplied: []string{"a.txt", "gone.txt", "new/n.txt"},
			want:        map[string]string{"a.txt": "one\ntwo\nTHREE\nfour\nfive\n", "new/n.txt": "new\n", "gone.txt": "<missing>"},
		},
		{
			name: "edits elsewhere in the file merge",
			task: func(t *testing.T, wt string) {
				writeFiles(t, wt, map[string]string{"a.txt": "one\ntwo\nthree\nfour\nFIVE\n"})
			},
			here: func(t *testing.T, top string) {
				writeFiles(t, top, map[string]string{"a.txt": "ONE\ntwo\nthree\nfour\nfive\n"})
			},
			wantApplied: []string{"a.txt"},
			want:        map[string]string{"a.txt": "ONE\ntwo\nthree\nfour\nFIVE\n"},
		},
		{
			name: "the same lines changed both ways conflict, and nothing is written",
			task: func(t *testing.T, wt string) {
				writeFiles(t, wt, map[string]string{"a.txt": "one\ntwo\ntask\nfour\nfive\n", "other.txt": "other\n"})
			},
			here: func(t *testing.T, top string) {
				writeFiles(t, top, map[string]string{"a.txt": "one\ntwo\nmine\nfour\nfive\n"})
			},
			wantConflicts: []string{"a.txt"},
			want:          map[string]string{"a.txt": "one\ntwo\nmine\nfour\nfive\n", "other.txt": "<missing>"},
		},
		{
			name: "a change applied already is left as it is",
			task: func(t *testing.T, wt string) {
				writeFiles(t, wt, map[string]string{"a.txt": "done\n", "n.txt": "n\n"})
			},
			here: func(t *testing.T, top string) {
				writeFiles(t, top, map[string]string{"a.txt": "done\n", "n.txt": "n\n"})
			},
			want: map[string]string{"a.txt": "done\n", "n.txt": "n\n"},
		},
		{
			name: "an added file that exists here differently conflicts",
			task: func(t *testing.T, wt string) { writeFiles(t, wt, map[string]string{"n.txt": "task\n"}) },
			here: func(t *testing.T, top string) { writeFiles(t, top, map[string]string{"n.txt": "mine\n"}) },

			wantConflicts: []string{"n.txt"},
			want:          map[string]string{"n.txt": "mine\n"},
		},
		{
			name: "a deleted file changed here conflicts",
			task: func(t *testing.T, wt string) { _ = os.Remove(filepath.Join(wt, "gone.txt")) },
			here: func(t *testing.T, top string) { writeFiles(t, top, map[string]string{"gone.txt": "still here\n"}) },

			wantConflicts: []string{"gone.txt"},
			want:          map[string]string{"gone.txt": "still here\n"},
		},
		{
			name: "a changed file deleted here conflicts",
			task: func(t *testing.T, wt string) { writeFiles(t, wt, map[string]string{"gone.txt": "changed\n"}) },
			here: func(t *testing.T, top string) { _ = os.Remove(filepath.Join(top, "gone.txt")) },

			wantConflicts: []string{"gone.txt"},
			want:          map[string]string{"gone.txt": "<missing>"},
		},
		{
			name: "a binary file changed on both sides conflicts",
			task: func(t *testing.T, wt string) { writeFiles(t, wt, map[string]string{"keep.bin": "\x00task"}) },
			here: func(t *testing.T, top string) { writeFiles(t, top, map[string]string{"keep.bin": "\x00mine"}) },

			wantConflicts: []string{"keep.bin"},
			want:          map[string]string{"keep.bin": "\x00mine"},
		},
		{
			name:        "a binary file unchanged here takes the task's",
			task:        func(t *testing.T, wt string) { writeFiles(t, wt, map[string]string{"keep.bin": "\x00task"}) },
			here:        func(*testing.T, string) {},
			wantApplied: []string{"keep.bin"},
			want:        map[string]string{"keep.bin": "\x00task"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := newRepo(t, start)
			base, tip := change(t, top, func(wt string) { tt.task(t, wt) })
			tt.here(t, top)
			res, err := ApplyChange(context.Background(), top, base, tip)
			applied, conflicts := res.Files, res.Conflicts
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, c := range conflicts {
				paths = append(paths, c.Path)
				if c.Why == "" {
					t.Errorf("conflict %s says no why", c.Path)
				}
			}
			if !slices.Equal(paths, tt.wantConflicts) || !slices.Equal(applied, tt.wantApplied) {
				t.Fatalf("applied %q conflicts %+v; want applied %q conflicts %q", applied, conflicts, tt.wantApplied, tt.wantConflicts)
			}
			for name, want := range tt.want {
				if got := read(t, filepath.Join(top, name)); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestApplyChangeModes: an executable bit and a link the task made arrive
// as such.
func TestApplyChangeModes(t *testing.T) {
	top := newRepo(t, map[string]string{"run.sh": "echo hi\n"})
	base, tip := change(t, top, func(wt string) {
		if err := os.Chmod(filepath.Join(wt, "run.sh"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("run.sh", filepath.Join(wt, "link")); err != nil {
			t.Fatal(err)
		}
	})
	res, err := ApplyChange(context.Background(), top, base, tip)
	applied, conflicts := res.Files, res.Conflicts
	if err != nil || len(conflicts) > 0 || !slices.Equal(applied, []string{"link", "run.sh"}) {
		t.Fatalf("applied %q conflicts %+v err %v", applied, conflicts, err)
	}
	if info, err := os.Stat(filepath.Join(top, "run.sh")); err != nil || info.Mode().Perm()&0o100 == 0 {
		t.Fatalf("run.sh mode: %v %v", info.Mode(), err)
	}
	if target, err := os.Readlink(filepath.Join(top, "link")); err != nil || target != "run.sh" {
		t.Fatalf("link -> %q, %v", target, err)
	}
}

// TestApplyChangeBeyondALink: a file the change writes under a folder that
// is a link in the checkout (to somewhere outside it) is a conflict, and
// nothing is written there.
func TestApplyChangeBeyondALink(t *testing.T) {
	top := newRepo(t, map[string]string{"d/a.txt": "a\n"})
	base, tip := change(t, top, func(wt string) { writeFiles(t, wt, map[string]string{"d/a.txt": "changed\n"}) })
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"a.txt": "a\n"})
	if err := os.RemoveAll(filepath.Join(top, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(top, "d")); err != nil {
		t.Fatal(err)
	}
	res, err := ApplyChange(context.Background(), top, base, tip)
	conflicts := res.Conflicts
	if err != nil || len(conflicts) != 1 || conflicts[0].Path != "d/a.txt" {
		t.Fatalf("conflicts %+v, %v", conflicts, err)
	}
	if got := read(t, filepath.Join(outside, "a.txt")); got != "a\n" {
		t.Fatalf("the file outside the checkout was written: %q", got)
	}
}

// TestApplyChangePutsBackOnAFailedWrite: a write that fails after others
// succeeded (a full disk, a permission) leaves the checkout as it was:
// nothing half-applied. A file where the change needs a folder is a
// conflict found before anything is written.
func TestApplyChangePutsBackOnAFailedWrite(t *testing.T) {
	top := newRepo(t, map[string]string{"a.txt": "old\n"})
	base, tip := change(t, top, func(wt string) {
		writeFiles(t, wt, map[string]string{"a.txt": "new\n", "b/new.txt": "added\n"})
	})
	defer func(w func(string, fileOp) error) { writeOp = w }(writeOp)
	writeOp = func(top string, op fileOp) error {
		if op.path == "b/new.txt" {
			return errors.New("no space left on device")
		}
		return write(top, op)
	}
	res, err := ApplyChange(context.Background(), top, base, tip)
	applied, conflicts := res.Files, res.Conflicts
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("applied %q (conflicts %+v, err %v) with a failing write", applied, conflicts, err)
	}
	if got := read(t, filepath.Join(top, "a.txt")); got != "old\n" {
		t.Fatalf("a.txt is %q after a failed apply: half-applied", got)
	}
	writeOp = write

	// The user made a file named b meanwhile (untracked).
	writeFiles(t, top, map[string]string{"b": "in the way\n"})
	res, err = ApplyChange(context.Background(), top, base, tip)
	applied, conflicts = res.Files, res.Conflicts
	if err != nil || len(applied) > 0 || len(conflicts) != 1 || conflicts[0].Path != "b/new.txt" {
		t.Fatalf("applied %q conflicts %+v err %v with a file where a folder must be", applied, conflicts, err)
	}
	if got := read(t, filepath.Join(top, "a.txt")); got != "old\n" {
		t.Fatalf("a.txt is %q after a conflict", got)
	}
	if got := read(t, filepath.Join(top, "b")); got != "in the way\n" {
		t.Fatalf("b is %q", got)
	}
}

// TestApplyChangeFileAndFolderSwap: a task that turned a folder into a file
// of its name, and a file into a folder, applies to a checkout that still
// has them as they were; a folder that holds a file the task did not delete
// (the user's own) is a conflict, and nothing is written.
func TestApplyChangeFileAndFolderSwap(t *testing.T) {
	swap := func(t *testing.T, wt string) {
		for _, p := range []string{"dir", "file"} {
			if err := os.RemoveAll(filepath.Join(wt, p)); err != nil {
				t.Fatal(err)
			}
		}
		writeFiles(t, wt, map[string]string{"dir": "now a file\n", "file/inside.txt": "now a folder\n"})
	}
	start := map[string]string{"dir/a.txt": "a\n", "dir/sub/b.txt": "b\n", "file": "a file\n"}

	top := newRepo(t, start)
	base, tip := change(t, top, func(wt string) { swap(t, wt) })
	res, err := ApplyChange(context.Background(), top, base, tip)
	applied, conflicts := res.Files, res.Conflicts
	if err != nil || len(conflicts) > 0 {
		t.Fatalf("applied %q conflicts %+v err %v", applied, conflicts, err)
	}
	if read(t, filepath.Join(top, "dir")) != "now a file\n" || read(t, filepath.Join(top, "file", "inside.txt")) != "now a folder\n" {
		t.Fatalf("after the apply: dir %q, file/inside.txt %q", read(t, filepath.Join(top, "dir")), read(t, filepath.Join(top, "file", "inside.txt")))
	}

	top = newRepo(t, start)
	base, tip = change(t, top, func(wt string) { swap(t, wt) })
	writeFiles(t, top, map[string]string{"dir/mine.txt": "the user's\n"})
	res, err = ApplyChange(context.Background(), top, base, tip)
	applied, conflicts = res.Files, res.Conflicts
	if err != nil || len(applied) > 0 || len(conflicts) != 1 || conflicts[0].Path != "dir" {
		t.Fatalf("applied %q conflicts %+v err %v", applied, conflicts, err)
	}
	if read(t, filepath.Join(top, "dir", "a.txt")) != "a\n" || read(t, filepath.Join(top, "file")) != "a file\n" {
		t.Fatal("a conflicting apply changed the checkout")
	}
}
