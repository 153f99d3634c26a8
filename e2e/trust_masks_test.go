package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// issue39Secrets are the shapes issue 39 saw reach a result, the history
// and the parent unmasked: each line as a child writes it, and the part
// of it that must not be seen anywhere (the secret, or another account's
// name in a path).
var issue39Secrets = []struct{ line, secret string }{
	{"token_ghp_E2eGlued7QxAbCdEfGhIjKlMnOpQrStUvWx in the log", "E2eGlued7QxAbCdEfGhIjKlMnOpQrStUvWx"},
	{"curl -u admin:e2eCurlPw7Qx https://api.internal/x", "e2eCurlPw7Qx"},
	{"mysql -u root -pe2eMysqlP7Qx -h db", "e2eMysqlP7Qx"},
	{"sshpass -p e2eSshpass7Qx ssh deploy@host", "e2eSshpass7Qx"},
	{"SENDGRID SG.e2eSendgrid7QxAbCdEf.e2eSendgridTail7QxAbCdEfGh sent", "e2eSendgrid7QxAbCdEf"},
	{"SENDGRID SG.e2eSendgrid7QxAbCdEf.e2eSendgridTail7QxAbCdEfGh sent", "e2eSendgridTail7QxAbCdEfGh"},
	{"slack xapp-1-A0E2E7QX-1234567890-e2eSlackApp7QxAbCdEf", "e2eSlackApp7QxAbCdEf"},
	{"Cookie: sessionid=e2eSession7QxCookie; theme=dark", "e2eSession7QxCookie"},
	{"see /home/e2eotheruser7qx/.ssh/id_rsa", "e2eotheruser7qx"},
}

// issue39Text is every line of issue39Secrets, one a line.
func issue39Text() string {
	var b strings.Builder
	for i, s := range issue39Secrets {
		if i == 0 || s.line != issue39Secrets[i-1].line {
			b.WriteString(s.line + "\n")
		}
	}
	return b.String()
}

// TestSecretsOfIssue39ReachNoResultHistoryOrParent (issue 39, section 7):
// a real parent pi delegates to a child whose tool call's arguments, tool
// result (a file it reads) and finalize result carry every shape the issue
// found. What the parent's model and tool results get (the subagent
// tool's result and rows, get_subagent_session's transcript) and every
// payload of the child's history hold none of the secrets, and the result
// still reads: the masks stand where the secrets were.
func TestSecretsOfIssue39ReachNoResultHistoryOrParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	text := issue39Text()
	if err := os.WriteFile(filepath.Join(e.workDir, "notes.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	pattern, err := json.Marshal(map[string]string{"pattern": strings.ReplaceAll(strings.TrimSpace(text), "\n", " "), "path": "."})
	if err != nil {
		t.Fatal(err)
	}
	e.model.Script("c-39",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "grep", Arguments: string(pattern)}}},
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "read", Arguments: `{"path":"notes.txt"}`}}},
		finalizeStep("Found these:\n"+text),
	)
	session := "{{match:Session ID:.. .([0-9a-f-]+)}}"
	e.model.Script("parent-39",
		call("subagent", map[string]string{"agent": "scout", "task": "[[script:c-39]] Read the notes."}),
		call("get_subagent_session", map[string]string{"sessionId": session}),
		scriptedmodel.Step{Text: "Done."},
	)
	sessionFile := filepath.Join(t.TempDir(), "parent.jsonl")
	p := e.startParent("json", sessionFile, "[[script:parent-39]] Read the notes.")
	p.wait(t)
	reqs := e.model.RequestsFor("parent-39")
	if len(reqs) != 3 {
		t.Fatalf("the parent made %d model requests, want 3", len(reqs))
	}

	// The result reads: each line is there with its mask.
	result := toolResultText(t, reqs, 1)
	for _, want := range []string{"token_[REDACTED github token]", "curl -u admin:[REDACTED]", "mysql -u root -p[REDACTED]",
		"sshpass -p [REDACTED] ssh", "[REDACTED sendgrid key]", "[REDACTED slack token]", "Cookie: sessionid=[REDACTED]; theme=[REDACTED]",
		"/home/[REDACTED user]/.ssh/id_rsa"} {
		if !strings.Contains(result, want) {
			t.Errorf("the subagent's result lacks %q:\n%s", want, result)
		}
	}
	if transcript := toolResultText(t, reqs, 2); !strings.Contains(transcript, "→ grep: ") || !strings.Contains(transcript, "[tool result]:") {
		t.Fatalf("get_subagent_session:\n%s", transcript)
	}

	places := e.parentPlaces(p, reqs, sessionFile)
	for _, s := range issue39Secrets {
		for where, text := range places {
			if i := strings.Index(text, s.secret); i >= 0 {
				t.Errorf("%s holds %q: %.300s", where, s.secret, text[max(i-150, 0):])
			}
		}
	}
}

