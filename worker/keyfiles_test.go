package worker

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

func TestKeyFileEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	anthropic := write("anthropic", "sk-ant-123\n")
	empty := write("empty", "")
	tests := []struct {
		name    string
		environ []string
		want    []string
		code    errcode.Code
	}{
		{"a key file", []string{"ANTHROPIC_API_KEY_FILE=" + anthropic}, []string{"ANTHROPIC_API_KEY=sk-ant-123"}, ""},
		{"an empty file is no key", []string{"OPENAI_API_KEY_FILE=" + empty}, nil, ""},
		{"a key of a service that is no model provider stays the worker's", []string{"SENDGRID_API_KEY_FILE=" + anthropic}, nil, ""},
		{"the variable itself wins", []string{"ANTHROPIC_API_KEY=env", "ANTHROPIC_API_KEY_FILE=" + anthropic}, nil, ""},
		{"other _FILE variables are not read", []string{"POSTGRES_PASSWORD_FILE=" + anthropic, "DB_FILE=" + anthropic}, nil, ""},
		{"a missing file fails", []string{"ANTHROPIC_API_KEY_FILE=" + filepath.Join(dir, "nope")}, nil, errcode.InvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := KeyFileEnv(tt.environ)
			if tt.code != "" {
				if !errcode.Is(err, tt.code) {
					t.Fatalf("error %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
