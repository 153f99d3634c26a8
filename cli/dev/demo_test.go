package dev

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/client"
)

// TestDemoAnswersAreTrue: what the demo's scripted children answer is what
// the source tree holds: the folders it names exist, the file it names
// sets the heartbeat interval, the profiles it names are the built-in ones.
func TestDemoAnswersAreTrue(t *testing.T) {
	root := filepath.Join("..", "..")
	tasks, err := demoTasks()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, task := range tasks {
		byName[task.name] = task.result
	}
	for _, dir := range regexp.MustCompile(`\b([a-z0-9]+)/`).FindAllStringSubmatch(byName["map-layout"], -1) {
		if info, err := os.Stat(filepath.Join(root, dir[1])); err != nil || !info.IsDir() {
			t.Errorf("map-layout names %s/, which is no folder of the tree: %v", dir[1], err)
		}
	}
	file, setting, _ := strings.Cut(strings.TrimSuffix(byName["find-heartbeat"], "."), ": ")
	src, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatalf("find-heartbeat names %s: %v", file, err)
	}
	name, _, _ := strings.Cut(setting, " = ")
	if !regexp.MustCompile(`(?m)^\s*` + name + `\s*=`).Match(src) {
		t.Errorf("find-heartbeat says %q, but %s sets no %s", byName["find-heartbeat"], file, name)
	}
	var builtin []string
	entries, err := os.ReadDir(filepath.Join(root, "profiles", "builtin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".md"); ok {
			builtin = append(builtin, n)
		}
	}
	for _, n := range builtin {
		if !strings.Contains(", "+strings.TrimSuffix(byName["list-profiles"], ".")+", ", ", "+n+", ") {
			t.Errorf("list-profiles (%q) leaves out the built-in %s", byName["list-profiles"], n)
		}
	}
}

// TestHowItRan: the demo says of each task what its result says, not
// what the demo hoped for.
func TestHowItRan(t *testing.T) {
	for _, tc := range []struct {
		it   client.Item
		want string
	}{
		{client.Item{RunAttempt: 1}, "ran once, on its first attempt"},
		{client.Item{RunAttempt: 2, Continued: true}, "continued its pi session on attempt 2 after the kill"},
		{client.Item{RunAttempt: 3, Continued: true}, "continued its pi session on attempt 3 after the kill"},
		{client.Item{RunAttempt: 2}, "attempt 2 after the kill, its pi session not continued"},
	} {
		if got := howItRan(tc.it); got != tc.want {
			t.Errorf("howItRan(%+v) = %q, want %q", tc.it, got, tc.want)
		}
	}
}
