package activities

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/profiles"
)

// TestRunSpecOfAChildThatDelegates: the admission's environment (the
// service's connection, the task's session as the parent) reaches the
// child's, after the worker's own; a child that delegates never takes a
// warm child, which another session's would have been, while one without
// delegation tools may.
func TestRunSpecOfAChildThatDelegates(t *testing.T) {
	// A pi file to stat: a warm spec names the files a child loads.
	pi := filepath.Join(t.TempDir(), "pi")
	if err := os.WriteFile(pi, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{DataDir: t.TempDir(), WarmPool: 1, Pi: pi})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	adm := profiles.Admission{Env: []string{"SUBAGENTS_TASK_QUEUE=q", profiles.NestedEnv + "=1", profiles.ParentSessionEnv + "=s-1"}}
	in := api.RunPiInput{SessionID: "s-1", Cwd: t.TempDir(), Prompt: "p", Depth: 1, Tools: []string{"read", "task"}}
	env, spec := a.runSpec(in, adm)
	for _, kv := range append(adm.Env, "PI_SUBAGENT_DEPTH=1", "PI_SUBAGENT_CHILD=1") {
		if !slices.Contains(env, kv) {
			t.Errorf("the child's environment lacks %s", kv)
		}
	}
	if spec.key != "" {
		t.Errorf("a child that delegates has a warm spec %q", spec.key)
	}
	in.Tools = []string{"read"}
	if _, spec := a.runSpec(in, profiles.Admission{}); spec.key == "" {
		t.Error("a child without delegation tools has no warm spec")
	}
}
