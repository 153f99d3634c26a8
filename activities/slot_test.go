package activities

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSettleSlot: a session file linked to a warm child's slot becomes the
// slot's file once settled, or goes when pi never wrote the slot; an
// ordinary file, or a link elsewhere, is left as it is.
func TestSettleSlot(t *testing.T) {
	cases := []struct {
		name      string
		slotFile  bool   // pi wrote the slot
		link      string // "slot", "elsewhere" or "" (an ordinary file)
		wantFile  bool   // the session file exists after
		wantText  string // and holds this
		wantStale bool   // a link is still there (not ours to settle)
	}{
		{name: "written slot", slotFile: true, link: "slot", wantFile: true, wantText: "from the slot"},
		{name: "slot never written", link: "slot"},
		{name: "ordinary file", link: "", wantFile: true, wantText: "ordinary"},
		{name: "link elsewhere", link: "elsewhere", wantFile: true, wantText: "elsewhere", wantStale: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &Activities{cfg: Config{DataDir: t.TempDir()}}
			slot := a.newSlot()
			if err := os.MkdirAll(filepath.Dir(slot), 0o700); err != nil {
				t.Fatal(err)
			}
			session := filepath.Join(a.cfg.DataDir, "sessions", "x", "a_s.jsonl")
			if err := os.MkdirAll(filepath.Dir(session), 0o700); err != nil {
				t.Fatal(err)
			}
			if c.slotFile {
				if err := os.WriteFile(slot, []byte("from the slot"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			switch c.link {
			case "slot":
				if !linkSlot(&proc{slot: slot}, session) {
					t.Fatal("not linked")
				}
			case "elsewhere":
				other := filepath.Join(t.TempDir(), "other.jsonl")
				if err := os.WriteFile(other, []byte("elsewhere"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(other, session); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.WriteFile(session, []byte("ordinary"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.settleStaleSlot(session); err != nil {
				t.Fatal(err)
			}
			info, err := os.Lstat(session)
			if (err == nil) != c.wantFile {
				t.Fatalf("session file: %v, want it there %v", err, c.wantFile)
			}
			if c.wantFile {
				b, _ := os.ReadFile(session)
				if string(b) != c.wantText || (info.Mode()&os.ModeSymlink != 0) != c.wantStale {
					t.Fatalf("session file holds %q (mode %v)", b, info.Mode())
				}
			}
			if _, err := os.Lstat(slot); err == nil {
				t.Fatal("the slot is still there")
			}
		})
	}
}

// TestLinkSlotRefusesAnExistingFile: a session that has a file already is
// continued by switching the child to it, never linked over.
func TestLinkSlotRefusesAnExistingFile(t *testing.T) {
	dir := t.TempDir()
	session := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(session, []byte("turn 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{slot: filepath.Join(dir, "warm", "slot.jsonl")}
	if linkSlot(p, session) || p.linked != "" {
		t.Fatal("linked over an existing session file")
	}
	if linkSlot(&proc{}, filepath.Join(dir, "new.jsonl")) {
		t.Fatal("linked a child without a slot")
	}
}
