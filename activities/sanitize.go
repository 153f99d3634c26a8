package activities

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sanitizer masks secrets and the user's home path in everything that
// leaves a child run: results, heartbeats, artifacts (the SingleResult contract).
type Sanitizer struct {
	home string
	// ownHome is home as a whole path part: /home/alice, not /home/alice2.
	ownHome *regexp.Regexp
}

// NewSanitizer returns a sanitizer that also replaces home (the worker
// user's home folder) with "~"; empty home skips that rule.
func NewSanitizer(home string) *Sanitizer {
	home = strings.TrimRight(home, "/")
	return &Sanitizer{home: home, ownHome: regexp.MustCompile(regexp.QuoteMeta(home) + `($|[^A-Za-z0-9._-])`)}
}

// otherHome is a path in another account's home folder (/home/bob/...,
// /Users/bob/...): what follows the account's name stays, the name is
// masked. /root stays as it is when the worker is not root: it names no
// account but root, which every machine has, and what follows it is
// what the child saw there (a secret in it is masked by the rules below). The worker's own home is "~" by then. A path starts the text,
// follows a character that no path holds, a JSON escape or "file://";
// /srv/home/bob is no home folder.
var otherHome = regexp.MustCompile(`(^|[^A-Za-z0-9._~/\\-]|\\[nrtfv]|file://)(/home|/Users)/([A-Za-z0-9_][A-Za-z0-9._-]*)`)

// sharedHomes are folders beside the accounts' homes that belong to none.
var sharedHomes = map[string]bool{"Shared": true, "Guest": true}

// otherUser is what stands for another account's name in a path.
const otherUser = "[REDACTED user]"

func maskOtherHome(m string) string {
	sub := otherHome.FindStringSubmatch(m)
	if sharedHomes[sub[3]] {
		return m
	}
	return sub[1] + sub[2] + "/" + otherUser
}

type secretRule struct {
	re   *regexp.Regexp
	repl string
	// keys are literals one of which every match holds: a text holding
	// none is passed over without running re. Go's regexp has no literal
	// to skip to in a rule that starts at a word boundary, and scans each
	// byte at about 10 MB/s: 25 rules made a 1 MB output take seconds to
	// sanitize. fold says the keys are ASCII lower case and match in any
	// case, as (?i) does.
	keys []string
	fold bool
}

// gitlabPrefixes are the prefixes of GitLab's tokens, as keys.
var gitlabPrefixes = []string{"glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glcbt-", "gloas-", "glsoat-", "glimt-", "glagent-"}

