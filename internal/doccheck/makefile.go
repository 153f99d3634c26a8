package doccheck

import (
	"regexp"
	"strings"
)

// A rule line: "name:", "a b: deps", but not "NAME := value" nor a
// pattern or variable target.
var ruleLine = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*::?(?:[^=]|$)`)

// MakefileTargets lists the targets a Makefile defines: the names before the
// colon of its rule lines, special targets such as .PHONY left out.
func MakefileTargets(src string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(src, "\n") {
		m := ruleLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, name := range strings.Fields(m[1]) {
			if !strings.HasPrefix(name, ".") {
				out[name] = true
			}
		}
	}
	return out
}
