package gitrepo

import (
	"path"
	"strings"
)

// UnsafePath says why a path of a change may not be written into a
// checkout, or "" when it may: the rules of git's own verify_path (which
// `git apply` and every checkout keep), on every system at once. A child
// controls its worktree's index and commits, so a change may name any
// path a tree can hold; the worker leaves such paths out of a capture and
// `apply` refuses a change that names one (docs/worktrees.md).
//
// Refused: an empty path or part ("a//b", "a/"), an absolute path, a "."
// or ".." part, a ".git" part in any case, and the names Windows and
// macOS read as ".git": "git~1" (the 8.3 short name), ".git" followed by
// dots, spaces or an NTFS stream (".git.", ".git ", ".git::$DATA"), and
// ".git" with the Unicode characters HFS+ ignores (a zero-width joiner,
// direction marks), also after a backslash (Windows ends a folder's
// name there). A link (link true) may not be named ".gitmodules" in any of those
// spellings either: git reads that file from the tree, and a link would
// make it read another file.
func UnsafePath(p string, link bool) string {
	switch {
	case p == "":
		return "an empty path"
	case strings.HasPrefix(p, "/"):
		return "an absolute path"
	}
	for _, part := range strings.Split(p, "/") {
		switch {
		case part == "":
			return "an empty part"
		case part == "." || part == "..":
			return "a " + part + " part"
		}
		// Windows reads a backslash as a folder's end.
		for _, sub := range strings.Split(part, `\`) {
			if dotGit(sub, "git", "git~1") {
				return "a .git part"
			}
		}
	}
	if link && dotGit(path.Base(strings.ReplaceAll(p, `\`, "/")), "gitmodules", "gitmod~1") {
		return "a link named .gitmodules"
	}
	return ""
}

// dotGit reports whether part is ".<name>" as git's NTFS and HFS+ checks
// read it: in any case, or the 8.3 short name short, followed by nothing
// but dots and spaces (NTFS drops them) up to the end or an NTFS stream
// (":"); or ".<name>" with the code points HFS+ ignores anywhere in it.
func dotGit(part, name, short string) bool {
	lower := strings.ToLower(part)
	for _, stem := range []string{"." + name, short} {
		if rest, ok := strings.CutPrefix(lower, stem); ok {
			rest, _, _ = strings.Cut(rest, ":")
			if strings.Trim(rest, ". ") == "" {
				return true
			}
		}
	}
	return strings.ToLower(strings.Map(hfsIgnored, part)) == "."+name
}

// hfsIgnored drops the code points HFS+ ignores in a name (git's
// next_hfs_char lists them): zero-width joiners and non-joiners,
// direction marks and embeddings, the deprecated shaping controls and the
// byte-order mark.
func hfsIgnored(r rune) rune {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return -1
	}
	return r
}
