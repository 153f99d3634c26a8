package profiles

import "testing"

// TestErrorLine: each kind of mistake Parse finds in a profile is placed
// on the file's line that holds it (the frontmatter starts on line 2).
func TestErrorLine(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"unknown field", "---\nname: a\ncolour: red\n---\nbody\n", 3},
		{"bad YAML", "---\nname: a\ndescription: x\n  tools: read\n---\nbody\n", 4},
		{"list of the wrong kind", "---\nname: a\ntools: {a: 1}\n---\nbody\n", 3},
		{"no end", "---\nname: a\n", 1},
		{"no name", "---\ndescription: x\n---\nbody\n", 1},
		{"bad name", "---\ndescription: x\nname: a b\n---\nbody\n", 3},
		{"bad thinking level", "---\nname: a\nthinkingLevel: loud\n---\n", 3},
		{"bad model", "---\nname: a\nmodel: /x\n---\n", 3},
		{"bad fallback", "---\nname: a\nmodel: a/b\nfallbackModels: [\"/x\"]\n---\n", 4},
		{"tools and excludeTools", "---\nname: a\ntools: read\nexcludeTools: bash\n---\n", 4},
		{"whitelist and blacklist", "---\nname: a\nallowed_tools: read\ndenied_tools: bash\n---\n", 4},
		{"skills and noSkills", "---\nname: a\nloadSkills: x\nnoSkills: true\n---\n", 4},
		{"negative maxDepth", "---\nname: a\nmaxDepth: -1\n---\n", 3},
		{"unsafe extraArgs", "---\nname: a\nextraArgs: [\"; rm -rf /\"]\n---\n", 3},
		{"CRLF and a BOM", "\ufeff---\r\nname: a\r\n\r\ncolour: red\r\n---\r\n", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "p.md", ScopeProject)
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			if got := ErrorLine([]byte(tt.src), err); got != tt.want {
				t.Fatalf("line %d, want %d (error: %v)", got, tt.want, err)
			}
		})
	}
	if got := ErrorLine([]byte("x"), nil); got != 0 {
		t.Fatalf("no error: line %d", got)
	}
}
