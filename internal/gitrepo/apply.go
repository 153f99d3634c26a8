package gitrepo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Conflict is a file of a change that does not apply to a checkout as it
// is, and why.
type Conflict struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// Modes of a diff's sides (git's object modes).
const (
	modeAbsent  = "000000"
	modeFile    = "100644"
	modeExec    = "100755"
	modeLink    = "120000"
	modeGitlink = "160000"
)

// rawChange is one file of `git diff --raw`.
type rawChange struct {
	path             string
	oldMode, newMode string
	oldBlob, newBlob string
}

// fileOp is what applying a change does to one file.
type fileOp struct {
	path   string
	remove bool
	// write, when not remove: the content, and whether it is a link (its
	// target) or a file of mode.
	content []byte
	link    bool
	mode    os.FileMode
}

// Applied is what ApplyChange did, or why it did nothing.
type Applied struct {
	// Files are the files written.
	Files []string
	// Conflicts are the files that do not apply to the checkout as it
	// is; Refused the paths that may not be written in it (UnsafePath).
	// Either means nothing was written.
	Conflicts []Conflict
	Refused   []Refusal
	// OutsideLinks are the links written whose target is outside the
	// checkout or in its .git folder: git writes such links too, and what
	// follows one reads or writes there.
	OutsideLinks []Link
}

// Link is a symbolic link a change writes, and where it points.
type Link struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

func (l Link) String() string { return l.Path + " -> " + l.Target }

// ApplyChange applies the change from base to tip (commits of the
// repository at top) to the files of its working tree, file by file as a
// three-way merge would: a file the checkout left as base had it takes
// tip's content, one that already has tip's is left, and one changed on
// both sides is merged line by line (git merge-file) when both are text.
// A change that names a path git refuses (outside the checkout, in its
// .git folder: UnsafePath) is refused whole, and any file that cannot be
// merged cleanly is a conflict: then nothing is written, and the result
// says why. Else it writes every file (not staged, as `git apply` leaves
// them).
func ApplyChange(ctx context.Context, top, base, tip string) (Applied, error) {
	var res Applied
	changes, err := rawDiff(ctx, top, base, tip)
	if err != nil {
		return res, err
	}
	for _, c := range changes {
		if why := UnsafePath(c.path, c.oldMode == modeLink || c.newMode == modeLink); why != "" {
			res.Refused = append(res.Refused, Refusal{Path: c.path, Why: why})
		}
	}
	res.Refused = append(res.Refused, beyondWritten(changes)...)
	if len(res.Refused) > 0 {
		return res, nil
	}
	var shas []string
	for _, c := range changes {
		shas = append(shas, c.oldBlob, c.newBlob)
	}
	blobs, err := readBlobs(ctx, top, shas)
	if err != nil {
		return res, err
	}
	// The paths the change deletes: a folder of them only may become a
	// file of the same name.
	deleted := map[string]bool{}
	for _, c := range changes {
		if c.newMode == modeAbsent {
			deleted[c.path] = true
		}
	}
	var ops []fileOp
	for _, c := range changes {
		op, skip, why, err := plan(ctx, top, c, blobs, deleted)
		if err != nil {
			return res, err
		}
		switch {
		case why != "":
			res.Conflicts = append(res.Conflicts, Conflict{Path: c.path, Why: why})
		case !skip:
			ops = append(ops, op)
		}
	}
	if len(res.Conflicts) > 0 {
		return res, nil
	}
	// Deletions first: a folder the change empties is gone before a file
	// takes its name (git lists a/b after a).
	slices.SortStableFunc(ops, func(a, b fileOp) int {
		switch {
		case a.remove && !b.remove:
			return -1
		case b.remove && !a.remove:
			return 1
		}
		return 0
	})
	// What each file was before, to put back should a write fail midway
	// (a permission, a full disk): all or nothing, for errors too.
	var undo []fileOp
	for _, op := range ops {
		before, err := snapshot(top, op.path)
		if err == nil {
			err = writeOp(top, op)
		}
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				_ = write(top, undo[i])
			}
			return Applied{}, fmt.Errorf("%s: %w (the files written before it were put back)", op.path, err)
		}
		undo = append(undo, before)
		res.Files = append(res.Files, op.path)
		if op.link && pointsOutside(top, op.path, string(op.content)) {
			res.OutsideLinks = append(res.OutsideLinks, Link{Path: op.path, Target: string(op.content)})
		}
	}
	slices.Sort(res.Files)
	return res, nil
}

