package doccheck

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// root is the repository, two folders above this package.
const root = "../.."

// firstScreen is how many README lines a newcomer sees before scrolling
// (a laptop terminal or a browser window): the first delegation must be
// within them.
const firstScreen = 60

// docs reads README.md, BENCHMARKS.md (which make bench writes, and the
// docs link into) and every docs/*.md, by path from the root.
func docs(t *testing.T) map[string]*Doc {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Doc{}
	for _, p := range append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md")}, paths...) {
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = read(t, rel)
	}
	return out
}

// sorted is the paths of docs in order, so failures read the same each run.
func sorted(docs map[string]*Doc) []string {
	return slices.Sorted(maps.Keys(docs))
}

func read(t *testing.T, rel string) *Doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return Parse(string(b))
}

var (
	scheme     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	lineAnchor = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// TestRelativeLinksResolve: every relative link in the README,
// BENCHMARKS.md and docs/ reaches a file or folder of the repository, and a
// #fragment on a markdown file names one of its headings as GitHub anchors
// them.
func TestRelativeLinksResolve(t *testing.T) {
	all := docs(t)
	anchors := map[string]map[string]bool{} // by path from the root
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		d, ok := all[rel]
		if !ok {
			d = read(t, rel)
		}
		anchors[rel] = d.Anchors()
		return anchors[rel]
	}
	checked := 0
	for _, file := range sorted(all) {
		d := all[file]
		for _, l := range d.Links() {
			if l.Target == "" || scheme.MatchString(l.Target) || strings.HasPrefix(l.Target, "//") {
				continue
			}
			checked++
			where := fmt.Sprintf("%s:%d: link %q", file, l.Line, l.Target)
			path, frag, _ := strings.Cut(l.Target, "#")
			if p, err := url.PathUnescape(path); err == nil {
				path = p
			}
			target := file
			if path != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
				if target == ".." || strings.HasPrefix(target, "../") {
					t.Errorf("%s: leaves the repository", where)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					t.Errorf("%s: no such file (%s)", where, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				if !lineAnchor.MatchString(frag) {
					t.Errorf("%s: #%s is no heading of a markdown file nor a line", where, frag)
				}
				continue
			}
			if !anchorsOf(target)[frag] {
				t.Errorf("%s: %s has no heading whose anchor is #%s", where, target, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the parser or the paths are wrong")
	}
}

// TestMakeTargetsExist: every `make X` the README and docs/ tell a user to
// run is a target of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := MakefileTargets(string(b))
	checked := 0
	all := docs(t)
	for _, file := range sorted(all) {
		for _, m := range all[file].MakeTargets() {
			checked++
			if !targets[m.Target] {
				t.Errorf("%s:%d: `make %s`: the Makefile has no target %q", file, m.Line, m.Target, m.Target)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no make command found: the parser or the paths are wrong")
	}
}

// TestReadmeOpensWithTheFirstDelegation: a newcomer reaches a working
// delegation from pi within the README's first screen: the heading, the
// make target that sets pi up, and bin/pi itself.
func TestReadmeOpensWithTheFirstDelegation(t *testing.T) {
	readme := read(t, "README.md")
	sec, line := readme.Section("The first delegation from pi")
	if sec == nil {
		t.Fatal(`README has no section "The first delegation from pi"`)
	}
	if line > firstScreen {
		t.Errorf(`README's "The first delegation from pi" starts on line %d, past the first %d`, line, firstScreen)
	}
	tests := []struct {
		what string
		on   func(d *Doc, n int) bool
	}{
		{"`make pi-extension`", func(d *Doc, n int) bool {
			return slices.ContainsFunc(d.MakeTargets(), func(r Ref) bool { return r.Line == n && r.Target == "pi-extension" })
		}},
		{"a command line that runs bin/pi", func(d *Doc, n int) bool {
			return d.fenced[n-1] && strings.HasPrefix(strings.TrimSpace(d.Line(n)), "bin/pi")
		}},
	}
	for _, tt := range tests {
		found := 0
		for n := 1; n <= min(firstScreen, readme.Lines()); n++ {
			if tt.on(readme, n) {
				found = n
				break
			}
		}
		if found == 0 {
			t.Errorf("README's first %d lines have no %s", firstScreen, tt.what)
		}
	}
}

// TestTwoCommandsAreTwo: "The two commands" names exactly two make
// commands, `make run` and `make test` (the Makefile's header says the same).
func TestTwoCommandsAreTwo(t *testing.T) {
	sec, _ := read(t, "README.md").Section("The two commands")
	if sec == nil {
		t.Fatal(`README has no section "The two commands"`)
	}
	var got []string
	for _, m := range sec.MakeTargets() {
		if !slices.Contains(got, m.Target) {
			got = append(got, m.Target)
		}
	}
	if want := []string{"run", "test"}; !slices.Equal(got, want) {
		t.Errorf(`"The two commands" names make %v, want exactly %v`, got, want)
	}
}

// TestEveryDocsPageLinkedFromReadme: the README is the way into docs/; a
// page it does not link is a page nobody finds.
func TestEveryDocsPageLinkedFromReadme(t *testing.T) {
	linked := map[string]bool{}
	for _, l := range read(t, "README.md").Links() {
		path, _, _ := strings.Cut(l.Target, "#")
		linked[filepath.ToSlash(filepath.Clean(path))] = true
	}
	for _, file := range sorted(docs(t)) {
		if strings.HasPrefix(file, "docs/") && !linked[file] {
			t.Errorf("README does not link %s", file)
		}
	}
}

// TestStatusGlossary: the README's glossary lists the status vocabulary
// every surface derives from (api.States), in its order, and says what the
// retired waiting_for_input still means.
func TestStatusGlossary(t *testing.T) {
	sec, _ := read(t, "README.md").Section("Statuses")
	if sec == nil {
		t.Fatal(`README has no section "Statuses"`)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\|")
	var got []string
	for n := 1; n <= sec.Lines(); n++ {
		if m := row.FindStringSubmatch(sec.Line(n)); m != nil {
			got = append(got, m[1])
		}
	}
	var want []string
	for _, s := range api.States {
		want = append(want, string(s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("README's status table lists %v, want %v", got, want)
	}
	text := strings.Join(sec.lines, "\n")
	for _, s := range []string{"`" + string(api.StateWaitingForInput) + "` is retired", "open and idle"} {
		if !strings.Contains(text, s) {
			t.Errorf("README's Statuses section does not say %q", s)
		}
	}
}

// TestErrorCodesDocumented: docs/errors.md is where users look a code up;
// each code is there, in errcode's order, with its category.
func TestErrorCodesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "errors.md"))
	if err != nil {
		t.Fatal(err)
	}
	text, last := string(b), 0
	for _, c := range errcode.All() {
		row := fmt.Sprintf("\n| `%s` | %s |", c, c.Category())
		i := strings.Index(text, row)
		if i < 0 {
			t.Errorf("docs/errors.md has no row %q", row)
			continue
		}
		if i < last {
			t.Errorf("docs/errors.md lists %s out of order", c)
		}
		last = i
	}
}