// parentPlaces are the texts of a parent pi that delegated one session
// (its events, its model requests) and every payload of that session's
// history, by where they are: what must hold no secret of the session's.
func (e *env) parentPlaces(p *parentPi, reqs []scriptedmodel.Request, sessionFile string) map[string]string {
	e.t.Helper()
	list, out := e.cli().json(0, "", "list", "--parent-session", sessionIDOf(e.t, sessionFile), "--kind", "session")
	if len(list.Runs) != 1 {
		e.t.Fatalf("sessions of the parent: %s", out)
	}
	places := map[string]string{"the parent's events (tool results and details)": p.events.String()}
	for i, r := range reqs {
		b, _ := json.Marshal(r.Parsed.Messages)
		places[fmt.Sprintf("the parent's model request %d", i+1)] = string(b)
	}
	payloads := historyPayloads(e.t, shared.client, list.Runs[0].ID)
	if len(payloads) == 0 {
		e.t.Fatal("no payloads in the session's history")
	}
	for i, payload := range payloads {
		places[fmt.Sprintf("history payload %d", i+1)] = payload
	}
	return places
}

// printedByTool is what the tools of a child's first step returned, as
// its model received them in its second request.
func printedByTool(t *testing.T, reqs []scriptedmodel.Request) string {
	t.Helper()
	if len(reqs) != 2 {
		t.Fatalf("the model saw %d requests, want 2", len(reqs))
	}
	var printed string
	for _, m := range reqs[1].Parsed.Messages {
		if m.Role == "tool" {
			printed += m.Text()
		}
	}
	return printed
}

// issue39Env are the variables issue 39 found in a child's environment,
// each with a value no other text of the test holds.
var issue39Env = map[string]string{
	"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0E2E7QX/B0E2E7QX/e2eSlackHook7Qx",
	"SENTRY_DSN":        "https://e2e0c44298fc1c149afbf4c8996fb924@o1.ingest.sentry.io/2",
	"APP_SALT":          "e2eAppSalt7Qx",
	"DJANGO_HASH_SALT":  "e2eDjangoSalt7Qx",
}

// TestChildEnvLacksIssue39Secrets (issue 39, section 7): a worker whose
// environment holds a Slack webhook, a Sentry DSN and salts gives a real
// child pi none of them (its bash tool prints `env`, which its model
// receives), while a setting of the user's still reaches it. The worker
// builds a child's environment from its own: not parallel.
func TestChildEnvLacksIssue39Secrets(t *testing.T) {
	for name, value := range issue39Env {
		t.Setenv(name, value)
	}
	t.Setenv("ZZ_E2E_USER_SETTING", "kept-7Qx")
	e := newEnv(t)
	e.model.Script("env-39",
		scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: "bash", Arguments: `{"command":"env"}`}}},
		finalizeStep("printed"),
	)
	e.startWorker(shared.client)
	in := e.sessionInput("[[script:env-39]] Print your environment, then report.")
	var res api.SessionResult
	if err := e.startSession(shared.client, in).Get(e.ctx(), &res); err != nil {
		t.Fatalf("session: %v", err)
	}
	if turn := res.LastTurn.Result; turn.Error != nil || turn.Finalize == nil {
		t.Fatalf("turn: error %+v finalize %+v", turn.Error, turn.Finalize)
	}
	printed := printedByTool(t, e.model.RequestsFor("env-39"))
	if !strings.Contains(printed, "ZZ_E2E_USER_SETTING=kept-7Qx") || !strings.Contains(printed, "PATH=") {
		t.Fatalf("the child's environment lacks the user's settings:\n%s", printed)
	}
	for name, value := range issue39Env {
		if strings.Contains(printed, name+"=") || strings.Contains(printed, value) {
			t.Errorf("the child's environment holds %s", name)
		}
	}
}