// beyondWritten refuses the paths a change writes below another path it
// writes as a link or a file. No tree git makes holds both, but a
// hand-made one (git mktree takes a name twice) can: written in order,
// "d -> /home/u/.ssh" then "d/authorized_keys" would write through the
// link, outside the checkout.
func beyondWritten(changes []rawChange) []Refusal {
	written := map[string]bool{}
	for _, c := range changes {
		if c.newMode != modeAbsent {
			written[c.path] = true
		}
	}
	var refused []Refusal
	for _, c := range changes {
		if c.newMode == modeAbsent {
			continue
		}
		for i := strings.IndexByte(c.path, '/'); i >= 0; i = next(c.path, i) {
			if written[c.path[:i]] {
				refused = append(refused, Refusal{Path: c.path, Why: "below " + c.path[:i] + ", which the change writes as a link or a file"})
				break
			}
		}
	}
	return refused
}

// next is the index of the next "/" in p after i, or -1.
func next(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// pointsOutside reports whether the link at path (from top) to target
// points outside the checkout at top or into its .git folder, as the
// system follows it: through the checkout's own links on the way (a
// "vendor/.." where vendor is a link to /opt/x is /opt), and from the
// checkout's real folder.
func pointsOutside(top, path, target string) bool {
	top = resolvedPrefix(top)
	abs := target
	if !filepath.IsAbs(abs) {
		// Not Join, which would drop "vendor/.." before vendor is
		// followed.
		abs = resolvedPrefix(filepath.Join(top, filepath.Dir(filepath.FromSlash(path)))) + string(filepath.Separator) + target
	}
	rel, err := filepath.Rel(top, resolvedPrefix(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return true
	}
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if dotGit(part, "git", "git~1") {
			return true
		}
	}
	return false
}

// resolvedPrefix is p with every link on it followed, as far as its
// folders exist: a target that is not there yet is judged by where its
// existing part leads.
func resolvedPrefix(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Dir(p), filepath.Base(p)
	if dir == p || base == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(resolvedPrefix(dir), base)
}

// snapshot is the operation that puts path back as it is now: its
// content and mode, its link target, or its absence.
func snapshot(top, path string) (fileOp, error) {
	full := filepath.Join(top, path)
	info, err := os.Lstat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileOp{path: path, remove: true}, nil
	case err != nil:
		return fileOp{}, err
	case info.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(full)
		return fileOp{path: path, content: []byte(target), link: true}, err
	case info.IsDir():
		return fileOp{}, fmt.Errorf("a folder is in the way")
	}
	content, err := os.ReadFile(full)
	return fileOp{path: path, content: content, mode: info.Mode().Perm()}, err
}

// rawDiff lists the files that differ between base and tip, with their
// modes and blobs.
func rawDiff(ctx context.Context, top, base, tip string) ([]rawChange, error) {
	out, err := run(ctx, top, nil, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", "--no-ext-diff", "--no-textconv", base, tip, "--")
	if err != nil {
		return nil, err
	}
	fields := bytes.Split(out, []byte{0})
	var changes []rawChange
	for i := 0; i+1 < len(fields); i += 2 {
		head := strings.Fields(strings.TrimPrefix(string(fields[i]), ":"))
		if len(head) < 5 {
			return nil, fmt.Errorf("git diff --raw: unexpected line %q", fields[i])
		}
		changes = append(changes, rawChange{path: string(fields[i+1]), oldMode: head[0], newMode: head[1], oldBlob: head[2], newBlob: head[3]})
	}
	return changes, nil
}

// zeroBlob is the ID of an absent side.
func zeroBlob(sha string) bool { return strings.Trim(sha, "0") == "" }

// readBlobs reads the blobs of shas (absent ones skipped) in one
// `git cat-file --batch`.
func readBlobs(ctx context.Context, top string, shas []string) (map[string][]byte, error) {
	var in bytes.Buffer
	want := map[string]bool{}
	for _, s := range shas {
		if !zeroBlob(s) && !want[s] {
			want[s] = true
			in.WriteString(s + "\n")
		}
	}
	blobs := map[string][]byte{}
	if len(want) == 0 {
		return blobs, nil
	}
	out, err := run(ctx, top, &in, "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(bytes.NewReader(out))
	for range len(want) {
		header, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %w", err)
		}
		f := strings.Fields(header)
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file: %q", strings.TrimSpace(header))
		}
		size, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %q", strings.TrimSpace(header))
		}
		content := make([]byte, size+1) // and its newline
		if _, err := io.ReadFull(r, content); err != nil {
			return nil, fmt.Errorf("git cat-file: %w", err)
		}
		blobs[f[0]] = content[:size]
	}
	return blobs, nil
}

