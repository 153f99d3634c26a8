// Package nearest finds the name a person most likely meant when they
// wrote one nobody knows: a flag, a command, a settings key, a profile's
// field. A message that names the unknown word and the near one it
// likely is says what to do next in three words ("did you mean ...?").
package nearest

import "strings"

// Closest is the candidate a mistyped name most likely meant, or "": one
// the name starts (three letters at least, so that "-t" names no flag of
// its own), or one a few edits away (a third of the name's length, at least
// one: "tiemout" is timeout, "jsno" json). Case, "_" and "-" do not count:
// "task_max_events" is taskMaxEvents, "maxdepth" maxDepth.
func Closest(name string, candidates []string) string {
	lower := strings.ToLower(name)
	name = fold(name)
	best, bestDist, bestRaw := "", -1, -1
	for _, c := range candidates {
		fc := fold(c)
		d := EditDistance(name, fc)
		limit := max(1, len([]rune(name))/3)
		if d > limit && !(len(name) >= 3 && strings.HasPrefix(fc, name)) {
			continue
		}
		// Of two as near once folded, the nearer as written: "timeout-m"
		// is timeout-ms, not timeout.
		raw := EditDistance(lower, strings.ToLower(c))
		if bestDist < 0 || d < bestDist || d == bestDist && raw < bestRaw {
			best, bestDist, bestRaw = c, d, raw
		}
	}
	return best
}

// fold is s as Closest compares it: lower case, without "_" and "-".
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// EditDistance counts the insertions, deletions, substitutions and swaps of
// two neighbours that turn a into b (optimal string alignment): a swap is
// the commonest slip of a typist, and counts once.
func EditDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range t {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}
