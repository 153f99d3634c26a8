package client

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemovePatch: a discard deletes the patch the worker wrote for the
// session, and no other file a result may name.
func TestRemovePatch(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file, session string
		removed             bool
	}{
		{"the session's patch", "s1.patch", "s1", true},
		{"another session's", "s2.patch", "s1", false},
		{"not a patch", "s1.jsonl", "s1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := removePatch(path, tt.session); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(path)
			if gone := os.IsNotExist(err); gone != tt.removed {
				t.Fatalf("removed %v, want %v", gone, tt.removed)
			}
		})
	}
	if err := removePatch(filepath.Join(dir, "missing.patch"), "missing"); err != nil {
		t.Fatalf("a patch that is gone already: %v", err)
	}
}

func TestApplyOutcomeOfItems(t *testing.T) {
	tests := []struct {
		statuses []string
		discard  bool
		want     string
	}{
		{[]string{ApplyApplied, ApplyEmpty}, false, ApplyApplied},
		{[]string{ApplyApplied, ApplyFailed}, false, ApplyFailed},
		{[]string{ApplyFailed, ApplyConflict}, false, ApplyConflict},
		{[]string{ApplyDiscarded, ApplyEmpty}, true, ApplyDiscarded},
	}
	for _, tt := range tests {
		var items []Item
		for _, s := range tt.statuses {
			items = append(items, Item{Status: s})
		}
		if got := applyOutcome(items, tt.discard); got != tt.want {
			t.Errorf("applyOutcome(%q) = %q, want %q", tt.statuses, got, tt.want)
		}
	}
}
