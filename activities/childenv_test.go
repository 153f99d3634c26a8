package activities

import (
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

func TestEnvPolicy(t *testing.T) {
	env := []string{
		"PATH=/bin", "HOME=/home/u", "LANG=C.UTF-8", "PI_CODING_AGENT_DIR=/a", "EDITOR=vi",
		"TEMPORAL_API_KEY=eyJ.x.y", "TEMPORAL_ADDRESS=t:7233", "TEMPORAL_TLS_CLIENT_KEY_PATH=/k.pem",
		"DB_PASSWORD_PLAIN=hunter2", "APP_SECRET=x", "GITHUB_TOKEN=ghp_x", "GCP_CREDENTIALS=x", "SSH_PRIVATE=x",
		"DATABASE_URL=postgres://app:pa55@db/x", "SITE_URL=https://example.com/a@b",
		"OPENAI_API_KEY=sk-x", "ANTHROPIC_OAUTH_TOKEN=t", "AWS_SECRET_ACCESS_KEY=a", "HF_TOKEN=h",
		"MY_TOOL_SETTING=1",
	}
	names := func(kvs []string) []string {
		var out []string
		for _, kv := range kvs {
			n, _, _ := strings.Cut(kv, "=")
			out = append(out, n)
		}
		return out
	}
	tests := []struct {
		name   string
		policy EnvPolicy
		want   []string
	}{
		{"default", EnvPolicy{}, []string{"PATH", "HOME", "LANG", "PI_CODING_AGENT_DIR", "EDITOR", "SITE_URL",
			"OPENAI_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "MY_TOOL_SETTING"}},
		{"allow and deny", EnvPolicy{Allow: []string{"github_token"}, Deny: []string{"OPENAI_*", "MY_*"}}, []string{"PATH", "HOME", "LANG",
			"PI_CODING_AGENT_DIR", "EDITOR", "GITHUB_TOKEN", "SITE_URL", "ANTHROPIC_OAUTH_TOKEN", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN"}},
		{"strict", EnvPolicy{Strict: true, Allow: []string{"MY_TOOL_SETTING"}}, []string{"PATH", "HOME", "LANG", "PI_CODING_AGENT_DIR",
			"EDITOR", "OPENAI_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "MY_TOOL_SETTING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(tt.policy.Filter(env)); !slices.Equal(got, tt.want) {
				t.Fatalf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestRunPiChildSeesNoServiceSecret: a real child that prints its
// environment with bash does not see the worker's Temporal key or a
// password, while its provider key and the user's variables are there; and
// what it printed is masked on its way into the result.
func TestRunPiChildSeesNoServiceSecret(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3b3JrZXIifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ")
	t.Setenv("DB_PASSWORD_PLAIN", "hunter2")
	t.Setenv("ZZ_PROVIDER_API_KEY", "provider-key-value")
	t.Setenv("ZZ_USER_SETTING", "kept")
	h := newHarness(t, nil)
	h.model.Script("env",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"env | sort; echo LEAK DB_PASSWORD=hunter2"}`}}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{finalizeCall(`{"status":"SUCCESS","result":"printed"}`)}})
	r := h.mustRun(h.input("[[script:env]] Print your environment."))
	if r.Error != nil {
		t.Fatalf("result %+v", r.Error)
	}
	reqs := h.model.RequestsFor("env")
	var seen string
	for _, m := range reqs[len(reqs)-1].Parsed.Messages {
		if m.Role == "tool" {
			seen += m.Text()
		}
	}
	for _, gone := range []string{"TEMPORAL_API_KEY", "DB_PASSWORD_PLAIN"} {
		if strings.Contains(seen, gone+"=") {
			t.Fatalf("the child saw %s:\n%s", gone, seen)
		}
	}
	for _, kept := range []string{"ZZ_PROVIDER_API_KEY=provider-key-value", "ZZ_USER_SETTING=kept"} {
		if !strings.Contains(seen, kept) {
			t.Fatalf("the child lacks %s", kept)
		}
	}
	// The row of the bash call as the history holds it: masked.
	for _, row := range r.ToolRows {
		if strings.Contains(row.Args, "hunter2") {
			t.Fatalf("a result row keeps the password: %s", row.Args)
		}
	}
}
