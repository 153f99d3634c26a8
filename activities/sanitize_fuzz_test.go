package activities

import (
	"regexp"
	"strings"
	"testing"
)

// secretShape is a way a secret reached the history as written or
// half-masked (issue 29): text holds it where %s is, and fits says which
// secrets the shape can hold (a Stripe key is letters and digits, a JSON
// string has no bare quote).
type secretShape struct {
	text string
	fits *regexp.Regexp
}

var (
	// word is a value that ends at a blank and ends with a letter or digit
	// (punctuation after a value is the text's, not the value's), with no
	// "=" or ":" that would start another name's value, no "&" that would
	// start another query parameter, and not a flag.
	word = regexp.MustCompile(`^[^\s"'\\=:&-][^\s\\=:&]*[A-Za-z0-9]$`)
	// jsonText is the inside of a JSON string.
	jsonText = regexp.MustCompile(`^[^"\\\x00-\x1f]+$`)
	// urlPassword is a password as it stands in a URL ("@" and "/" in it).
	urlPassword = regexp.MustCompile(`^[^\s?#"'<>]+$`)
	// argument is a command's argument: it ends at a blank, and holds no
	// quote or backslash (that end a quoted argument or a JSON string).
	argument = regexp.MustCompile(`^[^\s"'\\]+$`)
	// anything but the END line that closes a private key.
	anything = regexp.MustCompile(`^[\s\S]+$`)
)

var secretShapes = []secretShape{
	{"DB_PASS=%s", word},
	{"SMTP_PASS=%s", word},
	{"export MYSQL_PWD=%s", word},
	{"GITHUB_PAT=%s", word},
	{"cache at redis://:%s@cache.internal:6379/0", urlPassword},
	{"postgres://app:%s@db.internal:5432/x", urlPassword},
	{"mongodb://mongo:27017/app?password=%s", word},
	{`{"pass": "%s"}`, jsonText},
	{`{"passphrase": "%s", "user": "bob"}`, jsonText},
	{`{"AccessKey": "%s"}`, jsonText},
	{`{\"password\": \"%s\"}`, regexp.MustCompile(`^[^"\\\x00-\x1f]+$`)},
	{"password: %s", regexp.MustCompile(`^[^\s"'\\:=][^\n\r:=]*[A-Za-z0-9]$`)},
	{"stripe sk_live_%s", regexp.MustCompile(`^[A-Za-z0-9]{10,}$`)},
	{"gitlab glpat-%s", regexp.MustCompile(`^[A-Za-z0-9_-]{20,}$`)},
	{"npm npm_%s", regexp.MustCompile(`^[A-Za-z0-9]{30,}$`)},
	{"hf hf_%s", regexp.MustCompile(`^[A-Za-z0-9]{30,}$`)},
	{"mysql --password %s -h db", word},
	{"psql --password=%s", word},
	{"-----BEGIN RSA PRIVATE KEY-----\n%s", anything},
	// Issue 39.
	{"token_ghp_%s", regexp.MustCompile(`^[A-Za-z0-9]{30,}$`)},
	{"curl -u admin:%s https://api.internal/x", argument},
	{"mysql -u root -p%s -h db", regexp.MustCompile(`^[^\s"'\\-][^\s"'\\]*$`)},
	{"sshpass -p %s ssh host", argument},
	{"sendgrid SG.%s", regexp.MustCompile(`^[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}$`)},
	{"slack xapp-1-%s", regexp.MustCompile(`^[A-Za-z0-9-]{10,}$`)},
	{"curl -H 'Cookie: sessionid=%s' https://x", regexp.MustCompile(`^[^\s;,"'\\]+$`)},
	// The account's name (lower case: /Users/Shared is no account's).
	{"cat /home/%s/.ssh/id_rsa", regexp.MustCompile(`^[a-z0-9_][a-z0-9._-]*$`)},
	{"SLACK_WEBHOOK_URL=%s", word},
	{"SENTRY_DSN=%s", word},
	{"APP_SALT=%s", word},
	{"notify https://hooks.slack.com/services/%s", regexp.MustCompile(`^[A-Za-z0-9/_-]+$`)},
	{"dsn https://%s@o1.ingest.sentry.io/2", regexp.MustCompile(`^[0-9a-f]{32}$`)},
	// Issue 39's review.
	{"slack xoxd-%s", regexp.MustCompile(`^[A-Za-z0-9%-]{10,}$`)},
	{"curl -b 'sessionid=%s' https://x", regexp.MustCompile(`^[^\s;,"'\\]+$`)},
	{"curl --cookie sid=%s https://x", regexp.MustCompile(`^[^\s;,"'\\]+$`)},
	{"redis-cli -h cache -a %s ping", argument},
	{"DISCORD_WEBHOOK=%s", word},
	{"TEAMS_WEBHOOK=%s", word},
	{"notify https://discord.com/api/webhooks/%s", regexp.MustCompile(`^[A-Za-z0-9/_-]+$`)},
}

