package dev

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tourfiles "github.com/durable-pi/subagents/examples/tour"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// scriptMarker is a [[script:NAME]] in a prompt (the tour names its scripts in lower case; a placeholder NAME in a comment is none).
var scriptMarker = regexp.MustCompile(`\[\[script:([a-z0-9_.{}\-]+)\]\]`)

// TestTourScriptsFitTheTour: every script of examples/tour reads, every
// [[script:NAME]] the tour's files and steps give names one of them (a
// plan's {round} taken as its rounds 1 and 2), and every script is used.
func TestTourScriptsFitTheTour(t *testing.T) {
	scripts, err := readScripts(tourfiles.Files, "scripts")
	if err != nil {
		t.Fatal(err)
	}
	if len(scripts) == 0 {
		t.Fatal("no scripts in examples/tour/scripts")
	}
	var texts []string
	err = fs.WalkDir(tourfiles.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(tourfiles.Files, p)
		texts = append(texts, string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The prompts of the steps' own commands.
	src, err := os.ReadFile("tour_steps.go")
	if err != nil {
		t.Fatal(err)
	}
	texts = append(texts, string(src))
	used := map[string]bool{}
	for _, text := range texts {
		for _, m := range scriptMarker.FindAllStringSubmatch(text, -1) {
			names := []string{m[1]}
			if strings.Contains(m[1], "{round}") {
				names = []string{strings.ReplaceAll(m[1], "{round}", "1"), strings.ReplaceAll(m[1], "{round}", "2")}
			}
			for _, n := range names {
				if _, ok := scripts[n]; !ok {
					t.Errorf("[[script:%s]] names no file of examples/tour/scripts", n)
				}
				used[n] = true
			}
		}
	}
	for name := range scripts {
		if !used[name] {
			t.Errorf("examples/tour/scripts/%s.json is used by no prompt of the tour", name)
		}
	}
}

// TestParseScript: a script file is a JSON array of steps; anything else,
// a misspelt field included, is refused.
func TestParseScript(t *testing.T) {
	for _, tt := range []struct {
		name, text, errWant string
		steps               int
	}{
		{name: "steps", text: `[{"text": "hi"}, {"tool_calls": [{"name": "ls", "arguments": "{}"}], "delay_ms": 5}]`, steps: 2},
		{name: "an object", text: `{"text": "hi"}`, errWant: "want a JSON array of steps"},
		{name: "a misspelt field", text: `[{"tool_call": []}]`, errWant: `unknown field "tool_call"`},
		{name: "no steps", text: `[]`, errWant: "no steps"},
		{name: "two values", text: `[{"text": "a"}] [{"text": "b"}]`, errWant: "more than one JSON value"},
		{name: "not JSON", text: `[{"text": }]`, errWant: "want a JSON array of steps"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			steps, err := scriptedmodel.ParseScript([]byte(tt.text))
			if tt.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errWant) {
					t.Fatalf("err = %v, want %q", err, tt.errWant)
				}
				return
			}
			if err != nil || len(steps) != tt.steps {
				t.Fatalf("%d steps, err %v", len(steps), err)
			}
		})
	}
}

// TestReadScriptsNamesTheFile: a bad script is reported with its file.
func TestReadScriptsNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"good.json": `[{"text": "hi"}]`, "bad.json": `[{"txt": "hi"}]`, "notes.md": "not a script"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := readScripts(os.DirFS(dir), ".")
	if errcode.CodeOf(err) != errcode.InvalidInput || !strings.Contains(err.Error(), "script bad (bad.json)") {
		t.Fatalf("err = %v", err)
	}
}

