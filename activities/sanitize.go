package activities

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Sanitizer masks secrets and the user's home path in everything that
// leaves a child run: results, heartbeats, artifacts (the SingleResult contract).
type Sanitizer struct {
	home string
}

// NewSanitizer returns a sanitizer that also replaces home (the worker
// user's home folder) with "~"; empty home skips that rule.
func NewSanitizer(home string) *Sanitizer {
	return &Sanitizer{home: strings.TrimRight(home, "/")}
}

type secretRule struct {
	re   *regexp.Regexp
	repl string
}

// secretRules are applied in order; the more specific key shapes come before
// the generic ones so the label says what was found.
var secretRules = []secretRule{
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`), "[REDACTED private key]"},
	{regexp.MustCompile(`(?i)(authorization\s*[:=]\s*["']?)(?:bearer\s+|basic\s+|token\s+)?[^\s"',;]+`), "${1}[REDACTED]"},
	{regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}`), "Bearer [REDACTED]"},
	{regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{16,}`), "[REDACTED anthropic key]"},
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`), "[REDACTED api key]"},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`), "[REDACTED google key]"},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), "[REDACTED aws key id]"},
	{regexp.MustCompile(`(?i)(aws_secret_access_key\s*[=:]\s*["']?)[A-Za-z0-9/+=]{30,}`), "${1}[REDACTED]"},
	{regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})`), "[REDACTED github token]"},
	{regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`), "[REDACTED slack token]"},
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}`), "[REDACTED jwt]"},
	// Credentials in a URL: scheme://user:password@host keeps the user.
	{regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@"'<>]+):[^\s/@"'<>]+@`), "${1}:[REDACTED]@"},
}

// secretAssignment is a value given to a name that says it is secret
// (KEY=value, key: value, "key": "value"), whatever the value's length:
// short passwords are secrets too.
var secretAssignment = regexp.MustCompile(`(?i)(["']?)([A-Za-z0-9_.-]*(?:secret|passw(?:or)?d|pwd|token|credential|private|apikey|[_-]key)[A-Za-z0-9_.-]*)(["']?)(\s*[=:]\s*)(?:"([^"\n]*)"|'([^'\n]*)'|([^\s"',;&}\]]+))`)

// maskAssignment masks the value of one secretAssignment match; counts of
// tokens ("totalTokens": 120) are not secrets, nor what is masked already.
func maskAssignment(m string) string {
	g := secretAssignment.FindStringSubmatch(m)
	name, value := strings.ToLower(g[2]), g[5]+g[6]+g[7]
	if strings.Contains(name, "tokens") || value == "" || strings.HasPrefix(value, "[REDACTED") {
		return m
	}
	quote := ""
	if g[5] != "" || strings.HasSuffix(m, `"`) {
		quote = `"`
	} else if g[6] != "" || strings.HasSuffix(m, "'") {
		quote = "'"
	}
	return g[1] + g[2] + g[3] + g[4] + quote + "[REDACTED]" + quote
}

// stackFrame matches one frame of a JavaScript, Python, Java or Go trace.
var stackFrame = regexp.MustCompile(`^\s+(?:at\s|File\s".*",\s+line\s\d+|\S+\.go:\d+)`)

// maxStackFrames is how many frames of one trace survive: the top frames say
// where it failed; the rest only fills the parent's context window.
const maxStackFrames = 8

// Sanitize returns s with secrets masked, the home path shortened and
// over-long stack traces cut.
func (z *Sanitizer) Sanitize(s string) string {
	if s == "" {
		return s
	}
	for _, r := range secretRules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	s = secretAssignment.ReplaceAllStringFunc(s, maskAssignment)
	if z.home != "" && z.home != "/" {
		s = strings.ReplaceAll(s, z.home+"/", "~/")
		s = strings.ReplaceAll(s, z.home, "~")
	}
	return cutStackTraces(s)
}

func cutStackTraces(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); {
		if !stackFrame.MatchString(lines[i]) {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i
		for j < len(lines) && stackFrame.MatchString(lines[j]) {
			j++
		}
		if n := j - i; n > maxStackFrames {
			out = append(out, lines[i:i+maxStackFrames]...)
			out = append(out, fmt.Sprintf("    ... (%d more stack frames)", n-maxStackFrames))
		} else {
			out = append(out, lines[i:j]...)
		}
		i = j
	}
	return strings.Join(out, "\n")
}

// Truncated is text cut to a character cap, with the task contract's accounting.
type Truncated struct {
	Text          string
	Truncated     bool
	TotalChars    int
	ReturnedChars int
}

// Truncate keeps the first max characters (runes) of s.
func Truncate(s string, max int) Truncated {
	total := utf8.RuneCountInString(s)
	if max <= 0 || total <= max {
		return Truncated{Text: s, TotalChars: total, ReturnedChars: total}
	}
	cut := 0
	for i := range s {
		if cut == max {
			return Truncated{Text: s[:i], Truncated: true, TotalChars: total, ReturnedChars: max}
		}
		cut++
	}
	return Truncated{Text: s, TotalChars: total, ReturnedChars: total}
}