// secretRules are the shapes of secrets whatever names them, applied in
// order; the more specific key shapes come before the generic ones so the
// label says what was found. Each masks a whole value: a private key cut
// before its END line is masked to the end of the text.
var secretRules = []secretRule{
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|[\s\S]*)`), "[REDACTED private key]", []string{"-----BEGIN "}, false},
	{regexp.MustCompile(`(?i)(authorization\s*[:=]\s*["']?)(?:bearer\s+|basic\s+|token\s+)?[^\s"',;]+`), "${1}[REDACTED]", []string{"authorization"}, true},
	tokenRule(`(?i)bearer\s+[A-Za-z0-9._~+/=-]{8,}`, "Bearer [REDACTED]").foldKeys("bearer"),
	tokenRule(`sk-ant-[A-Za-z0-9_-]{16,}`, "[REDACTED anthropic key]", "sk-ant-"),
	tokenRule(`sk-[A-Za-z0-9_-]{16,}`, "[REDACTED api key]", "sk-"),
	tokenRule(`(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,}`, "[REDACTED stripe key]", "k_live_", "k_test_", "whsec_"),
	tokenRule(`gl(?:pat|dt|rt|ptt|ft|cbt|oas|soat|imt|agent)-[A-Za-z0-9_-]{20,}`, "[REDACTED gitlab token]", gitlabPrefixes...),
	tokenRule(`npm_[A-Za-z0-9]{30,}`, "[REDACTED npm token]", "npm_"),
	tokenRule(`hf_[A-Za-z0-9]{30,}`, "[REDACTED hugging face token]", "hf_"),
	tokenRule(`AIza[0-9A-Za-z_-]{30,}`, "[REDACTED google key]", "AIza"),
	tokenRule(`(?:AKIA|ASIA)[0-9A-Z]{16}\b`, "[REDACTED aws key id]", "AKIA", "ASIA"),
	tokenRule(`gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}`, "[REDACTED github token]", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
	// xoxd- (a browser session's cookie) is URL-encoded: "%" is in it.
	tokenRule(`xox[a-z]-[A-Za-z0-9%-]{10,}|xapp-[0-9]+-[A-Za-z0-9-]{10,}`, "[REDACTED slack token]", "xox", "xapp-"),
	tokenRule(`SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`, "[REDACTED sendgrid key]", "SG."),
	tokenRule(`eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}`, "[REDACTED jwt]", "eyJ"),
	// A token's start where a preview was cut ("…"). Every preview of this
	// package is cut after it is sanitized (issue 31); a text cut by
	// someone else before it reached the sanitizer still loses the start
	// of its token here, which is most of the secret.
	tokenRule(`(?:sk-|(?:sk|rk)_(?:live|test)_|whsec_|gl(?:pat|dt|rt|ptt|ft|cbt|oas|soat|imt|agent)-|npm_|hf_|AIza|AKIA|ASIA|gh[pousr]_|github_pat_|xox[a-z]-|xapp-|SG\.|eyJ)[A-Za-z0-9_./+=-]*…`, "[REDACTED cut token]…", "…"),
	// A Slack webhook's URL is its secret; a Sentry DSN's key is the user
	// part of its URL, with no password after it.
	{regexp.MustCompile(`\bhttps://hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+`), "https://hooks.slack.com/[REDACTED slack webhook]", []string{"hooks.slack"}, false},
	// Discord's and Teams' webhook URLs are their secret the same way.
	{regexp.MustCompile(`\bhttps://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/[A-Za-z0-9/_-]+`), "https://discord.com/api/webhooks/[REDACTED discord webhook]", []string{"discord"}, false},
	{regexp.MustCompile(`\bhttps://[A-Za-z0-9-]+\.webhook\.office\.com/[A-Za-z0-9/@_.-]+`), "https://webhook.office.com/[REDACTED teams webhook]", []string{".webhook.office.com/"}, false},
	{regexp.MustCompile(`(?i)\b(https?://)[0-9a-f]{32}(?::[0-9a-f]{32})?@`), "${1}[REDACTED]@", []string{"://"}, false},
	// Passwords a command line takes glued or after its own flag, where
	// no name says "password": curl -u user:pw, mysql -ppw, sshpass -p pw.
	// Each rule starts at its command (a word, or after a JSON escape as
	// tokenRule's), so -u 1000:1000 (docker) and -p 5432 (psql) stay; the
	// password ends at a blank, a quote or a backslash (a JSON escape is
	// not part of it).
	{regexp.MustCompile(`((?:\b|\\[nrtfv])curl\b[^\n]*?[ \t](?:-u|-U|--user|--proxy-user)(?:[ \t]+|=)?["']?[^\s:"'\\]*:)[^\s"'\\]+`), "${1}[REDACTED]", []string{"curl"}, false},
	{regexp.MustCompile(`((?:\b|\\[nrtfv])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlslap|mariadb|mariadb-dump)\b[^\n]*?[ \t]-p["']?)[^\s"'\\-][^\s"'\\]*`), "${1}[REDACTED]", []string{"mysql", "mariadb"}, false},
	{regexp.MustCompile(`((?:\b|\\[nrtfv])sshpass\b[^\n]*?[ \t]-p[ \t]*["']?)[^\s"'\\]+`), "${1}[REDACTED]", []string{"sshpass"}, false},
	// redis-cli -a pw (its --pass is a name that says so).
	{regexp.MustCompile(`((?:\b|\\[nrtfv])redis-cli\b[^\n]*?[ \t]-a[ \t]+["']?)[^\s"'\\]+`), "${1}[REDACTED]", []string{"redis-cli"}, false},
	// Credentials in a URL: scheme://user:password@host keeps the user,
	// with or without one. The password runs to the last "@" before the
	// query, so one holding "@" or "/" is masked whole (a path holding "@"
	// after it is masked too: safer than a tail of the password).
	{urlCredentials, "${1}:[REDACTED]@", []string{"://"}, false},
}

// tokenRule is the rule for a token of a known shape: it starts a word,
// follows an escape as JSON text writes it ("echo hi\nghp_…" in a tool
// call's arguments, where "\n" leaves no word boundary before the token),
// or is glued to a word by "_" (token_ghp_…); the escape or the "_" stays,
// the token is masked.
func tokenRule(shape, label string, keys ...string) secretRule {
	return secretRule{re: regexp.MustCompile(`(?:\b|(\\[nrtfv]|\\u[0-9A-Fa-f]{4}|_))(?:` + shape + `)`), repl: "${1}" + label, keys: keys}
}

// foldKeys gives a rule keys that match in any case.
func (r secretRule) foldKeys(keys ...string) secretRule {
	r.keys, r.fold = keys, true
	return r
}

// mayMatch is false when s holds none of the rule's keys: then re cannot
// match it.
func (r secretRule) mayMatch(s string) bool {
	return holdsAny(s, r.keys, r.fold)
}

// holdsAny is whether s holds one of keys; with fold, keys are ASCII lower
// case and match in any case. (?i) also folds the Kelvin sign into k and
// the long s into s, the only letters outside ASCII that fold into it: a
// text holding either may match whatever the keys.
func holdsAny(s string, keys []string, fold bool) bool {
	if fold && (strings.Contains(s, "\u212a") || strings.Contains(s, "\u017f")) {
		return true
	}
	for _, k := range keys {
		if fold && indexFold(s, k) >= 0 || !fold && strings.Contains(s, k) {
			return true
		}
	}
	return false
}

// indexFold is the first index of key (ASCII lower case) in s in any ASCII
// case, or -1.
func indexFold(s, key string) int {
	if key == "" {
		return 0
	}
	first, upper := key[0], key[0]
	if 'a' <= first && first <= 'z' {
		upper = first - 'a' + 'A'
	}
	for i := 0; i+len(key) <= len(s); i++ {
		if c := s[i]; c != first && c != upper {
			continue
		}
		if strings.EqualFold(s[i:i+len(key)], key) {
			return i
		}
	}
	return -1
}

// cookieHeader is a Cookie or Set-Cookie header's value, to the end of its
// line, a quote or a backslash (a JSON escape ends it); the header starts
// a word or follows a JSON escape, as tokenRule's tokens.
var cookieHeader = regexp.MustCompile(`(?i)(?:\b|\\[nrtfv])((?:set-)?cookie)(\\?["']?[ \t]*:[ \t]*\\?["']?)([^\r\n"'\\]+)`)

// curlCookie is curl's -b/--cookie and its argument: quoted (to its
// quote, blanks and all: "a=1; b=2") or a word. An argument with no "="
// is a cookie file's name and stays.
var curlCookie = regexp.MustCompile(`((?:\b|\\[nrtfv])curl\b[^\n]*?[ \t](?:-b|--cookie)(?:[ \t]+|=))(\\?["'][^\n"'\\]*|[^\s"'\\]+)`)

// maskCurlCookies masks the values of curlCookie's match, as a Cookie
// header's.
func maskCurlCookies(m string) string {
	sub := curlCookie.FindStringSubmatchIndex(m)
	return m[:sub[4]] + cookiePair.ReplaceAllStringFunc(m[sub[4]:], func(pair string) string {
		name, _, _ := strings.Cut(pair, "=")
		return name + "=[REDACTED]"
	})
}

// cookiePair is one name=value of a cookie header.
var cookiePair = regexp.MustCompile(`[^\s=;,]+=[^\s;,]+`)

// maskCookies masks the values of a cookie header (cookieHeader's match):
// a cookie's value is a session. Every value of a Cookie header; only the
// first of a Set-Cookie header, the cookie itself (the others are its
// path, expiry and flags).
func maskCookies(h string) string {
	m := cookieHeader.FindStringSubmatchIndex(h)
	head, value := h[:m[6]], h[m[6]:]
	first := strings.EqualFold(h[m[2]:m[3]], "set-cookie")
	n := 0
	return head + cookiePair.ReplaceAllStringFunc(value, func(pair string) string {
		n++
		if first && n > 1 {
			return pair
		}
		name, _, _ := strings.Cut(pair, "=")
		return name + "=[REDACTED]"
	})
}

// urlCredentials is a password in a URL's authority.
var urlCredentials = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#:@"'<>]*):[^\s?#"'<>]*@`)

// secretValue is a value that carries a secret whatever names it: a token
// of a known shape, or credentials in a URL (a password, or a query
// parameter whose name says secret).
func secretValue(v string) bool {
	for _, r := range secretRules {
		if r.mayMatch(v) && r.re.MatchString(v) {
			return true
		}
	}
	if (cookieHeader.MatchString(v) || curlCookie.MatchString(v)) && cookiePair.MatchString(v) {
		return true
	}
	if !strings.Contains(v, "://") {
		return false
	}
	_, query, ok := strings.Cut(v, "?")
	if !ok {
		return false
	}
	for _, param := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		if name, _, ok := strings.Cut(param, "="); ok && secretName(name) {
			return true
		}
	}
	return false
}

// secretName is whether a name (a variable, a key, a flag) says its value
// is a secret, word by word (DB_PASS, dbPass and db-pass alike):
// password, passwd, passphrase, pass; pwd (not PWD, OLDPWD: folders);
// secret; token (not a count of tokens); credential; private; jwt; auth
// (not author, authSource); pat as a word (GITHUB_PAT, GH_PAT2; not PATH,
// PATTERN); salt (APP_SALT: what makes its hashes unguessable); dsn (a
// Sentry DSN, a database's: credentials in a URL); webhook
// (SLACK_WEBHOOK_URL, DISCORD_WEBHOOK, TEAMS_WEBHOOK: a webhook's URL is
// its secret, whoever holds it posts; not "webhooks", a switch);
// key after another word (STRIPE_API_KEY, AccessKey; not "key" alone, a
// map's key).
func secretName(name string) bool {
	// PWD and OLDPWD, as the shell names them, are folders; a key "pwd"
	// in a config or JSON is a password.
	switch strings.Trim(name, `-"'\`) {
	case "PWD", "OLDPWD":
		return false
	}
	words := nameWords(name)
	for i, w := range words {
		next := ""
		if i+1 < len(words) {
			next = words[i+1]
		}
		switch {
		case containsAny(w, "secret", "passw", "passphrase", "credential", "private", "jwt", "pwd"),
			strings.Contains(w, "token") && !strings.Contains(w, "tokens") && !strings.Contains(w, "tokeniz"),
			strings.Contains(w, "pass") && !innocentPass[w],
			strings.Contains(w, "auth") && !authSetting(w, next),
			w == "pat" || strings.HasPrefix(w, "pat") && len(w) > 3 && strings.Trim(w[3:], "0123456789") == "",
			w == "key" && i > 0, strings.HasSuffix(w, "apikey"), keyWords[w],
			w == "salt" || w == "dsn" || w == "webhook" || w == "webhookurl" || w == "webhookuri":
			return true
		}
	}
	return false
}

// authSetting is a word with "auth" in it that names no secret: an author,
// an authority, or how to authenticate (authSource, AUTH_TYPE).
func authSetting(w, next string) bool {
	if strings.Contains(w, "author") && !strings.Contains(w, "authoriz") && !strings.Contains(w, "authoris") {
		return true
	}
	for _, s := range authSettings {
		if w == "auth"+s || w == "auth" && next == s {
			return true
		}
	}
	return false
}

// authSettings follow "auth" in names of settings that are not secrets.
var authSettings = []string{"source", "mechanism", "method", "type", "mode", "db", "url", "uri", "domain", "provider", "enabled"}

// innocentPass are words with "pass" in them that name no secret.
var innocentPass = map[string]bool{"bypass": true, "compass": true, "surpass": true, "trespass": true, "encompass": true,
	"overpass": true, "underpass": true, "passthrough": true, "passenger": true, "passengers": true, "passage": true,
	"passages": true, "passive": true, "passed": true, "passes": true, "passing": true, "passover": true}

// keyWords are keys named in one word (camel case splits AccessKey, not
// ACCESSKEY).
var keyWords = map[string]bool{"accesskey": true, "secretkey": true, "privatekey": true, "masterkey": true,
	"signingkey": true, "authkey": true, "sessionkey": true, "encryptionkey": true, "licensekey": true}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// nameWords splits a name into lower-case words at every character that is
// not a letter or digit and where camel case starts a word (dbPass,
// AccessKey; APIKey stays one word).
func nameWords(name string) []string {
	var words []string
	var cur []rune
	var prev rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// assignment is a name given a value: KEY=value, key: value, "key": value,
// key := value, or a flag and its value (--password value); the name may
// be quoted, also as JSON inside a JSON string (\"key\"). Where the value
// ends is maskValues' to decide.
var assignment = regexp.MustCompile(`(\\?["']?)([A-Za-z0-9_.-]+)(\\?["']?)([ \t]*(?::=|=|:)[ \t]*|[ \t]+)`)

// maskValues masks the value of every assignment whose name says secret,
// whole: a quoted value to its closing quote (JSON escapes included) or the
// end of the line, an unquoted one to the end of its word (given with "=")
// or of its line (given with ":"). A name that says nothing, or gives no
// value, is passed over and the search goes on after it. With skim
// (Sanitize's), the search goes on at the next name that holds one of
// secretNameKeys.
func maskValues(s string, skim bool) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	var keys *keyFinder
	if skim {
		keys = newKeyFinder(s, secretNameKeys)
	}
	for pos := 0; pos < len(s); {
		// Where the next assignment lies first, then its parts within it:
		// the parts cost more to find, so only in a few bytes.
		window, runEnd := len(s), -1
		if keys != nil {
			// Only a name that holds a key can say secret: the names
			// before the next key are passed over unread, as this loop
			// would pass them over one by one (a regexp search each).
			// The name holding the key starts where its run of name
			// bytes does, after its opening quote and the backslash
			// before it (JSON in a JSON string); the search reads no
			// further than that name's assignment could reach, and
			// without one goes on after the name.
			k := keys.next(pos)
			if k < 0 {
				break
			}
			start := k
			runEnd = k
			for start > pos && nameByte(s[start-1]) {
				start--
			}
			if start > pos && (s[start-1] == '"' || s[start-1] == '\'') {
				start--
			}
			if start > pos && s[start-1] == '\\' {
				start--
			}
			for runEnd < len(s) && nameByte(s[runEnd]) {
				runEnd++
			}
			pos, window = start, assignmentEnd(s, runEnd)
		}
		loc := assignment.FindStringIndex(s[pos:window])
		if loc == nil && runEnd >= 0 {
			pos = runEnd
			continue
		}
		if loc == nil {
			break
		}
		m := assignment.FindStringSubmatchIndex(s[pos+loc[0] : pos+loc[1]])
		if m == nil {
			break
		}
		for i := range m {
			m[i] += pos + loc[0]
		}
		nameStart, nameEnd, sepStart, end := m[4], m[5], m[8], m[1]
		name, sep := s[nameStart:nameEnd], strings.TrimSpace(s[sepStart:end])
		flag := sep == "" && strings.HasPrefix(name, "--")
		if (sep == "" && !flag) || !secretName(name) {
			pos = nameEnd
			continue
		}
		query := m[2] > 0 && (s[m[2]-1] == '?' || s[m[2]-1] == '&')
		vStart, vEnd := valueSpan(s, end, sep, query)
		v := s[vStart:vEnd]
		if v == "" || strings.HasPrefix(v, "[REDACTED") || (flag && strings.HasPrefix(v, "-")) || strings.HasPrefix(v, "=") || harmless(v) {
			pos = max(end, nameEnd+1)
			continue
		}
		// A JSON key's bare value (a number) becomes a string: the JSON
		// stays valid.
		mask := "[REDACTED]"
		if q := s[m[2]:m[3]]; vStart == end && sep == ":" && strings.HasSuffix(q, `"`) && s[m[6]:m[7]] == q {
			mask = q + mask + q
		}
		b.WriteString(s[done:vStart])
		b.WriteString(mask)
		done, pos = vEnd, vEnd
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// assignmentEnd is where an assignment of the name that ends at i ends at
// the furthest: its closing quote, blanks, ":=", "=" or ":", blanks.
func assignmentEnd(s string, i int) int {
	if i < len(s) && s[i] == '\\' {
		i++
	}
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	blanks := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	blanks()
	if strings.HasPrefix(s[i:], ":=") {
		i += 2
	} else if i < len(s) && (s[i] == ':' || s[i] == '=') {
		i++
	}
	blanks()
	return i
}

// secretNameKeys are what every name secretName says secret holds, in
// lower case: one of its words holds one of them.
var secretNameKeys = []string{"secret", "pass", "credential", "private", "jwt", "pwd", "token", "auth", "pat", "key", "salt", "dsn", "webhook"}

// nameByte is a byte of assignment's names.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
}

// keyFinder finds the next of its keys in a text in any ASCII case,
// reading each byte once per key however often it is asked.
type keyFinder struct {
	lower string
	keys  []string
	// at is each key's next index found so far, -1 when there is none
	// left.
	at []int
}

func newKeyFinder(s string, keys []string) *keyFinder {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	at := make([]int, len(keys))
	for i := range at {
		at[i] = -2 // not looked for yet
	}
	return &keyFinder{lower: string(b), keys: keys, at: at}
}

// next is the index of the first key at pos or after it, or -1.
func (f *keyFinder) next(pos int) int {
	first := -1
	for i, k := range f.keys {
		if f.at[i] == -1 {
			continue
		}
		if f.at[i] < pos {
			f.at[i] = -1
			if j := strings.Index(f.lower[pos:], k); j >= 0 {
				f.at[i] = pos + j
			}
		}
		if f.at[i] >= 0 && (first < 0 || f.at[i] < first) {
			first = f.at[i]
		}
	}
	return first
}

// harmless values are no secret whatever their name: "private": true.
func harmless(v string) bool {
	switch strings.ToLower(v) {
	case "true", "false", "null", "none", "nil", "undefined":
		return true
	}
	return false
}

// valueSpan is where the value that starts at i lies, quotes excluded. It
// reads no further than the value's end: a long line holding many values
// costs its length, not its length for each value.
func valueSpan(s string, i int, sep string, query bool) (int, int) {
	switch {
	case strings.HasPrefix(s[i:], `\"`):
		for j := i + 2; j < len(s); j++ {
			if s[j] == '\n' || s[j] == '\r' || strings.HasPrefix(s[j:], `\"`) {
				return i + 2, j
			}
		}
		return i + 2, len(s)
	case strings.HasPrefix(s[i:], `"`):
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '"', '\n', '\r':
				return i + 1, j
			case '\\':
				if j+1 < len(s) && s[j+1] != '\n' && s[j+1] != '\r' {
					j++
				}
			}
		}
		return i + 1, len(s)
	case strings.HasPrefix(s[i:], `'`):
		for j := i + 1; j < len(s); j++ {
			if s[j] == '\'' || s[j] == '\n' || s[j] == '\r' {
				return i + 1, j
			}
		}
		return i + 1, len(s)
	}
	// A connection string (Password=my secret;Database=d): a value given
	// with "=" runs to the ";" before the next name, blanks and all.
	if sep == "=" && !query {
		line := s[i:]
		if k := strings.IndexAny(line, "\n\r"); k >= 0 {
			line = line[:k]
		}
		if k := strings.IndexByte(line, ';'); k > 0 && !strings.ContainsAny(line[:k], "=\"'") && nextName.MatchString(line[k:]) {
			return i, i + k
		}
	}
	j := i
	for ; j < len(s); j++ {
		c := s[j]
		if c == '\n' || c == '\r' {
			break
		}
		// Given with "=" (or a flag), a value is a word: it ends at a
		// blank, at "&" between query parameters, at a line break as JSON
		// text escapes it.
		if sep != ":" && (c == ' ' || c == '\t' || c == '&' && query ||
			c == '\\' && j+1 < len(s) && strings.IndexByte("nrt", s[j+1]) >= 0) {
			break
		}
		if (c == ',' || c == ';' || c == ' ' || c == '\t') && nextName.MatchString(s[j:]) {
			break
		}
	}
	// Punctuation that closes what holds the value is not part of it.
	for j > i && strings.IndexByte(`"'`+",;.)}]> \t", s[j-1]) >= 0 {
		j--
	}
	return i, j
}

// nextName is where an unquoted value stops: the next name given a value
// (Password:abc User:bob, a: 1, b: 2).
var nextName = regexp.MustCompile(`^(?:[,;][ \t]*|[ \t]+)\\?["']?[A-Za-z0-9_.-]+\\?["']?[ \t]*(?::=|=|:)`)

// stackFrame matches one frame of a JavaScript, Python, Java or Go trace.
var stackFrame = regexp.MustCompile(`^\s+(?:at\s|File\s".*",\s+line\s\d+|\S+\.go:\d+)`)

// maxStackFrames is how many frames of one trace survive: the top frames say
// where it failed; the rest only fills the parent's context window.
const maxStackFrames = 8

// Sanitize returns s with the home path shortened, secrets masked and
// over-long stack traces cut. The home path goes first, so that no mask
// makes a new secret shape of what surrounds it; sanitizing twice gives
// what sanitizing once gave. A nil Sanitizer masks secrets and knows no
// home.
//
// Sanitize the whole text, then cut it (preview, tail, cap): a cut token
// no longer has its shape, and what is left of it would pass.
func (z *Sanitizer) Sanitize(s string) string {
	return z.sanitize(s, true)
}

// sanitize is Sanitize; with skim, a rule runs only over a text that holds
// one of its keys. Without, every rule runs: the reference the tests hold
// the skimming to.
func (z *Sanitizer) sanitize(s string, skim bool) string {
	if s == "" {
		return s
	}
	if z != nil && z.home != "" && z.home != "/" {
		s = z.ownHome.ReplaceAllString(s, "~$1")
	}
	if !skim || holdsAny(s, otherHomeKeys, false) {
		s = otherHome.ReplaceAllStringFunc(s, maskOtherHome)
	}
	for _, r := range secretRules {
		if !skim || r.mayMatch(s) {
			s = r.re.ReplaceAllString(s, r.repl)
		}
	}
	if !skim || holdsAny(s, cookieKeys, true) {
		s = cookieHeader.ReplaceAllStringFunc(s, maskCookies)
	}
	if !skim || strings.Contains(s, "curl") {
		s = curlCookie.ReplaceAllStringFunc(s, maskCurlCookies)
	}
	s = maskValues(s, skim)
	return cutStackTraces(s)
}

// otherHomeKeys and cookieKeys are what otherHome's and cookieHeader's
// matches hold (secretRule's keys).
var (
	otherHomeKeys = []string{"/home/", "/Users/"}
	cookieKeys    = []string{"cookie"}
)

func cutStackTraces(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); {
		if !stackFrame.MatchString(lines[i]) {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i
		for j < len(lines) && stackFrame.MatchString(lines[j]) {
			j++
		}
		if n := j - i; n > maxStackFrames {
			out = append(out, lines[i:i+maxStackFrames]...)
			out = append(out, fmt.Sprintf("    ... (%d more stack frames)", n-maxStackFrames))
		} else {
			out = append(out, lines[i:j]...)
		}
		i = j
	}
	return strings.Join(out, "\n")
}

// Truncated is text cut to a character cap, with the task contract's accounting.
type Truncated struct {
	Text          string
	Truncated     bool
	TotalChars    int
	ReturnedChars int
}

// Truncate keeps the first max characters (runes) of s.
func Truncate(s string, max int) Truncated {
	total := utf8.RuneCountInString(s)
	if max <= 0 || total <= max {
		return Truncated{Text: s, TotalChars: total, ReturnedChars: total}
	}
	cut := 0
	for i := range s {
		if cut == max {
			return Truncated{Text: s[:i], Truncated: true, TotalChars: total, ReturnedChars: max}
		}
		cut++
	}
	return Truncated{Text: s, TotalChars: total, ReturnedChars: total}
}