// current is a file of the working tree as applying sees it.
type current struct {
	exists, link, dir bool
	content           []byte
	mode              os.FileMode
}

func readCurrent(path string) (current, error) {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// Not there, or a file holds the name of a folder on its path
		// (plan looks at that file).
		return current{}, nil
	}
	if err != nil {
		return current{}, err
	}
	switch {
	case info.IsDir():
		return current{exists: true, dir: true}, nil
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		return current{exists: true, link: true, content: []byte(target)}, err
	}
	b, err := os.ReadFile(path)
	return current{exists: true, content: b, mode: info.Mode().Perm()}, err
}

// same reports whether the working tree's file is the side of mode and
// content: the same kind (a link or a file), for a file the same
// executable bit, and the same content.
func (c current) same(mode string, content []byte) bool {
	if !c.exists || c.dir || c.link != (mode == modeLink) {
		return false
	}
	if !c.link && (c.mode&0o100 != 0) != (mode == modeExec) {
		return false
	}
	return bytes.Equal(c.content, content)
}

// plan decides what applying c does to its file: an op, nothing (skip:
// the checkout has tip's side already), or why it conflicts.
func plan(ctx context.Context, top string, c rawChange, blobs map[string][]byte, deleted map[string]bool) (op fileOp, skip bool, why string, err error) {
	if c.oldMode == modeGitlink || c.newMode == modeGitlink {
		return op, false, "a submodule changed: apply it by hand", nil
	}
	block, blockMode, blocked := notAFolder(top, c.path)
	if blocked && blockMode&fs.ModeSymlink != 0 {
		// Writing there would write outside the checkout, which git
		// refuses as well.
		return op, false, "it is beyond a symbolic link in this checkout", nil
	}
	cur, err := readCurrent(filepath.Join(top, c.path))
	if err != nil {
		return op, false, "", err
	}
	oldContent, newContent := blobs[c.oldBlob], blobs[c.newBlob]
	op = fileOp{path: c.path, content: newContent, link: c.newMode == modeLink, mode: fileMode(c.newMode)}
	switch {
	case c.newMode == modeAbsent:
		// The task deleted it.
		switch {
		case !cur.exists:
			return op, true, "", nil
		case cur.same(c.oldMode, oldContent):
			op.remove = true
			return op, false, "", nil
		}
		return op, false, "the task deleted it and it changed here", nil
	case c.oldMode == modeAbsent:
		// The task added it.
		switch {
		case blocked && !deleted[block]:
			// A file the task turned into a folder may give way only when
			// the change deletes it.
			return op, false, "a file here has the name of a folder it is in, and the task did not delete it", nil
		case !cur.exists:
			return op, false, "", nil
		case cur.same(c.newMode, newContent):
			return op, true, "", nil
		case cur.dir:
			if emptiedBy(filepath.Join(top, c.path), c.path, deleted) {
				// The task turned the folder into a file.
				return op, false, "", nil
			}
			return op, false, "the task made it a file and a folder here holds more than the task deleted", nil
		}
		return op, false, "the task added it and a different one is here", nil
	case !cur.exists:
		return op, false, "the task changed it and it was deleted here", nil
	case cur.dir:
		return op, false, "a folder is here", nil
	case cur.same(c.newMode, newContent):
		return op, true, "", nil
	case cur.same(c.oldMode, oldContent):
		return op, false, "", nil
	case cur.link || c.oldMode == modeLink || c.newMode == modeLink || binary(cur.content) || binary(oldContent) || binary(newContent):
		return op, false, "it changed both here and in the task, and is not text to merge", nil
	}
	merged, clean, err := mergeFile(ctx, top, cur.content, oldContent, newContent)
	if err != nil {
		return op, false, "", err
	}
	if !clean {
		return op, false, "it changed both here and in the task, in the same lines", nil
	}
	op.content = merged
	if c.oldMode == c.newMode {
		// The checkout's own mode stays, as a merge keeps it.
		op.mode = cur.mode
	}
	return op, false, "", nil
}

