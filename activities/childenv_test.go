package activities

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// issueSecrets are the variables issue 29 found in a child's `env`: none
// passes by default, each for the rule its comment names.
var issueSecrets = []string{
	"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", // AWS: Bedrock's only
	"AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEJr",                          // AWS: Bedrock's only
	"GITHUB_PAT=x",                                                   // PAT as a word
	"GH_PAT2=ghp_abcdefghijklmnopqrstuvwxyz0123456789",               // PAT and a digit
	"MYSQL_PWD=x",                        // PWD
	"DB_PASS=x",                          // PASS
	"SMTP_PASS=x",                        // PASS
	"REDIS_URL=redis://:pw@cache:6379/0", // a URL's password without a user
	"MONGO_URI=mongodb://mongo:27017/app?password=x&authSource=a", // a URL's password parameter
	"STRIPE_API_KEY=x",                 // KEY, not a provider's
	"SENDGRID_API_KEY=x",               // KEY, not a provider's
	"RAILS_MASTER_KEY=x",               // KEY
	"ENCRYPTION_KEY=x",                 // KEY
	"NPM_CONFIG__AUTH=x",               // AUTH
	"BASIC_AUTH=user:pw",               // AUTH
	`DOCKER_AUTH_CONFIG={"auths":{}}`,  // AUTH
	"CI_JOB_JWT=x",                     // JWT
	"SSH_AUTH_SOCK=/tmp/ssh-x/agent.1", // AUTH: the agent signs as the user
	"KUBECONFIG=/home/u/.kube/config",  // the cluster's credentials
	// Issue 39.
	"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T0/B0/XXXX",             // a webhook's URL
	"SENTRY_DSN=https://e3b0c44298fc1c149afbf4c8996fb924@o1.ingest.sentry.io/2", // DSN
	"APP_SALT=pepper", // SALT
	"NOTIFY=https://hooks.slack.com/services/T0/B0/XXXX", // a Slack webhook, whatever names it
	// Issue 39's review.
	"DISCORD_WEBHOOK=https://discord.com/api/webhooks/1/abc",       // WEBHOOK
	"TEAMS_WEBHOOK=https://x.webhook.office.com/webhookb2/a/b",     // WEBHOOK
	"ALERTS=https://discord.com/api/webhooks/1234567890/AbCdEf_gh", // a Discord webhook, whatever names it
	"REDIS_CMD=redis-cli -a s3cretpw",                              // a password after redis-cli -a
}

// neededEnv are variables a child needs: all pass by default.
var neededEnv = []string{
	"PATH=/opt/sk-learn-examples-and-notebooks/bin:/usr/bin", "HOME=/home/u", "PWD=/home/u/src", "OLDPWD=/home/u", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
	"PI_CODING_AGENT_DIR=/a", "PI_OFFLINE=1", "EDITOR=vi", "TERM=xterm", "XDG_DATA_PATH=/x", "PATTERN=a*",
	"HTTP_PROXY=http://proxy:3128", "https_proxy=http://proxy:3128", "NO_PROXY=localhost",
	"GIT_AUTHOR_NAME=u", "SITE_URL=https://example.com/a@b", "MY_TOOL_SETTING=1",
	"OPENAI_API_KEY=sk-x", "ANTHROPIC_API_KEY=sk-ant-x", "ANTHROPIC_OAUTH_TOKEN=t", "GEMINI_API_KEY=g",
	"COPILOT_GITHUB_TOKEN=c", "HF_TOKEN=h", "AI_GATEWAY_API_KEY=v", "GOOGLE_CLOUD_API_KEY=g",
	"GOOGLE_APPLICATION_CREDENTIALS=/home/u/adc.json", "GOOGLE_CLOUD_PROJECT=p", "GOOGLE_CLOUD_LOCATION=l",
	"AWS_PROFILE=dev", "AWS_REGION=us-west-2", "AWS_BEARER_TOKEN_BEDROCK=b", "AWS_WEB_IDENTITY_TOKEN_FILE=/var/run/t",
}

func envNames(kvs []string) []string {
	var out []string
	for _, kv := range kvs {
		n, _, _ := strings.Cut(kv, "=")
		out = append(out, n)
	}
	return out
}

func TestEnvPolicyDropsIssueSecrets(t *testing.T) {
	for _, kv := range issueSecrets {
		name, _, _ := strings.Cut(kv, "=")
		t.Run(name, func(t *testing.T) {
			if got := (EnvPolicy{}).Filter([]string{kv}); len(got) != 0 {
				t.Fatalf("%s passes: %v", name, got)
			}
			if got := (EnvPolicy{Strict: true}).Filter([]string{kv}); len(got) != 0 {
				t.Fatalf("%s passes a strict policy: %v", name, got)
			}
			if got := (EnvPolicy{Allow: []string{name}}).Filter([]string{kv}); !slices.Equal(got, []string{kv}) {
				t.Fatalf("--child-env-allow %s does not pass it: %v", name, got)
			}
		})
	}
	t.Run("needed", func(t *testing.T) {
		if got := envNames((EnvPolicy{}).Filter(neededEnv)); !slices.Equal(got, envNames(neededEnv)) {
			t.Fatalf("got  %v\nwant %v", got, envNames(neededEnv))
		}
	})
}

