package activities

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// pi runs an existing session in the cwd its header names, not in the
// folder it was started in (pi's main: "--session ... may select a session
// from another project"), and refuses to run one whose folder is gone. A
// run in a worktree must therefore find the worktree in its session
// file's header: a session that began outside it (context fork, an earlier
// turn without worktree) or in a worktree of an earlier path has its
// header pointed at it. A run without a worktree whose session's header
// names a worktree of this worker's (its earlier turns ran in one) gets its
// own cwd back the same way; any other header is left as pi wrote it.

// maxHeaderBytes bounds the first line read from a session file: a header
// is a few hundred bytes.
const maxHeaderBytes = 64 << 10

// pointSession makes the header of the session file name cwd, where it
// must (see above). No file yet, or a warm child's link, is left alone:
// pi writes its header with the folder it runs in.
func (a *Activities) pointSession(file, cwd string, worktree bool) error {
	info, err := os.Lstat(file)
	if err != nil || !info.Mode().IsRegular() {
		return nil
	}
	have, err := sessionHeaderCwd(file)
	if err != nil || have == "" || realPath(have) == realPath(cwd) {
		return err
	}
	if !worktree && !within(realPath(have), worktreesDir(a.cfg.DataDir)) {
		return nil
	}
	return setSessionCwd(file, cwd)
}

// sessionHeaderCwd is the cwd the session file's header names ("" when its
// first line is no header).
func sessionHeaderCwd(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxHeaderBytes))
	if err != nil {
		return "", err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	var e entry
	if json.Unmarshal(trimCR(line), &e) != nil || e.str("type") != "session" {
		return "", nil
	}
	return e.str("cwd"), nil
}

// setSessionCwd rewrites the session file's header with cwd, the rest as
// it is, through a temporary file renamed into place (the caller holds the
// session's lock: no pi writes it meanwhile).
func setSessionCwd(file, cwd string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if int64(len(b)) > maxSessionBytes {
		return fmt.Errorf("session file %s is larger than %d MiB", file, maxSessionBytes>>20)
	}
	line, rest, _ := bytes.Cut(b, []byte("\n"))
	var e entry
	if err := json.Unmarshal(trimCR(line), &e); err != nil || e.str("type") != "session" {
		return fmt.Errorf("session file %s: no header", file)
	}
	e.set("cwd", cwd)
	header, err := json.Marshal(e)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".header-*.jsonl")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(append(header, '\n'), rest...))
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return nil
}
