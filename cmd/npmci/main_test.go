package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ebadengine is npm's warning for one package, as npm 11 prints it on Node 20.
func ebadengine(pkg, required string) string {
	return "npm warn EBADENGINE Unsupported engine {\n" +
		"npm warn EBADENGINE   package: '" + pkg + "',\n" +
		"npm warn EBADENGINE   required: { node: '" + required + "' },\n" +
		"npm warn EBADENGINE   current: { node: 'v20.20.2', npm: '11.19.1' }\n" +
		"npm warn EBADENGINE }\n"
}

// fakeTree is a folder whose node_modules/.bin/node answers version (none
// when version is ""), and a fake npm that prints out to stderr and exits
// with code.
func fakeTree(t *testing.T, version, out string, code int) (dir, npm string) {
	t.Helper()
	dir = t.TempDir()
	if version != "" {
		bin := filepath.Join(dir, "node_modules", ".bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "node"), []byte("#!/bin/sh\necho "+version+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "npm-output"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	npm = filepath.Join(dir, "fake-npm")
	script := "#!/bin/sh\ncat npm-output >&2\necho 'added 122 packages in 17s'\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(npm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, npm
}

func TestRunFiltersHarmlessEngineWarnings(t *testing.T) {
	realWarning := "npm warn deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported"
	npmOut := ebadengine("@earendil-works/pi-coding-agent@0.87.1", ">=22.19.0") +
		realWarning + "\n" +
		ebadengine("chalk@6.0.0", ">=22") +
		ebadengine("future@1.0.0", ">=24.0.0") +
		ebadengine("odd@1.0.0", "^22.0.0")
	for _, tc := range []struct {
		name      string
		version   string
		code      int
		harmless  int      // warnings summed up in the one line, 0 for none
		verbatim  []string // packages whose warning stays as npm wrote it
		wantExit  int
		wantLines int // EBADENGINE lines left
	}{
		{name: "node 22 beside", version: "v22.23.3", harmless: 2, verbatim: []string{"future@1.0.0", "odd@1.0.0"}, wantLines: 10},
		{name: "npm failed", version: "v22.23.3", code: 3, verbatim: []string{"pi-coding-agent", "chalk", "future", "odd"}, wantExit: 3, wantLines: 20},
		{name: "no node beside", verbatim: []string{"pi-coding-agent", "chalk", "future", "odd"}, wantLines: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, npm := fakeTree(t, tc.version, npmOut, tc.code)
			var out, errOut bytes.Buffer
			if got := run(dir, []string{npm, "ci"}, &out, &errOut); got != tc.wantExit {
				t.Fatalf("exit %d, want %d\n%s%s", got, tc.wantExit, out.String(), errOut.String())
			}
			s := out.String()
			if !strings.Contains(s, realWarning+"\n") || !strings.Contains(s, "added 122 packages") {
				t.Fatalf("npm's other lines are missing:\n%s", s)
			}
			if n := strings.Count(s, "npm warn EBADENGINE"); n != tc.wantLines {
				t.Fatalf("%d EBADENGINE lines left, want %d:\n%s", n, tc.wantLines, s)
			}
			for _, pkg := range tc.verbatim {
				if !strings.Contains(s, "package: '"+pkg) && !strings.Contains(s, pkg) {
					t.Fatalf("the warning of %s is gone:\n%s", pkg, s)
				}
			}
			summary := grepLine(s, "harmless")
			if tc.harmless == 0 {
				if summary != "" {
					t.Fatalf("a summary though nothing was judged harmless: %s", summary)
				}
				return
			}
			for _, want := range []string{"npm ci: 2 EBADENGINE warnings", ">=22.19.0, >=22", "node is v20.20.2", "Node v22.23.3", filepath.Join(dir, "node_modules", ".bin", "node")} {
				if !strings.Contains(summary, want) {
					t.Fatalf("summary %q lacks %q", summary, want)
				}
			}
		})
	}
}

func TestRunCannotStart(t *testing.T) {
	var out, errOut bytes.Buffer
	if got := run(t.TempDir(), []string{filepath.Join(t.TempDir(), "no-npm")}, &out, &errOut); got != 2 || !strings.Contains(errOut.String(), "no-npm") {
		t.Fatalf("exit %d, stderr %q", got, errOut.String())
	}
}

func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
