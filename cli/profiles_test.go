package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, after replacing root (a temp dir)
// with $ROOT; -update rewrites the file.
func golden(t *testing.T, name, root, got string) {
	t.Helper()
	got = strings.ReplaceAll(got, root, "$ROOT")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./client -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestProfilesCommandGolden(t *testing.T) {
	root := t.TempDir()
	agentDir := filepath.Join(root, "agent")
	project := filepath.Join(root, "repo")
	write := func(dir, name, src string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(agentDir, "agent-profiles"), "code-reviewer.md",
		"---\nname: code-reviewer\ndescription: Strict reviews\nmodel: anthropic/claude-sonnet-4-5:high\ntools: read,grep\napiKey: sk-never-listed-0123456789\n---\nYou review.\n")
	write(filepath.Join(project, ".pi", "agents"), "scout.md", "---\nname: scout\ndescription: Project scout\nreadonly: true\nfinalize: false\n---\nLook around.\n")
	write(filepath.Join(project, ".pi", "agents"), "broken.md", "---\nname: broken\napproved_tools: [read]\ndenied_tools: [bash]\n---\n")
	write(filepath.Join(project, ".pi", "agents"), "hidden.md", "---\nname: hidden\ninternal: true\n---\n")
	t.Setenv("PI_CODING_AGENT_DIR", agentDir)

	tests := []struct {
		golden string
		args   []string
	}{
		{"profiles.txt", []string{"--cwd", project}},
		{"profiles.json", []string{"--cwd", project, "--json"}},
		{"profiles-internal.txt", []string{"--cwd", project, "--internal"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := profilesMain(tt.args, &out, &errOut); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.String(), "sk-never-listed") {
				t.Fatal("an apiKey was listed")
			}
			golden(t, tt.golden, root, out.String())
		})
	}
}

// TestProfilesCommandFailures: under --json a failure of `subagents
// profiles` is an envelope with its code, as for every other verb; without
// it, the error alone.
func TestProfilesCommandFailures(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		wantEnvelope bool
	}{
		{"--json", []string{"--json", "--bogus"}, true},
		{"text", []string{"--bogus"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := profilesMain(tt.args, &out, &errOut)
			if err == nil {
				t.Fatal("an unknown flag was accepted")
			}
			envelope := strings.Contains(out.String(), `"code": "INVALID_INPUT"`) && strings.Contains(out.String(), `"op": "profiles"`)
			if envelope != tt.wantEnvelope {
				t.Fatalf("envelope on stdout: %v, want %v:\n%s", envelope, tt.wantEnvelope, out.String())
			}
		})
	}
}
