package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// leakedEnv are the variables issue 29 found in a child's `env`, each with
// a value no other text of the test holds.
var leakedEnv = map[string]string{
	"AWS_SECRET_ACCESS_KEY": "e2eAwsSecret7Qx/K7MDENGbPxRfiCY",
	"AWS_SESSION_TOKEN":     "e2eAwsSession7QxIQoJb3JpZ2luX2Vj",
	"GITHUB_PAT":            "e2eGithubPat7Qx",
	"GH_PAT2":               "ghp_e2eGhPat2x7QxAbCdEfGhIjKlMnOpQrStUvWx",
	"MYSQL_PWD":             "e2eMysqlPwd7Qx",
	"DB_PASS":               "e2eDbPass7Qx",
	"SMTP_PASS":             "e2eSmtpPass7Qx",
	"REDIS_URL":             "redis://:e2eRedisPw7Qx@cache.internal:6379/0",
	"MONGO_URI":             "mongodb://mongo.internal:27017/app?password=e2eMongoPw7Qx&authSource=admin",
	"STRIPE_API_KEY":        "e2eStripeKey7Qx",
	"SENDGRID_API_KEY":      "e2eSendgridKey7Qx",
	"RAILS_MASTER_KEY":      "e2eRailsMaster7Qx",
	"ENCRYPTION_KEY":        "e2eEncryptionKey7Qx",
	"NPM_CONFIG__AUTH":      "e2eNpmAuth7Qx",
	"BASIC_AUTH":            "admin:e2eBasicAuth7Qx",
	"DOCKER_AUTH_CONFIG":    `{"auths":{"registry.internal":{"auth":"e2eDockerAuth7Qx"}}}`,
	"CI_JOB_JWT":            "e2eCiJobJwt7Qx",
	"SSH_AUTH_SOCK":         "/tmp/ssh-e2eSshAgent7Qx/agent.1",
	"KUBECONFIG":            "/home/ops/.kube/e2eKubeconfig7Qx",
}

// leakedValue is the part of a leaked variable's value that must not be
// seen: its secret (the password of a URL), or the whole value.
func leakedValue(name string) string {
	switch name {
	case "REDIS_URL":
		return "e2eRedisPw7Qx"
	case "MONGO_URI":
		return "e2eMongoPw7Qx"
	case "DOCKER_AUTH_CONFIG":
		return "e2eDockerAuth7Qx"
	case "BASIC_AUTH":
		return "e2eBasicAuth7Qx"
	}
	return leakedEnv[name]
}

// childProviderKey is a model provider's key pi reads (OPENAI_API_KEY): a child
// needs it.
const childProviderKey = "sk-e2eProviderKey7QxAbCdEfGhIjKl"

// finalizedSecrets are the shapes issue 29 saw reach the history as written
// or half-masked, as a child's finalize result carries them: each secret
// (the value that must not survive, tail included) and the text around it.
var finalizedSecrets = []struct{ secret, text string }{
	{"e2eResultDbPass;Tail7Qx", "DB_PASS=%s"},
	{"e2eResultRedis7Qx", "cache at redis://:%s@cache.internal:6379"},
	{"e2eResultPass Tail7Qx", `{"pass": "%s"}`},
	{"e2eResultPassphrase Tail7Qx", `{"passphrase": "%s"}`},
	{"e2eResultAccessKey7Qx", `{"AccessKey": "%s"}`},
	{"sk_live_51e2eStripeLive7QxAbCdEfGhIjKl", "stripe %s"},
	{"glpat-e2eGitlab7QxAbCdEf12", "gitlab %s"},
	{"npm_e2eNpmToken7QxAbCdEfGhIjKlMnOpQrStUv", "npm %s"},
	{"hf_e2eHuggingFace7QxAbCdEfGhIjKlMnOpQrSt", "hf %s"},
	{"e2eResultCliPass7Qx", "mysql --password %s -h db"},
	{"e2eResultCliPassEq7Qx", "psql --password=%s"},
	{"e2eResult@PgPass7Qx", "postgres://app:%s@db.internal:5432/x"},
	// Last: a key cut before its END line is masked to the end of the text.
	{"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUe2eKey7Qx", "-----BEGIN OPENSSH PRIVATE KEY-----\n%s\nAAAAC3NzaC1lZDI1NTE5AAAAIe2eKeyTail7Qx"},
}

