package activities

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
)

// sanitizeCases are texts and what Sanitize makes of them, with the
// home /home/alice.
var sanitizeCases = []struct {
	name, in, want string
}{
	{"plain text stays", "nothing secret here", "nothing secret here"},
	{"openai key", "key=sk-proj-abcdefghijklmnop1234", "key=[REDACTED api key]"},
	{"anthropic key", "use sk-ant-api03-abcdefghijklmnopqrstuv now", "use [REDACTED anthropic key] now"},
	{"google key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "[REDACTED google key]"},
	{"aws key id", "AKIAIOSFODNN7EXAMPLE", "[REDACTED aws key id]"},
	{"aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [REDACTED]"},
	{"github token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED github token]"},
	{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[REDACTED github token]"},
	{"slack token", "xoxb-1234567890-abcdefghij", "[REDACTED slack token]"},
	{"bearer", "curl -H 'x: Bearer abc.def.ghi-jkl'", "curl -H 'x: Bearer [REDACTED]'"},
	{"authorization header", "Authorization: Basic dXNlcjpwYXNz", "Authorization: [REDACTED]"},
	{"generic password", `password: "hunter2hunter2hunter2"`, `password: "[REDACTED]"`},
	{"private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "[REDACTED private key]"},
	{"short password in KEY=value", "DB_PASSWORD_PLAIN=hunter2 next", "DB_PASSWORD_PLAIN=[REDACTED] next"},
	{"connection string password with blanks", "Server=h;Password=my secret pw;Database=d", "Server=h;Password=[REDACTED];Database=d"},
	{"a JSON pwd is a password", `{"pwd":"abc"}`, `{"pwd":"[REDACTED]"}`},
	{"the shell's PWD is a folder", "PWD=/work/proj", "PWD=/work/proj"},
	{"JSON key", `{"client_secret": "s3cr3t value", "user": "bob"}`, `{"client_secret": "[REDACTED]", "user": "bob"}`},
	{"single-quoted", `api_key: 'abc'`, `api_key: '[REDACTED]'`},
	{"JWT", "TEMPORAL_API_KEY=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		"TEMPORAL_API_KEY=[REDACTED jwt]"},
	{"JWT alone", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmN", "token [REDACTED jwt]"},
	{"URL credentials", "postgres://app:pa55@db.internal:5432/x and https://ok.example/a@b", "postgres://app:[REDACTED]@db.internal:5432/x and https://ok.example/a@b"},
	{"token counts stay", `"totalTokens":120, tokens: 55`, `"totalTokens":120, tokens: 55`},
	{"words stay", "the keyboard: fine; monkey: banana", "the keyboard: fine; monkey: banana"},
	// Issue 29: each shape masked whole, no tail left.
	{"PASS", "DB_PASS=p@ss;w0rd and SMTP_PASS=x", "DB_PASS=[REDACTED] and SMTP_PASS=[REDACTED]"},
	{"PWD", "export MYSQL_PWD=hunter2", "export MYSQL_PWD=[REDACTED]"},
	{"PAT", "GITHUB_PAT=abc GH_PAT2=def PATTERN=x PATH=/bin", "GITHUB_PAT=[REDACTED] GH_PAT2=[REDACTED] PATTERN=x PATH=/bin"},
	{"AUTH", "BASIC_AUTH=admin:pw NPM_CONFIG__AUTH=dXNl", "BASIC_AUTH=[REDACTED] NPM_CONFIG__AUTH=[REDACTED]"},
	{"JWT", "CI_JOB_JWT=abc.def", "CI_JOB_JWT=[REDACTED]"},
	{"service keys", "STRIPE_API_KEY=a RAILS_MASTER_KEY=b ENCRYPTION_KEY=c", "STRIPE_API_KEY=[REDACTED] RAILS_MASTER_KEY=[REDACTED] ENCRYPTION_KEY=[REDACTED]"},
	{"URL password without a user", "redis://:pw@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"},
	{"URL password with @", "postgres://u:p@ss@host:5432/db", "postgres://u:[REDACTED]@host:5432/db"},
	{"URL password with /", "s3://AKID:wJalr/K7MDENG@bucket/key", "s3://AKID:[REDACTED]@bucket/key"},
	{"URL password parameter", "mongodb://host/?password=x&authSource=admin", "mongodb://host/?password=[REDACTED]&authSource=admin"},
	{"JSON pass", `{"pass": "a b", "passphrase": "c \"d\" e", "user": "bob"}`, `{"pass": "[REDACTED]", "passphrase": "[REDACTED]", "user": "bob"}`},
	{"JSON AccessKey", `{"AccessKey": "abc", "AccessKeyId": "id"}`, `{"AccessKey": "[REDACTED]", "AccessKeyId": "[REDACTED]"}`},
	{"JSON inside a JSON string", `"{\"password\": \"x y\", \"user\": \"bob\"}"`, `"{\"password\": \"[REDACTED]\", \"user\": \"bob\"}"`},
	{"stripe key", "sk_live_51H8yZkA2eZvKYlo2CuSeTp7x", "[REDACTED stripe key]"},
	{"gitlab token", "glpat-AbCdEfGhIjKlMnOpQrSt", "[REDACTED gitlab token]"},
	{"npm token", "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "[REDACTED npm token]"},
	{"hugging face token", "hf_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "[REDACTED hugging face token]"},
	{"password flag", "mysql --password hunter2 -h db; psql --password=s3cr3t", "mysql --password [REDACTED] -h db; psql --password=[REDACTED]"},
	{"-p stays", "psql -p 5432 --no-password", "psql -p 5432 --no-password"},
	{"private key cut before its END", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nQm9v", "key:\n[REDACTED private key]"},
	{"whole value to the line's end", "password: correct horse battery staple\nnext", "password: [REDACTED]\nnext"},
	{"JSON stays JSON", `{"pin_password": 1234, "x": "\"token\": 5"}`, `{"pin_password": "[REDACTED]", "x": "\"token\": \"[REDACTED]\""}`},
	{"a quoted assignment keeps its quotes", `echo "DB_PASS=x" 'SMTP_PASS=y'`, `echo "DB_PASS=[REDACTED]" 'SMTP_PASS=[REDACTED]'`},
	{"a token cut by a preview", `{"command":"echo ghp_abcdefghijklmnopqrstuvwxyz0…`, `{"command":"echo [REDACTED cut token]…`},
	{"Go struct", "{Password:abc User:bob}", "{Password:[REDACTED] User:bob}"},
	{"settings stay", `GIT_AUTHOR_NAME=bob authSource=admin "private": true bypass: on PWD=/src`, `GIT_AUTHOR_NAME=bob authSource=admin "private": true bypass: on PWD=/src`},
	{"home path", "see /home/alice/src/app.go and /home/alice", "see ~/src/app.go and ~"},
	// Issue 39: each masked whole, the text around it readable.
	{"token glued to a word", "token_ghp_abcdefghijklmnopqrstuvwxyz0123456789 and MY_KEY_sk_live_51H8yZkA2eZvKYlo2CuSeTp7x",
		"token_[REDACTED github token] and MY_KEY_[REDACTED stripe key]"},
	{"identifiers stay", "laughs_abcdefghijklmnopqrstuvwxyz0123456789 task-abcdefghijklmnopqrstu",
		"laughs_abcdefghijklmnopqrstuvwxyz0123456789 task-abcdefghijklmnopqrstu"},
	{"curl -u", "curl -s -u admin:pw https://x/api; curl --user 'bob:p@ss w' -X GET; curl -u bob https://x",
		"curl -s -u admin:[REDACTED] https://x/api; curl --user 'bob:[REDACTED] w' -X GET; curl -u bob https://x"},
	{"curl -u in JSON", `{"command":"curl -u admin:hunter2\nnext"}`, `{"command":"curl -u admin:[REDACTED]\nnext"}`},
	{"commands after a JSON escape", `{"result":"x:\ncurl -u admin:pw1\nmysql -pX2 db\nsshpass -p pw3 ssh h\nCookie: sid=abc4"}`,
		`{"result":"x:\ncurl -u admin:[REDACTED]\nmysql -p[REDACTED] db\nsshpass -p [REDACTED] ssh h\nCookie: sid=[REDACTED]"}`},
	{"-u of other commands stays", "docker run -u 1000:1000 img", "docker run -u 1000:1000 img"},
	{"mysql -p", "mysql -u root -pX -h db; mysqldump -p'hunter2' app; mysql -u root -p app",
		"mysql -u root -p[REDACTED] -h db; mysqldump -p'[REDACTED]' app; mysql -u root -p app"},
	{"psql -p stays", "psql -h db -p 5432 app", "psql -h db -p 5432 app"},
	{"sshpass -p", "sshpass -p pw ssh -p 22 host", "sshpass -p [REDACTED] ssh -p 22 host"},
	{"sendgrid key", "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", "[REDACTED sendgrid key]"},
	{"slack app token", "xapp-1-A0123ABCDEF-4567890123-abcdef0123456789 and xoxe-1-abcdefghijkl", "[REDACTED slack token] and [REDACTED slack token]"},
	{"slack webhook", "POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX now",
		"POST https://hooks.slack.com/[REDACTED slack webhook] now"},
	{"sentry dsn", "dsn https://e3b0c44298fc1c149afbf4c8996fb924@o123.ingest.sentry.io/456", "dsn https://[REDACTED]@o123.ingest.sentry.io/456"},
	{"cookie header", "curl -H 'Cookie: sessionid=abc123; csrftoken=def==' https://x", "curl -H 'Cookie: sessionid=[REDACTED]; csrftoken=[REDACTED]' https://x"},
	{"cookie in JSON", `{"Cookie": "sessionid=abc123"}`, `{"Cookie": "sessionid=[REDACTED]"}`},
	{"set-cookie keeps its attributes", "Set-Cookie: sessionid=abc123; Path=/; HttpOnly", "Set-Cookie: sessionid=[REDACTED]; Path=/; HttpOnly"},
	{"cookie words stay", "the cookie: a jar; cookie: req.headers.cookie", "the cookie: a jar; cookie: req.headers.cookie"},
	{"salt, dsn, webhook url", "APP_SALT=pepper SENTRY_DSN=x SLACK_WEBHOOK_URL=y webhooks: on", "APP_SALT=[REDACTED] SENTRY_DSN=[REDACTED] SLACK_WEBHOOK_URL=[REDACTED] webhooks: on"},
	// Issue 39's review.
	{"slack session tokens", "xoxc-1234567890-abcdefghij and xoxd-AbCdEf%2FGhIjKl%3D", "[REDACTED slack token] and [REDACTED slack token]"},
	{"curl -b and --cookie", `curl -b 'sessionid=abc123' https://x; curl --cookie "a=1; b=two" https://x; curl -b jar.txt https://x`,
		`curl -b 'sessionid=[REDACTED]' https://x; curl --cookie "a=[REDACTED]; b=[REDACTED]" https://x; curl -b jar.txt https://x`},
	{"curl --cookie= after a JSON escape", `"x\ncurl --cookie=sid=abc123 https://x"`, `"x\ncurl --cookie=sid=[REDACTED] https://x"`},
	{"redis-cli -a", "redis-cli -h cache -p 6379 -a s3cretpw ping", "redis-cli -h cache -p 6379 -a [REDACTED] ping"},
	{"discord and teams webhooks", "DISCORD_WEBHOOK=x TEAMS_WEBHOOK=y post https://discord.com/api/webhooks/1234567890/AbCdEf_gh-ij and https://contoso.webhook.office.com/webhookb2/abc@def/IncomingWebhook/123/xyz",
		"DISCORD_WEBHOOK=[REDACTED] TEAMS_WEBHOOK=[REDACTED] post https://discord.com/api/webhooks/[REDACTED discord webhook] and https://webhook.office.com/[REDACTED teams webhook]"},
	// /root names no account but root: the worker that is not root
	// sees it as it is (docs/security.md).
	{"root's home stays", "see /root/.npm/_logs/x.log", "see /root/.npm/_logs/x.log"},
	{"other users' homes", "see /home/bob/.ssh/id_rsa, \"/Users/carol/x\" and file:///home/dan/y",
		"see /home/[REDACTED user]/.ssh/id_rsa, \"/Users/[REDACTED user]/x\" and file:///home/[REDACTED user]/y"},
	{"other home after a JSON escape", `"a\n/home/bob/x"`, `"a\n/home/[REDACTED user]/x"`},
	{"not a home folder", "/srv/home/bob/x /Users/Shared/x /home/alice2/x ~/src", "/srv/home/bob/x /Users/Shared/x /home/[REDACTED user]/x ~/src"},
}

func TestSanitize(t *testing.T) {
	z := NewSanitizer("/home/alice")
	tests := sanitizeCases
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := z.Sanitize(tt.in); got != tt.want {
				t.Fatalf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSanitizeCutsLongStackTraces(t *testing.T) {
	var b strings.Builder
	b.WriteString("Error: boom\n")
	for i := range 30 {
		fmt.Fprintf(&b, "    at fn%d (/srv/app/file.js:%d:1)\n", i, i)
	}
	b.WriteString("after the trace")
	got := NewSanitizer("").Sanitize(b.String())
	if !strings.Contains(got, "at fn7 ") || strings.Contains(got, "at fn8 ") {
		t.Fatalf("kept the wrong frames:\n%s", got)
	}
	if !strings.Contains(got, "... (22 more stack frames)") || !strings.HasSuffix(got, "after the trace") {
		t.Fatalf("trace not cut as expected:\n%s", got)
	}
	short := "Error\n    at a (x.js:1:1)\n    at b (x.js:2:1)"
	if NewSanitizer("").Sanitize(short) != short {
		t.Fatal("a short trace was changed")
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in        string
		max       int
		want      string
		truncated bool
		total     int
	}{
		{"hello", 10, "hello", false, 5},
		{"hello", 5, "hello", false, 5},
		{"hello", 3, "hel", true, 5},
		{"héllo wörld", 4, "héll", true, 11},
		{"", 3, "", false, 0},
		{"abc", 0, "abc", false, 3},
	}
	for _, tt := range tests {
		got := Truncate(tt.in, tt.max)
		if got.Text != tt.want || got.Truncated != tt.truncated || got.TotalChars != tt.total || got.ReturnedChars != len([]rune(got.Text)) {
			t.Errorf("Truncate(%q, %d) = %+v", tt.in, tt.max, got)
		}
	}
}

func TestFileSpecJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    api.FileSpec
		invalid string
	}{
		{`"src/main.go"`, api.FileSpec{Path: "src/main.go"}, ""},
		{`{"path":"a.go","start":10,"end":50}`, api.FileSpec{Path: "a.go", Start: 10, End: 50}, ""},
		{`{"path":"a.go","head":20}`, api.FileSpec{Path: "a.go", Head: 20}, ""},
		{`{"path":"a.go","tail":30}`, api.FileSpec{Path: "a.go", Tail: 30}, ""},
		{`{"path":"a.go","head":1,"tail":1}`, api.FileSpec{Path: "a.go", Head: 1, Tail: 1}, "use one of start/end, head or tail"},
		{`{"path":"a.go","start":9,"end":3}`, api.FileSpec{Path: "a.go", Start: 9, End: 3}, "start 9 is after end 3"},
		{`{"path":"a.go","head":-1}`, api.FileSpec{Path: "a.go", Head: -1}, "line numbers must be positive"},
		{`""`, api.FileSpec{}, "empty path"},
	}
	for _, tt := range tests {
		var f api.FileSpec
		if err := json.Unmarshal([]byte(tt.in), &f); err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if f != tt.want {
			t.Errorf("%s decoded to %+v", tt.in, f)
		}
		err := f.Validate()
		if (tt.invalid == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.invalid)) {
			t.Errorf("%s: Validate() = %v, want %q", tt.in, err, tt.invalid)
		}
	}
	var f api.FileSpec
	if err := json.Unmarshal([]byte(`42`), &f); err == nil {
		t.Error("a number decoded as a file spec")
	}
}

// BenchmarkSanitize: a megabyte of output with no secret in it, as pi's
// longest outputs are (read page by page, or an artifact): the rules run
// only where a text holds their keys.
func BenchmarkSanitize(b *testing.B) {
	z := NewSanitizer("/home/alice")
	for _, c := range []struct{ name, text string }{
		{"one word", strings.Repeat("y", 1<<20)},
		{"wide characters", strings.Repeat("é€<\"", 1<<18)},
		{"prose", strings.Repeat("the key to this path is the author's token count ", 1<<20/50)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			for b.Loop() {
				z.Sanitize(c.text)
			}
		})
	}
}
