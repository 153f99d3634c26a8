package doccheck

import (
	"regexp"
	"strings"
	"unicode"
)

// A Doc is one markdown file split into what GitHub renders as code and
// what it renders as text. Line numbers count from 1.
type Doc struct {
	lines []string
	// fenced[i]: line i+1 is inside a fenced code block (its fences too).
	fenced []bool
	// prose is the text outside fenced blocks with every code span's
	// content blanked (same length, newlines kept), so links and headings
	// are found where GitHub finds them and nowhere else.
	prose []string
	// spans are the code spans outside fenced blocks: content and line.
	spans []Ref
}

// A Ref is a link's target, or a make target, and the line it is on.
type Ref struct {
	Line   int
	Target string
}

var fence = regexp.MustCompile("^ {0,3}(```+|~~~+)")

// Parse splits src into lines, marks fenced code blocks and blanks code
// spans in the rest.
func Parse(src string) *Doc {
	d := &Doc{lines: strings.Split(src, "\n")}
	d.fenced = make([]bool, len(d.lines))
	open := ""
	for i, l := range d.lines {
		m := fence.FindStringSubmatch(l)
		switch {
		case open == "" && m != nil:
			open = m[1][:1]
			d.fenced[i] = true
		case open != "":
			d.fenced[i] = true
			// A closing fence is the same character, at least as long, and
			// nothing after it; the opening length is not tracked because
			// these docs never nest fences.
			if m != nil && strings.HasPrefix(m[1], open) && strings.TrimSpace(l[len(m[0]):]) == "" {
				open = ""
			}
		}
	}
	d.prose, d.spans = blankCodeSpans(d.lines, d.fenced)
	return d
}

// blankCodeSpans returns the lines with fenced lines emptied and every code
// span (backticks included) replaced by spaces, and the spans' contents with
// the lines they start on. A code span may run over several lines of one
// paragraph, never past a blank line.
func blankCodeSpans(lines []string, fenced []bool) ([]string, []Ref) {
	out := make([]string, len(lines))
	var spans []Ref
	start := 0
	flush := func(end int) { // lines[start:end] is one run of prose lines
		if start >= end {
			return
		}
		para := []rune(strings.Join(lines[start:end], "\n"))
		for _, s := range blankSpans(para) {
			s.Line += start + 1
			spans = append(spans, s)
		}
		copy(out[start:end], strings.Split(string(para), "\n"))
	}
	for i, l := range lines {
		if fenced[i] || strings.TrimSpace(l) == "" {
			flush(i)
			start = i + 1
		}
	}
	flush(len(lines))
	return out, spans
}

// blankSpans blanks, in place, each run of n backticks, the next run of
// exactly n backticks and what is between (CommonMark's code span), and
// returns each span's content with its line within p, counted from 0. A
// run with no partner is literal text.
func blankSpans(p []rune) []Ref {
	var spans []Ref
	for i := 0; i < len(p); {
		if p[i] != '`' {
			i++
			continue
		}
		n := run(p, i)
		end := -1
		for j := i + n; j < len(p); {
			if p[j] != '`' {
				j++
				continue
			}
			m := run(p, j)
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		content := strings.ReplaceAll(string(p[i+n:end]), "\n", " ")
		spans = append(spans, Ref{Line: strings.Count(string(p[:i]), "\n"), Target: content})
		for k := i; k < end+n; k++ {
			if p[k] != '\n' {
				p[k] = ' '
			}
		}
		i = end + n
	}
	return spans
}

func run(p []rune, i int) int {
	n := 0
	for i+n < len(p) && p[i+n] == '`' {
		n++
	}
	return n
}

// Lines is the number of lines.
func (d *Doc) Lines() int { return len(d.lines) }

var atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)

// A Heading is an ATX heading ("## Title"): its level, its text as written
// and its line. Setext headings (a line of === or --- under text) are not
// read: these docs do not use them.
type Heading struct {
	Level int
	Text  string
	Line  int
}