// FuzzSanitize: a secret in any shape of secretShapes, whatever stands on
// its lines before and after it, is masked whole (neither half of it
// survives), and sanitizing what was sanitized changes nothing.
func FuzzSanitize(f *testing.F) {
	for i, seed := range []string{
		"hunter2", "p@ss;w0rd", "correct horse battery staple", "e2eResult@PgPass7Qx", "wJalrXUtnFEMI/K7MDENG/bPxRfiCY",
		"51H8yZkA2eZvKYlo2CuSeTp7xQw9", "AbCdEfGhIjKlMnOpQrSt", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
		"MIIEowIBAAKCAQEA7bq0\nQm9vbGVhbg", "s3cr3t value",
		// Issue 39.
		"Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2", "pw:with:colons", "ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc",
		"A0123ABCDEF-4567890123-abcdef0123", "T0B0/XXXXXXXX", "bobsmith", "e3b0c44298fc1c149afbf4c8996fb924",
		"AbCdEf%2FGhIjKl%3D", "1234567890/AbCdEf_gh-ij",
	} {
		f.Add("", uint8(i), seed, "")
		f.Add("line before\n", uint8(i+len(secretShapes)/2), seed, "\nline after")
	}
	z := NewSanitizer("/home/alice")
	f.Fuzz(func(t *testing.T, before string, shape uint8, secret, after string) {
		s := secretShapes[int(shape)%len(secretShapes)]
		text := before + strings.Replace(s.text, "%s", secret, 1) + after
		out := z.Sanitize(text)
		if again := z.Sanitize(out); again != out {
			t.Fatalf("sanitizing twice changed %q\nonce:  %q\ntwice: %q", text, out, again)
		}
		// The shape stands on its own: a blank or a line's end around it.
		if !s.fits.MatchString(secret) || strings.Contains(secret, "REDACTED") || strings.Contains(secret, "-----END") ||
			harmless(secret) || (before != "" && !endsBlank(before)) || (after != "" && !startsBlank(after)) {
			return
		}
		for _, part := range halves(secret) {
			if strings.Contains(out, part) && !strings.Contains(before+s.text+after, part) && !strings.Contains(z.Sanitize(before+"\n"+after), part) {
				t.Fatalf("%q survives in\n%q\nfrom %q", part, out, text)
			}
		}
	})
}

// halves are the two halves of a secret of 8 characters or more, else the
// secret: no half of it may survive, so a half-masked tail is found.
func halves(secret string) []string {
	if len(secret) < 4 {
		return nil
	}
	if len(secret) < 8 {
		return []string{secret}
	}
	return []string{secret[:len(secret)/2], secret[len(secret)/2:]}
}

func endsBlank(s string) bool   { return strings.ContainsAny(s[len(s)-1:], " \t\r\n") }
func startsBlank(s string) bool { return strings.ContainsAny(s[:1], " \t\r\n") }

var envName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// FuzzSanitizeNamedSecret: a secret given to a name that says password
// never survives, whatever text surrounds it, and sanitizing never panics.
func FuzzSanitizeNamedSecret(f *testing.F) {
	f.Add("prefix ", "DB_PASSWORD", "hunter2", " suffix")
	f.Add(`{"x": 1, `, `"client_secret"`, "abcdef", `}`)
	f.Add("line\n", "export API_KEY", "k3y", "\n")
	z := NewSanitizer("/home/alice")
	f.Fuzz(func(t *testing.T, before, name, secret, after string) {
		out := z.Sanitize(before + name + "=" + secret + after)
		if len(secret) < 4 || strings.ContainsAny(secret, "\"' \t\n\r,;&}]=:[") || !strings.Contains(strings.ToLower(name), "password") {
			return
		}
		// Names as environments and configs spell them.
		if strings.Contains(before+after, secret) || !envName.MatchString(name) {
			return
		}
		if strings.Contains(out, secret) {
			t.Fatalf("%q kept the secret: %q", before+name+"="+secret+after, out)
		}
	})
}

// FuzzSkimmingMissesNothing: Sanitize, which runs a rule only over a text
// holding one of its keys, gives what running every rule gives: every
// case TestSanitize knows, every shape of secretShapes, in any case, and
// the letters outside ASCII that (?i) folds into ASCII ones.
func FuzzSkimmingMissesNothing(f *testing.F) {
	for _, c := range sanitizeCases {
		f.Add(c.in)
		f.Add(strings.ToUpper(c.in))
	}
	for _, s := range secretShapes {
		f.Add(strings.Replace(s.text, "%s", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", 1))
	}
	for _, s := range []string{
		"AUTHORIZATION: token abc", "x BeArEr abcdefgh12345", "Set-CooKie: a=b; Path=/", "coo\u212aie: sid=abc123",
		"\u212aey=v", "db_pa\u017f\u017f=hunter2", "X-Api-KEY: abc", `{"Private": "v", "tokens": 3}`,
		`pos "key": 1, \"secret\": \"v\"`, "a.b-pat_2=x y", "path=/x KEY=y", "run\ncurl -u bob:pw https://x",
		"mysql -uroot -phunter2", "token_ghp_" + strings.Repeat("a", 36), "sk-" + strings.Repeat("b", 20) + "…",
		"ab\" token: v", "x.y.secret.z: w", "--password v --auth-token=w", "...\\\"pass\\\": \\\"v\\\"",
	} {
		f.Add(s)
	}
	z := NewSanitizer("/home/alice")
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := z.Sanitize(text), z.sanitize(text, false); got != want {
			t.Fatalf("skimming %q gave\n%q\nwhere every rule gives\n%q", text, got, want)
		}
	})
}