// TestChildEnvHoldsNoSecretsAndHistoryMasksThem (issue 29, item 6): a
// worker whose own environment holds every secret the issue found gives a
// real child pi none of them (the child's bash tool prints `env`, which the
// model receives) but its model provider's key, and a finalize result
// carrying every secret shape reaches the workflow history masked whole.
// The worker builds a child's environment from its own (os.Environ), so the
// test sets the variables in its process: it must not run in parallel.
func TestChildEnvHoldsNoSecretsAndHistoryMasksThem(t *testing.T) {
	for name, value := range leakedEnv {
		t.Setenv(name, value)
	}
	t.Setenv("OPENAI_API_KEY", childProviderKey)
	t.Setenv("ZZ_E2E_USER_SETTING", "kept-7Qx")

	var result []string
	for _, s := range finalizedSecrets {
		result = append(result, strings.ReplaceAll(s.text, "%s", s.secret))
	}
	args, err := json.Marshal(map[string]string{"status": "SUCCESS", "result": strings.Join(result, "\n")})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.model.Script("env",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"env"}`}}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "subagent_finalize", Arguments: string(args)}}},
	)
	e.startWorker(shared.client)
	in := e.sessionInput("[[script:env]] Print your environment, then report.")
	var res api.SessionResult
	if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
		t.Fatalf("session: %v", err)
	}
	turn := res.LastTurn.Result
	if turn.Error != nil || turn.Finalize == nil {
		t.Fatalf("turn: error %+v finalize %+v", turn.Error, turn.Finalize)
	}

	// What the child's `env` printed, as its model received it.
	printed := printedByTool(t, e.model.RequestsFor("env"))
	if !strings.Contains(printed, "PATH=") {
		t.Fatalf("the bash tool printed no environment:\n%s", printed)
	}
	for name := range leakedEnv {
		if strings.Contains(printed, "\n"+name+"=") || strings.HasPrefix(printed, name+"=") || strings.Contains(printed, leakedValue(name)) {
			t.Errorf("the child's environment holds %s", name)
		}
	}
	for _, kept := range []string{"OPENAI_API_KEY=" + childProviderKey, "ZZ_E2E_USER_SETTING=kept-7Qx", "HOME=", "PI_CODING_AGENT_DIR="} {
		if !strings.Contains(printed, kept) {
			t.Errorf("the child's environment lacks %s", kept)
		}
	}

	// The finalize result as the caller gets it: every secret masked whole.
	for _, s := range finalizedSecrets {
		if strings.Contains(turn.Output, s.secret) || strings.Contains(turn.Output, secretTail(s.secret)) {
			t.Errorf("the result keeps %q (or its tail):\n%s", s.secret, turn.Output)
		}
	}
	if n := strings.Count(turn.Output, "[REDACTED"); n < len(finalizedSecrets) {
		t.Errorf("the result has %d masks, want one per secret (%d):\n%s", n, len(finalizedSecrets), turn.Output)
	}

	// Every payload of the session's history, decoded: no secret anywhere.
	payloads := historyPayloads(t, shared.client, in.SessionID)
	if len(payloads) == 0 {
		t.Fatal("no payloads in the session's history")
	}
	var secrets []string
	for name := range leakedEnv {
		secrets = append(secrets, leakedValue(name))
	}
	for _, s := range finalizedSecrets {
		secrets = append(secrets, s.secret, secretTail(s.secret))
	}
	secrets = append(secrets, childProviderKey)
	for _, p := range payloads {
		for _, secret := range secrets {
			if strings.Contains(p, secret) {
				t.Errorf("the history holds %q in %.400s", secret, p)
			}
		}
	}
}

// secretTail is the end of a secret a half mask would leave.
func secretTail(secret string) string {
	return secret[len(secret)-8:]
}