// Headings lists the document's headings in order.
func (d *Doc) Headings() []Heading {
	var hs []Heading
	for i, l := range d.lines {
		if d.fenced[i] {
			continue
		}
		if m := atxHeading.FindStringSubmatch(l); m != nil {
			hs = append(hs, Heading{Level: len(m[1]), Text: m[2], Line: i + 1})
		}
	}
	return hs
}

// Anchors is the set of fragments GitHub gives the document's headings:
// each heading's slug, and slug-N for its N-th repetition.
func (d *Doc) Anchors() map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, h := range d.Headings() {
		s := Slug(h.Text)
		a := s
		if n := seen[s]; n > 0 {
			a = s + "-" + itoa(n)
		}
		seen[s]++
		out[a] = true
	}
	return out
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

var inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// Slug is GitHub's anchor for a heading written as text: the rendered text
// (code spans keep their content, links their text, emphasis stars go),
// lower-cased, every character that is not a letter, digit, mark, space,
// hyphen or underscore dropped, and each space made a hyphen.
func Slug(heading string) string {
	text := inlineLink.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	// The target of [text](target "title") or ![alt](target), in prose.
	linkTarget = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// A reference definition: [label]: target.
	refDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
)

// Links lists the targets of the document's inline links, images and
// reference definitions, as written, outside code.
func (d *Doc) Links() []Ref {
	var out []Ref
	for i, l := range d.prose {
		for _, m := range linkTarget.FindAllStringSubmatch(l, -1) {
			out = append(out, Ref{Line: i + 1, Target: m[1]})
		}
		if m := refDef.FindStringSubmatch(l); m != nil {
			out = append(out, Ref{Line: i + 1, Target: m[1]})
		}
	}
	return out
}

// makeCommand is `make` as a command, with its first target: at the start
// of a shell line (after an optional prompt) or after a shell separator.
var makeCommand = regexp.MustCompile(`(?:^|&&|\|\||[;|(])\s*(?:\$\s+)?make\s+(?:[A-Z_]+=\S*\s+)*([a-z][A-Za-z0-9_.-]*)`)

// MakeTargets lists the make targets the document tells a user to run: in
// a fenced block's shell lines (comments left out), and in a code span
// that starts with `make`. Prose ("make sure") is never a command.
func (d *Doc) MakeTargets() []Ref {
	var out []Ref
	for i, l := range d.lines {
		if !d.fenced[i] || fence.MatchString(l) {
			continue
		}
		for _, m := range makeCommand.FindAllStringSubmatch(stripComment(l), -1) {
			out = append(out, Ref{Line: i + 1, Target: m[1]})
		}
	}
	for _, s := range d.spans {
		if m := makeCommand.FindStringSubmatch(s.Target); m != nil && strings.HasPrefix(strings.TrimSpace(s.Target), "make ") {
			out = append(out, Ref{Line: s.Line, Target: m[1]})
		}
	}
	return out
}

// stripComment drops a shell comment: a # at the line's start or after a
// blank, outside quotes.
func stripComment(l string) string {
	quote := rune(0)
	prev := ' '
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return l[:i]
		}
		prev = r
	}
	return l
}

// Section is the text of the first heading whose text is title, up to the
// next heading of the same or a higher level, as a Doc of its own, and the
// line the heading is on (0 when there is none).
func (d *Doc) Section(title string) (*Doc, int) {
	hs := d.Headings()
	for k, h := range hs {
		if h.Text != title {
			continue
		}
		end := len(d.lines)
		for _, next := range hs[k+1:] {
			if next.Level <= h.Level {
				end = next.Line - 1
				break
			}
		}
		return Parse(strings.Join(d.lines[h.Line-1:end], "\n")), h.Line
	}
	return nil, 0
}

// Line is the text of line n.
func (d *Doc) Line(n int) string { return d.lines[n-1] }
