package main

import (
	"strconv"
	"strings"
	"time"
)

// versionTimeout bounds `node --version`: it answers in milliseconds; a
// few seconds only guard a hang on a loaded machine.
const versionTimeout = 10 * time.Second

// satisfies reports whether a Node version ("v22.23.3") meets an engines
// range. Only the form pi's packages use is judged, ">=MAJOR[.MINOR[.PATCH]]";
// any other range is not, so its warning is printed as npm wrote it.
func satisfies(version, rng string) bool {
	rng = strings.TrimSpace(rng)
	if !strings.HasPrefix(rng, ">=") {
		return false
	}
	want, ok := parseVersion(strings.TrimSpace(strings.TrimPrefix(rng, ">=")))
	if !ok {
		return false
	}
	have, ok := parseVersion(strings.TrimPrefix(strings.TrimSpace(version), "v"))
	if !ok {
		return false
	}
	for i := range have {
		if have[i] != want[i] {
			return have[i] > want[i]
		}
	}
	return true
}

// parseVersion reads MAJOR[.MINOR[.PATCH]]; missing parts are zero.
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.Split(s, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}
