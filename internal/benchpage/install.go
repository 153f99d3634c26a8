// Package benchpage holds what `go run ./cmd/bench` rewrites in place in
// BENCHMARKS.md: the install section, which stays between its markers when
// a run does not measure it. It is a package of its own so that its tests
// link in a second, not in the bench's binary, which holds the Temporal
// server (a link of 10-17 CPU seconds in every make test).
package benchpage

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// The install section's markers: the section stays in BENCHMARKS.md
// between them when a run does not measure it (a whole bench, or another
// -only), and `-only install` replaces only what stands between them.
const (
	InstallBegin = "<!-- bench:install -->"
	InstallEnd   = "<!-- /bench:install -->"
)

// SpliceInstall writes section into the page at path in place of the one
// between the markers, or, when it has none, before the levers table (else
// before the reliability suite, else at its end): `-only install` leaves
// the rest of the page as it was.
func SpliceInstall(path, section string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	page := string(b)
	section = strings.TrimPrefix(section, "\n")
	if i, j := strings.Index(page, InstallBegin), strings.Index(page, InstallEnd); i >= 0 && j > i {
		end := j + len(InstallEnd)
		if end < len(page) && page[end] == '\n' {
			end++
		}
		page = page[:i] + section + page[end:]
	} else {
		at := len(page)
		for _, h := range []string{"\n## Levers tried", "\n## Reliability suite"} {
			if k := strings.Index(page, h); k >= 0 {
				at = k + 1
				break
			}
		}
		sep := ""
		if at == len(page) && !strings.HasSuffix(page, "\n\n") {
			sep = "\n"
		}
		page = page[:at] + sep + section + "\n" + page[at:]
	}
	return os.WriteFile(path, []byte(page), 0o644)
}

// KeptInstall is the install section the page at path holds, between its
// markers, so that a run that does not measure it keeps it.
func KeptInstall(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	i, j := strings.Index(s, InstallBegin), strings.Index(s, InstallEnd)
	if i < 0 || j < i {
		return ""
	}
	return "\n" + s[i:j+len(InstallEnd)] + "\n"
}