func TestEnvPolicy(t *testing.T) {
	env := []string{
		"PATH=/bin", "HOME=/home/u", "LANG=C.UTF-8", "PI_CODING_AGENT_DIR=/a", "EDITOR=vi",
		"TEMPORAL_API_KEY=eyJ.x.y", "TEMPORAL_ADDRESS=t:7233", "TEMPORAL_TLS_CLIENT_KEY_PATH=/k.pem",
		"DB_PASSWORD_PLAIN=hunter2", "APP_SECRET=x", "GITHUB_TOKEN=ghp_x", "GCP_CREDENTIALS=x", "SSH_PRIVATE=x",
		"DATABASE_URL=postgres://app:pa55@db/x", "SITE_URL=https://example.com/a@b", "HTTPS_PROXY=http://u:p@proxy:3128",
		"MY_TOOL_VALUE=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "MY_CERT=-----BEGIN PRIVATE KEY-----",
		"OPENAI_API_KEY=sk-x", "ANTHROPIC_OAUTH_TOKEN=t", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
		"AWS_SECRET_ACCESS_KEY=a", "AWS_REGION=us-east-1", "HF_TOKEN=h", "ZZ_PROVIDER_API_KEY=z",
		"MY_TOOL_SETTING=1",
	}
	tests := []struct {
		name   string
		policy EnvPolicy
		model  string
		want   []string
	}{
		{"default", EnvPolicy{}, "openai/gpt-5", []string{"PATH", "HOME", "LANG", "PI_CODING_AGENT_DIR", "EDITOR", "SITE_URL",
			"OPENAI_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "AWS_REGION", "HF_TOKEN", "MY_TOOL_SETTING"}},
		{"bedrock gets the AWS keys", EnvPolicy{}, "amazon-bedrock/anthropic.claude", []string{"PATH", "HOME", "LANG", "PI_CODING_AGENT_DIR",
			"EDITOR", "SITE_URL", "OPENAI_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
			"HF_TOKEN", "MY_TOOL_SETTING"}},
		{"allow and deny", EnvPolicy{Allow: []string{"github_token", "ZZ_*"}, Deny: []string{"OPENAI_*", "MY_*"}}, "", []string{"PATH", "HOME", "LANG",
			"PI_CODING_AGENT_DIR", "EDITOR", "GITHUB_TOKEN", "SITE_URL", "ANTHROPIC_OAUTH_TOKEN", "AWS_REGION", "HF_TOKEN", "ZZ_PROVIDER_API_KEY"}},
		{"strict", EnvPolicy{Strict: true, Allow: []string{"MY_TOOL_SETTING"}}, "", []string{"PATH", "HOME", "LANG", "PI_CODING_AGENT_DIR",
			"EDITOR", "OPENAI_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "AWS_REGION", "HF_TOKEN", "MY_TOOL_SETTING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := envNames(tt.policy.FilterFor(tt.model, env)); !slices.Equal(got, tt.want) {
				t.Fatalf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestEnvPolicyDropsTheWorkersNesting: a worker started by a child's pi
// has that child's PI_SUBAGENT_* variables; no child it runs gets them,
// under any policy, even one that allows PI_*; the rest of PI_* passes.
func TestEnvPolicyDropsTheWorkersNesting(t *testing.T) {
	env := []string{"PATH=/bin", "PI_CODING_AGENT_DIR=/a", "PI_SUBAGENT_PARENT_SESSION=another-session", "PI_SUBAGENT_NESTED=1",
		"PI_SUBAGENT_TOKEN=abc", "PI_SUBAGENT_DEPTH=1", "PI_SUBAGENT_CHILD=1"}
	for _, p := range []EnvPolicy{{}, {Strict: true}, {Allow: []string{"PI_*"}}} {
		if got, want := envNames(p.Filter(env)), []string{"PATH", "PI_CODING_AGENT_DIR"}; !slices.Equal(got, want) {
			t.Fatalf("%+v: got %v, want %v", p, got, want)
		}
	}
}

// TestEnvPolicyKeepsConfiguredKeys: a key the user's pi config reads for a
// provider of its own ($NAME in models.json) is a provider key.
func TestEnvPolicyKeepsConfiguredKeys(t *testing.T) {
	dir := t.TempDir()
	models := `{"providers":{"corp":{"baseUrl":"https://llm.corp","apiKey":"$CORP_LLM_KEY",` +
		`"headers":{"X-Team":"${CORP_TEAM_TOKEN}","X-Cmd":"!echo $NOT_READ"},"models":[{"id":"m"}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "models.json"), []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PI_CODING_AGENT_DIR=" + dir, "CORP_LLM_KEY=k", "CORP_TEAM_TOKEN=t", "NOT_READ_KEY=x", "OTHER_API_KEY=o"}
	want := []string{"PI_CODING_AGENT_DIR", "CORP_LLM_KEY", "CORP_TEAM_TOKEN"}
	if got := envNames((EnvPolicy{}).Filter(env)); !slices.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	// Without PI_CODING_AGENT_DIR, ~/.pi/agent is the config.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".pi", "agent"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".pi", "agent", "auth.json"), []byte(`{"corp":{"type":"api_key","key":"$CORP_LLM_KEY"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env = []string{"HOME=" + home, "CORP_LLM_KEY=k", "CORP_TEAM_TOKEN=t"}
	if got := envNames((EnvPolicy{}).Filter(env)); !slices.Equal(got, []string{"HOME", "CORP_LLM_KEY"}) {
		t.Fatalf("got %v", got)
	}
}

// TestRunPiChildSeesNoServiceSecret: a real child that prints its
// environment with bash does not see the worker's Temporal key or a
// password, while its provider key and the user's variables are there; and
// what it printed is masked on its way into the result.
func TestRunPiChildSeesNoServiceSecret(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3b3JrZXIifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ")
	t.Setenv("DB_PASSWORD_PLAIN", "hunter2")
	t.Setenv("OPENAI_API_KEY", "provider-key-value")
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
	for _, kept := range []string{"OPENAI_API_KEY=provider-key-value", "ZZ_USER_SETTING=kept"} {
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
