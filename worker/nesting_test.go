package worker

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestServiceEnv: a child that delegates reaches the worker's own service:
// its task queue, data dir, and the address and namespace it was given,
// else the process's.
func TestServiceEnv(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "env:7233")
	t.Setenv("TEMPORAL_NAMESPACE", "")
	got := serviceEnv(Config{TaskQueue: "q", DataDir: "/data", ServiceNamespace: "ns"})
	for _, kv := range []string{"SUBAGENTS_TASK_QUEUE=q", "SUBAGENTS_DATA_DIR=/data", "TEMPORAL_ADDRESS=env:7233", "TEMPORAL_NAMESPACE=ns"} {
		if !slices.Contains(got, kv) {
			t.Errorf("serviceEnv lacks %s: %v", kv, got)
		}
	}
	if got := serviceEnv(Config{ServiceAddress: "flag:7233"}); !slices.Contains(got, "TEMPORAL_ADDRESS=flag:7233") {
		t.Errorf("the address the worker was given: %v", got)
	}
}

// TestDelegationExtension: SUBAGENTS_EXTENSION_DIR names the extension
// folder whose src/nested.ts a child that delegates loads; a folder
// without it is passed over.
func TestDelegationExtension(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SUBAGENTS_EXTENSION_DIR", dir)
	if got := DelegationExtension(); got == filepath.Join(dir, NestedEntry) {
		t.Fatalf("found %s before it exists", got)
	}
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, NestedEntry), []byte("export default function () {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := DelegationExtension(); got != filepath.Join(dir, NestedEntry) {
		t.Fatalf("DelegationExtension = %q", got)
	}
}
