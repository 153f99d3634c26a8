package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/profiles"
)

func TestCredentialsFind(t *testing.T) {
	agent := t.TempDir()
	write(t, agent, map[string]string{
		"auth.json":   `{"anthropic": {"type": "api_key", "key": "sk-ant-secret"}}`,
		"models.json": `{"providers": {"local": {"apiKey": "ollama"}, "corp": {"apiKey": "${CORP_KEY}"}, "vault": {"apiKey": "!pass show key"}, "bare": {"baseUrl": "http://x"}}}`,
	})
	env := map[string]string{"OPENAI_API_KEY": "sk-openai-secret", "AWS_PROFILE": "dev"}
	creds := readCredentials(agent, os.ReadFile, func(k string) string { return env[k] }, func(string) bool { return false }, "/home/u")
	tests := []struct {
		provider, source, missing string
	}{
		{"anthropic", "auth.json", ""},
		{"openai", "$OPENAI_API_KEY", ""},
		{"local", "models.json", ""},
		{"vault", "a command in models.json (not run here)", ""},
		{"corp", "", "models.json's provider corp reads $CORP_KEY, which is not set"},
		{"bare", "", "models.json's provider bare has no apiKey"},
		{"amazon-bedrock", "the AWS credentials", ""},
		{"google", "", "no key for google: $GEMINI_API_KEY is not set"},
		{"google-vertex", "", "no key for google-vertex: $GOOGLE_CLOUD_API_KEY"},
		{"nonesuch", "", "no key for nonesuch in auth.json, models.json or the environment"},
	}
	for _, tt := range tests {
		src, missing := creds.find(tt.provider)
		if src != tt.source || !strings.Contains(missing, tt.missing) || (tt.missing == "") != (missing == "") {
			t.Errorf("%s: source %q missing %q, want %q %q", tt.provider, src, missing, tt.source, tt.missing)
		}
		if strings.Contains(src+missing, "secret") {
			t.Errorf("%s: a key is named: %q %q", tt.provider, src, missing)
		}
	}
}

func TestModelUses(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		".pi/agents/a.md": "---\nname: a\nmodel: anthropic/claude-x\nfallbackModels: openai/gpt-x\n---\n",
		".pi/agents/b.md": "---\nname: b\nmodel: gpt-bare\n---\n",
		".pi/agents/c.md": "---\nname: c\n---\n",
	})
	// The user's own project, trusted by the settings' variable.
	set, err := profiles.Load(profiles.Options{Cwd: root, Getenv: func(k string) string {
		if k == "SUBAGENTS_TRUSTED_PROJECTS" {
			return root
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	var list []*profiles.Profile
	for _, name := range []string{"a", "b", "c"} {
		p, err := set.Lookup(name, true)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, p)
	}
	uses, unresolved := modelUses(list, map[string]string{"c": "mistral/m-large"}, "google")
	var got []string
	for _, u := range uses {
		got = append(got, u.Provider+" "+u.By)
	}
	want := "anthropic profile a|openai profile a (fallback)|mistral profile c"
	if strings.Join(got, "|") != want || len(unresolved) != 1 || unresolved[0] != "b" {
		t.Fatalf("uses %q unresolved %v, want %q [b]", strings.Join(got, "|"), unresolved, want)
	}
	uses, _ = modelUses(list[2:], nil, "google")
	if len(uses) != 1 || uses[0].Provider != "google" || !strings.Contains(uses[0].By, "pi's default") {
		t.Fatalf("a profile with no model runs on pi's default: %+v", uses)
	}
}

func TestCheckModelKeys(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-x"}
	creds := piCredentials{auth: map[string]bool{}, custom: map[string]string{}, getenv: func(k string) string { return env[k] }, fileExists: func(string) bool { return false }}
	none := piCredentials{auth: map[string]bool{}, custom: map[string]string{}, getenv: func(string) string { return "" }, fileExists: func(string) bool { return false }}
	tests := []struct {
		name   string
		uses   []modelUse
		creds  piCredentials
		status Status
		has    string
		fix    string
	}{
		{"keyed", []modelUse{{Provider: "anthropic", By: "profile a"}}, creds, OK, "anthropic from $ANTHROPIC_API_KEY", ""},
		{"a provider without", []modelUse{{Provider: "anthropic", By: "profile a"}, {Provider: "openai", By: "profile b"}, {Provider: "openai", By: "profile c"}}, creds, Fail,
			"no key for openai: $OPENAI_API_KEY is not set and auth.json holds none (for profile b, profile c)", "set OPENAI_API_KEY where the service runs, or run /login in pi and choose openai"},
		// A fallback without a key fails only when the main model fails.
		{"a fallback without", []modelUse{{Provider: "anthropic", By: "profile a"}, {Provider: "openai", By: "profile a (fallback)", Fallback: true}}, creds, Warn,
			"no key for openai: $OPENAI_API_KEY is not set and auth.json holds none (for profile a (fallback)): the runs work on their profiles' own models; only a fallback to these would fail",
			"set OPENAI_API_KEY"},
		{"a provider one profile falls back to and another runs on", []modelUse{{Provider: "openai", By: "profile a (fallback)", Fallback: true}, {Provider: "openai", By: "profile b"}}, creds, Fail,
			"no key for openai: $OPENAI_API_KEY is not set and auth.json holds none (for profile a (fallback), profile b)", "set OPENAI_API_KEY"},
		{"a main and a fallback without", []modelUse{{Provider: "google", By: "profile a"}, {Provider: "openai", By: "profile a (fallback)", Fallback: true}}, creds, Fail,
			"no key for google: $GEMINI_API_KEY is not set and auth.json holds none (for profile a); and for fallbacks only: no key for openai", "set GEMINI_API_KEY"},
		{"nothing named, some key", nil, creds, OK, "pi picks one", ""},
		{"nothing named, no key at all", nil, none, Fail, "no provider key", "/login"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkModelKeys(tt.uses, nil, tt.creds, "/agent")
			if r.Status != tt.status || !strings.Contains(r.Verdict, tt.has) || !strings.Contains(r.Fix, tt.fix) {
				t.Fatalf("%+v", r)
			}
			if strings.Contains(r.Verdict+r.Fix, "sk-x") {
				t.Fatal("the key is printed")
			}
		})
	}
}

func TestDefaultProvider(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{"agent/settings.json": `{"defaultProvider": "anthropic"}`})
	if got := defaultProvider(filepath.Join(root, "agent"), filepath.Join(root, "work"), os.ReadFile); got != "anthropic" {
		t.Fatalf("global: %q", got)
	}
	write(t, root, map[string]string{"work/.pi/settings.json": `{"defaultProvider": "openai"}`})
	if got := defaultProvider(filepath.Join(root, "agent"), filepath.Join(root, "work"), os.ReadFile); got != "openai" {
		t.Fatalf("the project's: %q", got)
	}
}
