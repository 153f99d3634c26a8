package activities

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// A warm child starts on a session file of its own, its slot, under the
// data dir's sessions/warm: pi opens its session as it starts, and pointing
// a running pi at another file (RPC switch_session) rebuilds its whole
// runtime, extensions and resources included (30–50 ms here, on the path of
// every pooled task). A task whose session file does not exist yet, as in
// every first turn, takes the child as it is: its session file becomes a
// symbolic link to the slot, and pi writes there, creating the file with
// its first answer as it would the task's own. Once the child has exited
// the slot is renamed over the link: the session file is then what a cold
// pi would have written, an ordinary file. Readers meanwhile follow the
// link; a worker that died before the rename leaves the link, and the
// session's next run settles it (settleStaleSlot).

// slotDir is where warm children's slots live: beside the session files,
// on their file system, so that a rename moves a slot into place.
func (a *Activities) slotDir() string { return filepath.Join(a.cfg.DataDir, "sessions", "warm") }

// newSlot names a slot for a warm child about to start: pi creates the
// file only when the child has answered a task, and an idle child leaves
// nothing.
func (a *Activities) newSlot() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(a.slotDir(), hex.EncodeToString(b[:])+".jsonl")
}

// linkSlot makes sessionFile, which must not exist yet, a link to p's slot;
// false when it cannot (the file exists, or p has no slot), and the child
// is switched to the session file instead.
func linkSlot(p *proc, sessionFile string) bool {
	if p.slot == "" {
		return false
	}
	if err := os.MkdirAll(filepath.Dir(p.slot), 0o700); err != nil {
		return false
	}
	if err := os.Symlink(p.slot, sessionFile); err != nil {
		return false
	}
	p.linked = sessionFile
	return true
}

// unlinkSlot undoes linkSlot for a child that will not run the task: the
// run goes on cold, and pi must find no file there.
func unlinkSlot(p *proc) {
	if p.linked != "" {
		_ = os.Remove(p.linked)
		p.linked = ""
	}
}

// settleSlot puts slot's file in place of the link at sessionFile, or
// removes the link when pi never wrote the slot. Only once no pi writes
// the slot: the child that had it exited.
func settleSlot(sessionFile, slot string) error {
	// Not a link (an ordinary file, or none), or not to this slot: not
	// this child's to settle.
	if target, err := os.Readlink(sessionFile); err != nil || target != slot {
		return nil
	}
	if _, err := os.Stat(slot); errors.Is(err, fs.ErrNotExist) {
		return os.Remove(sessionFile)
	}
	return os.Rename(slot, sessionFile)
}

// settleStaleSlot settles a link to a slot that a worker left when it died
// while its warm child ran (the child died with it). The caller holds the
// session's lock and knows no child of its own writes the slot.
func (a *Activities) settleStaleSlot(sessionFile string) error {
	target, err := os.Readlink(sessionFile)
	if err != nil || filepath.Dir(target) != a.slotDir() {
		return nil
	}
	return settleSlot(sessionFile, target)
}
