package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// started is a run of the command in this process.
type started struct {
	url  string // the server's base URL, from what it printed
	out  string // the lines it printed before serving
	err  error  // what run returned, when it did not serve
	stop func()
}

var urlLine = regexp.MustCompile(`^scripted model at (http://\S+/v1) `)

// start runs the command with args until the test ends (or it fails) and
// returns what it printed before serving.
func start(t *testing.T, args ...string) started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw)
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	var st started
	var once sync.Once
	st.stop = func() { once.Do(func() { cancel(); <-done }) }
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				st.err = <-done
				return st
			}
			st.out += line + "\n"
			if m := urlLine.FindStringSubmatch(line); m != nil {
				st.url = m[1]
			}
			// The last line it prints before serving.
			if st.url != "" && !strings.Contains(strings.Join(args, " "), "--agent-dir") || strings.HasPrefix(line, "pi config dir: ") {
				go func() {
					for range lines {
					}
				}()
				t.Cleanup(st.stop)
				return st
			}
		case <-timeout:
			cancel()
			t.Fatalf("scripted-model %v printed %q in 10 s and no address", args, st.out)
		}
	}
}

// ask posts one user message and returns the answer's text (the streamed
// chunks' content put together), or the body of an error.
func ask(t *testing.T, url, prompt string) string {
	t.Helper()
	return chat(t, url, []any{map[string]any{"role": "user", "content": prompt}})
}

// chat posts a conversation and returns the answer's text, or the body of
// an error.
func chat(t *testing.T, url string, messages []any) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "scripted-1", "stream": true, "messages": messages})
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	return text.String()
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestScriptsFolder: --scripts takes a folder of *.json files, one script
// each, named after its file; --default-script names the script of
// conversations with no marker (a script named "default" is that without
// the flag); the file of named scripts still works.
func TestScriptsFolder(t *testing.T) {
	dir := t.TempDir()
	tour := filepath.Join(dir, "tour")
	writeFiles(t, tour, map[string]string{
		"greet.json":   `[{"text":"hello from greet"}]`,
		"default.json": `[{"text":"hello from default"}]`,
		"tour.v2.json": `[{"text":"hello from tour.v2"}]`,
		"README.md":    "not a script",
	})
	file := filepath.Join(dir, "named.json")
	writeFiles(t, dir, map[string]string{"named.json": `{"one":[{"text":"hello from one"}]}`})
	bad := filepath.Join(dir, "bad")
	writeFiles(t, bad, map[string]string{"typo.json": `[{"txet":"hello"}]`})
	empty := filepath.Join(dir, "empty")
	writeFiles(t, empty, map[string]string{"notes.txt": "x"})
	spaced := filepath.Join(dir, "spaced")
	writeFiles(t, spaced, map[string]string{"my tour.json": `[{"text":"x"}]`})

	tests := []struct {
		name    string
		args    []string
		prompts map[string]string // prompt: what the answer holds
		errWant string            // what run's error says, when it must not start
	}{
		{name: "a folder", args: []string{"--scripts", tour}, prompts: map[string]string{
			"[[script:greet]] hi":   "hello from greet",
			"[[script:tour.v2]] hi": "hello from tour.v2",
			"no marker here":        "hello from default",
		}},
		{name: "a folder with --default-script", args: []string{"--scripts", tour, "--default-script", "greet"}, prompts: map[string]string{
			"no marker here":        "hello from greet",
			"[[script:default]] hi": "hello from default",
		}},
		{name: "a file of named scripts", args: []string{"--scripts", file}, prompts: map[string]string{
			"[[script:one]] hi": "hello from one",
			"no marker here":    "--default-script NAME",
		}},
		{name: "a default that is not there", args: []string{"--scripts", file, "--default-script", "tour"}, errWant: `--default-script tour: no script named "tour" in ` + file},
		{name: "a step field that does not exist", args: []string{"--scripts", bad}, errWant: `typo.json: want a JSON array of steps: json: unknown field "txet"`},
		{name: "a folder with no scripts", args: []string{"--scripts", empty}, errWant: "no *.json files"},
		{name: "a file name that is no script name", args: []string{"--scripts", spaced}, errWant: "my tour.json: a script's name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := start(t, tt.args...)
			if tt.errWant != "" {
				if st.err == nil || !strings.Contains(st.err.Error(), tt.errWant) {
					t.Fatalf("run = %v (printed %q), want an error saying %q", st.err, st.out, tt.errWant)
				}
				return
			}
			if st.url == "" {
				t.Fatalf("run = %v, printed %q", st.err, st.out)
			}
			for prompt, want := range tt.prompts {
				if got := ask(t, st.url, prompt); !strings.Contains(got, want) {
					t.Errorf("%q answered %s, want %q in it", prompt, got, want)
				}
			}
		})
	}
}

// TestAgentDirKeepsPackages: the scripted model started again with the
// same --agent-dir (the walkthrough's first step, a day later) keeps the
// extension that `pi install ./extension` added to its settings.json.
func TestAgentDirKeepsPackages(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "demo-agent")
	first := start(t, "--agent-dir", agent)
	if first.url == "" {
		t.Fatalf("run = %v, printed %q", first.err, first.out)
	}
	first.stop()
	// What pi install ./extension does to the dir.
	path := filepath.Join(agent, "settings.json")
	var settings map[string]any
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &settings); err != nil {
		t.Fatal(err)
	}
	settings["packages"] = []string{"/home/you/subagents/extension"}
	b, _ = json.Marshal(settings)
	writeFiles(t, agent, map[string]string{"settings.json": string(b)})

	second := start(t, "--agent-dir", agent)
	if second.url == "" {
		t.Fatalf("run = %v, printed %q", second.err, second.out)
	}
	var again struct {
		Packages     []string `json:"packages"`
		DefaultModel string   `json:"defaultModel"`
	}
	b, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	if len(again.Packages) != 1 || again.Packages[0] != "/home/you/subagents/extension" || again.DefaultModel != "scripted-1" {
		t.Fatalf("settings.json after the second start = %s", b)
	}
	models, err := os.ReadFile(filepath.Join(agent, "models.json"))
	if err != nil || !strings.Contains(string(models), second.url) {
		t.Fatalf("models.json does not point at the second server %s: %s %v", second.url, models, err)
	}
}

// TestDemoPassesOnTheToolResult: the walkthrough's parent (demo.json's
// "demo" script) ends by quoting what its subagent call returned, so its
// last line tells a delegation from none: a pi without the extension gets
// pi's error for a tool it does not have, and says so.
func TestDemoPassesOnTheToolResult(t *testing.T) {
	st := start(t, "--scripts", "demo.json")
	if st.url == "" {
		t.Fatalf("run = %v, printed %q", st.err, st.out)
	}
	for _, result := range []string{
		"**Status:** SUCCESS\n**Session ID:** `0196d5a2-0000-7000-8000-000000000001`\n\n---\n\nworker.toml: heartbeat_interval = \"2s\"",
		"Tool subagent not found",
	} {
		got := chat(t, st.url, []any{
			map[string]any{"role": "user", "content": "[[script:demo]] How often does a child run report its progress here?"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_0_0", "type": "function",
				"function": map[string]any{"name": "subagent", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_0_0", "content": result},
		})
		if !strings.HasSuffix(got, result) {
			t.Errorf("the demo's last answer after the tool result %q is %q: it does not pass the result on", result, got)
		}
	}
}
