package connection

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

// TestEnsureSecretOneKeyForAll: many processes starting on one data dir at
// once, each making the key or reading it, all get the same key, never an
// empty one; the file is 0600 and no temporary file is left beside it.
func TestEnsureSecretOneKeyForAll(t *testing.T) {
	for _, s := range []struct {
		name   string
		ensure func(string) (string, error)
		read   func(string) (string, error)
	}{
		{NestingKeyName, EnsureNestingKey, ReadNestingKey},
		{KeyName, EnsureKey, ReadKey},
	} {
		t.Run(s.name, func(t *testing.T) {
			dir := t.TempDir()
			keys := make([]string, 16)
			errs := make([]error, len(keys))
			var wg sync.WaitGroup
			for i := range keys {
				wg.Go(func() {
					if i%2 == 0 {
						keys[i], errs[i] = s.ensure(dir)
						return
					}
					// A reader racing the writers: not there yet is fine,
					// empty is not.
					for {
						keys[i], errs[i] = s.read(dir)
						if !os.IsNotExist(errs[i]) {
							return
						}
						time.Sleep(time.Millisecond)
					}
				})
			}
			wg.Wait()
			for i := range keys {
				if errs[i] != nil || keys[i] == "" || keys[i] != keys[0] {
					t.Fatalf("process %d: key %q, %v; process 0: %q", i, keys[i], errs[i], keys[0])
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 1 || entries[0].Name() != s.name {
				t.Fatalf("the data dir holds %v (%v), want only %s", entries, err, s.name)
			}
			if info, err := os.Stat(filepath.Join(dir, s.name)); err != nil || info.Mode().Perm() != 0o600 {
				t.Fatalf("the key file: %v, %v", info, err)
			}
		})
	}
}

// TestReadSecretEmpty: an empty key file is one still being written (an
// older service made it, then wrote it): it is read again until its key is
// there; one that stays empty is PERMISSION_DENIED, saying to remove it.
func TestReadSecretEmpty(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // the key is written this long after; 0: never
		want  string
	}{
		{"written soon after", 100 * time.Millisecond, "the-key"},
		{"left empty", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, NestingKeyName)
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.after > 0 {
				go func() {
					time.Sleep(tc.after)
					_ = os.WriteFile(path, []byte(tc.want+"\n"), 0o600)
				}()
			}
			key, err := ReadNestingKey(dir)
			switch {
			case tc.want != "" && (err != nil || key != tc.want):
				t.Fatalf("key %q, %v; want %q", key, err, tc.want)
			case tc.want == "" && (!errcode.Is(err, errcode.PermissionDenied) || !strings.Contains(err.Error(), "is empty; remove it")):
				t.Fatalf("an empty file: key %q, %v", key, err)
			}
		})
	}
}