// emptiedBy says whether every file under dir (the checkout's folder rel)
// is one the change deletes: a folder the change leaves empty. A file the
// user added there, or one git ignores, keeps it.
func emptiedBy(dir, rel string, deleted map[string]bool) bool {
	empty := true
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		sub, err := filepath.Rel(dir, path)
		if err != nil || !deleted[filepath.ToSlash(filepath.Join(rel, sub))] {
			empty = false
			return filepath.SkipAll
		}
		return nil
	})
	return err == nil && empty
}

// fileMode is the permission bits a file of git mode gets.
func fileMode(mode string) os.FileMode {
	if mode == modeExec {
		return 0o755
	}
	return 0o644
}

// binaryProbe is how much of a file git looks at to call it binary (a NUL
// byte in its first 8000 bytes); the same rule here.
const binaryProbe = 8000

func binary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), binaryProbe)], 0) >= 0
}

// notAFolder is the first folder on the way to rel (from top) that is
// not one in the checkout, a link or a file, with its mode: found is false
// when every folder on the way is one or is not there (then nothing below
// it is either).
func notAFolder(top, rel string) (dir string, mode fs.FileMode, found bool) {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i := 1; i < len(parts); i++ {
		dir = strings.Join(parts[:i], "/")
		info, err := os.Lstat(filepath.Join(top, filepath.FromSlash(dir)))
		if err != nil {
			return "", 0, false
		}
		if !info.IsDir() {
			return dir, info.Mode(), true
		}
	}
	return "", 0, false
}

// mergeFile merges the change from base to theirs into ours, line by line
// (`git merge-file`); clean is false when both changed the same lines.
func mergeFile(ctx context.Context, top string, ours, base, theirs []byte) (merged []byte, clean bool, err error) {
	dir, err := os.MkdirTemp("", "subagents-merge-*")
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	names := []string{"ours", "base", "theirs"}
	for i, b := range [][]byte{ours, base, theirs} {
		if err := os.WriteFile(filepath.Join(dir, names[i]), b, 0o600); err != nil {
			return nil, false, err
		}
	}
	out, err := run(ctx, top, nil, "merge-file", "-p", "--quiet", filepath.Join(dir, "ours"), filepath.Join(dir, "base"), filepath.Join(dir, "theirs"))
	if err != nil {
		// It exits with the number of conflicts (at most 127), or 255 on
		// trouble of its own.
		if code := exitCode(err); code > 0 && code < 128 {
			return nil, false, nil
		}
		return nil, false, err
	}
	return out, true, nil
}

// write carries out op in the working tree at top: a file or link through
// a temporary file renamed into place, a removal with the folders it
// leaves empty.
// writeOp is write; a test makes it fail, as a full disk would, once the
// checks before any write have passed.
var writeOp = write

func write(top string, op fileOp) error {
	path := filepath.Join(top, op.path)
	// Checked again just before the write, after the ops before it: a
	// folder on the way that became a link (or a file) would take the
	// write elsewhere.
	if dir, mode, found := notAFolder(top, op.path); found {
		what := "a file"
		if mode&fs.ModeSymlink != 0 {
			what = "a symbolic link"
		}
		return fmt.Errorf("%s on its way is %s", dir, what)
	}
	if op.remove {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for dir := filepath.Dir(path); dir != top && strings.HasPrefix(dir, top); dir = filepath.Dir(dir) {
			if os.Remove(dir) != nil {
				break
			}
		}
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if info, err := os.Lstat(path); err == nil && info.IsDir() {
		return fmt.Errorf("a folder is in the way")
	}
	tmp, err := os.CreateTemp(dir, ".subagents-apply-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	if op.link {
		_ = tmp.Close()
		_ = os.Remove(tmpName)
		if err := os.Symlink(string(op.content), tmpName); err != nil {
			return err
		}
	} else {
		_, werr := tmp.Write(op.content)
		if err := errors.Join(werr, tmp.Close(), os.Chmod(tmpName, op.mode)); err != nil {
			_ = os.Remove(tmpName)
			return err
		}
	}
	if err := os.Rename(tmpName, path); err != nil {
		_ = os.Remove(tmpName)
		return err
	}
	return nil
}
