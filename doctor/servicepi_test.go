package doctor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestServicePiLookup: the lookup of a service rebuilt from what /proc
// says of its process: its --pi, its SUBAGENTS_PI, the tree around its
// binary (one replaced since it started too), its folder, its PATH.
func TestServicePiLookup(t *testing.T) {
	root := t.TempDir()
	proc := filepath.Join(root, "proc", "42")
	tree := filepath.Join(root, "src")
	bin := filepath.Join(root, "pathbin")
	for _, d := range []string{proc, filepath.Join(tree, "bin"), bin, filepath.Join(root, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "pi"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(proc, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cmdline", "/src/bin/subagents-dev\x00dev\x00--port\x007300\x00--pi=/flag/pi\x00")
	write("environ", "HOME=/h\x00SUBAGENTS_PI=/old/pi\x00PATH=/nowhere:"+bin+"\x00SUBAGENTS_PI=/env/pi\x00")
	if err := os.Symlink(filepath.Join(tree, "bin", "subagents")+" (deleted)", filepath.Join(proc, "exe")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "work"), filepath.Join(proc, "cwd")); err != nil {
		t.Fatal(err)
	}
	l, known := servicePiLookup(proc)
	if !known || l.Flag != "/flag/pi" || l.Env != "/env/pi" || !slices.Equal(l.TreeRoots, []string{tree, filepath.Join(root, "work")}) {
		t.Fatalf("known %v: %+v", known, l)
	}
	if p, err := l.LookPath("pi"); err != nil || p != filepath.Join(bin, "pi") {
		t.Fatalf("its PATH: %q %v", p, err)
	}
	if _, err := l.LookPath("nothere"); err == nil {
		t.Fatal("found what is not on its PATH")
	}
	if _, known := servicePiLookup(filepath.Join(root, "proc", "43")); known {
		t.Fatal("a process that is not there is known")
	}

	// This test's own process, as /proc describes it.
	if _, err := os.Stat(procRoot); err == nil {
		l, known := ServicePiLookup(os.Getpid())
		exe, _ := os.Executable()
		exe, _ = filepath.EvalSymlinks(exe)
		wd, _ := os.Getwd()
		if !known || !slices.Equal(l.TreeRoots, []string{filepath.Dir(filepath.Dir(exe)), wd}) || l.Env != os.Getenv("SUBAGENTS_PI") {
			t.Fatalf("this process: known %v %+v", known, l)
		}
	}
}

func TestPiFlag(t *testing.T) {
	for _, tt := range []struct {
		argv []string
		want string
	}{
		{[]string{"subagents", "dev", "--pi", "/a/pi"}, "/a/pi"},
		{[]string{"subagents", "dev", "-pi=/b/pi", "--port", "1"}, "/b/pi"},
		{[]string{"subagents", "dev", "--port", "1"}, ""},
		{[]string{"subagents", "dev", "--", "--pi", "/c/pi"}, ""},
		{[]string{"subagents", "dev", "--pipe", "x"}, ""},
	} {
		if got := piFlag(tt.argv); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.argv, got, tt.want)
		}
	}
}