// TestWatchScripts: a script written into the folder while the tour's
// model runs is answered, without a restart; a file that does not read
// keeps the script's last good steps and says so.
func TestWatchScripts(t *testing.T) {
	model, err := scriptedmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = model.Close() }()
	dir := t.TempDir()
	out := &syncWriter{w: &bytes.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { watchScripts(ctx, dir, model, out); close(done) }()
	defer func() { cancel(); <-done }()

	ask := func() int {
		body := `{"model": "scripted-1", "stream": true, "messages": [{"role": "user", "content": "[[script:mine]] hi"}]}`
		resp, err := http.Post(model.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for ask() != want {
			if time.Now().After(deadline) {
				t.Fatalf("the model never answered %d", want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if got := ask(); got != http.StatusUnprocessableEntity {
		t.Fatalf("before the file: %d", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.json"), []byte(`[{"text": "mine"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(http.StatusOK)
	// A later write that does not read: the script stays, and the
	// message says so. The mtime moves on for a coarse file system.
	path := filepath.Join(dir, "mine.json")
	if err := os.WriteFile(path, []byte(`[{"txt": "mine"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "not read, its last good steps stay") {
		if time.Now().After(deadline) {
			t.Fatalf("no message about the bad file: %q", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := ask(); got != http.StatusOK {
		t.Fatalf("after a bad write: %d", got)
	}
}

// TestShellQuote: what the tour prints is one word per argument for a
// POSIX shell, and as readable as it can be.
func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"run":                      "run",
		"../plan.yaml":             "../plan.yaml",
		"01a2-ff":                  "01a2-ff",
		"[[script:delegate]] Why?": `"[[script:delegate]] Why?"`,
		"it's":                     `"it's"`,
		"costs $5":                 `'costs $5'`,
		`say "hi" and it's done`:   `'say "hi" and it'\''s done'`,
		"":                         `""`,
		"/tmp/a b":                 `"/tmp/a b"`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestFindExtension: the tour finds the extension where the service finds
// it (SUBAGENTS_EXTENSION_DIR, the source tree) and where npm puts it
// beside the platform package, and nowhere else.
func TestFindExtension(t *testing.T) {
	root := t.TempDir()
	ext := func(dir string) string {
		for _, f := range []string{"src/nested.ts", "dist/extension.js"} {
			p := filepath.Join(root, dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(root, dir)
	}
	tree := ext("clone/extension")
	hoisted := ext("a/node_modules/@durable-pi/subagents")
	nested := ext("b/node_modules/@durable-pi/subagents")
	given := ext("given")
	half := filepath.Join(root, "half")
	if err := os.MkdirAll(filepath.Join(half, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, "src", "nested.ts"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, env, exe, want string
	}{
		{name: "the source tree", exe: filepath.Join(root, "clone/bin/subagents-dev"), want: tree},
		{name: "SUBAGENTS_EXTENSION_DIR first", env: given, exe: filepath.Join(root, "clone/bin/subagents-dev"), want: given},
		{name: "npm, hoisted", exe: filepath.Join(root, "a/node_modules/@durable-pi/subagents-linux-x64/bin/subagents-dev"), want: hoisted},
		{name: "npm, nested", exe: filepath.Join(root, "b/node_modules/@durable-pi/subagents/node_modules/@durable-pi/subagents-linux-x64/bin/subagents-dev"), want: nested},
		{name: "go install", exe: filepath.Join(root, "gobin/subagents-dev")},
		{name: "no compiled extension", env: half, exe: filepath.Join(root, "gobin/subagents-dev")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dirs := extensionDirs(tt.env, tt.exe)
			if got := findExtension(dirs); got != tt.want {
				t.Fatalf("found %q in %v, want %q", got, dirs, tt.want)
			}
			// What a skipped step names: only places that fit the binary.
			for _, d := range dirs {
				if !strings.HasPrefix(d, root) {
					t.Errorf("looked in %s, outside the binary's layout: %v", d, dirs)
				}
			}
		})
	}
}

// TestTourDir: --dir is a new or empty folder; one with files (an earlier
// tour's database and schedules) is refused.
func TestTourDir(t *testing.T) {
	empty, full := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "temporal.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{empty, filepath.Join(empty, "new")} {
		if got, err := tourDir(dir); err != nil || got != dir {
			t.Fatalf("tourDir(%s) = %s, %v", dir, got, err)
		}
	}
	if _, err := tourDir(full); errcode.CodeOf(err) != errcode.InvalidInput || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("tourDir of a folder with files: %v", err)
	}
}

// TestDemoRefusesWhatItWouldIgnore: `subagents demo tour` (a word, not the
// flag) and --dir without --tour were ignored, running the plain demo; they
// are refused before anything starts.
func TestDemoRefusesWhatItWouldIgnore(t *testing.T) {
	for _, args := range [][]string{{"tour"}, {"--dir", t.TempDir()}} {
		var stdout, stderr bytes.Buffer
		err := DemoMain(context.Background(), args, &stdout, &stderr)
		if errcode.CodeOf(err) != errcode.InvalidInput || errors.Is(err, context.Canceled) {
			t.Fatalf("demo %v: %v", args, err)
		}
		if stdout.Len() > 0 {
			t.Fatalf("demo %v started: %s", args, stdout.String())
		}
	}
}

// syncWriter is a writer a goroutine writes while the test reads.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// TestNestedSkippedWithoutTheExtension: with no extension found the nested
// step runs nothing, says where it looked and how to point it there, and
// prints no command that could not work.
func TestNestedSkippedWithoutTheExtension(t *testing.T) {
	r := (&tour{extDirs: []string{"/opt/x/extension"}}).nested(context.Background())
	if r.err != nil || !strings.Contains(r.skipped, "/opt/x/extension") || !strings.Contains(r.skipped, "SUBAGENTS_EXTENSION_DIR") || len(r.try) > 0 {
		t.Fatalf("%+v", r)
	}
}
