package activities

import (
	"path"
	"regexp"
	"strings"
)

// EnvPolicy decides which of the worker's environment variables a child pi
// sees. A child is a coding agent and needs the user's environment and its
// model's provider credentials, not the service's own secrets: by default
// it never gets the worker's Temporal settings (TEMPORAL_*: its address,
// API key and TLS material), nor a variable whose name says PASSWORD,
// SECRET, TOKEN, CREDENTIAL or PRIVATE, nor a value that carries
// credentials in a URL (scheme://user:pass@host). Provider credentials are
// kept (*_API_KEY, AWS_*, GOOGLE_APPLICATION_CREDENTIALS, the tokens pi's
// providers read).
//
// Patterns are shell globs on the variable's name, case-insensitive. The
// order: Allow, then Deny, then the defaults; Strict passes only Allow, a
// base set (PATH, HOME, locale, proxies, PI_*) and provider credentials,
// for a worker shared by several users.
type EnvPolicy struct {
	Allow  []string
	Deny   []string
	Strict bool
}

var (
	// serviceSecrets are denied by default.
	serviceSecrets = []string{"TEMPORAL_*", "*PASSWORD*", "*PASSWD*", "*SECRET*", "*TOKEN*", "*CREDENTIAL*", "*PRIVATE*"}
	// providerCredentials are what pi's providers read (pi's
	// docs/providers.md): kept unless Deny names them.
	providerCredentials = []string{"*_API_KEY", "AWS_*", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT",
		"ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_OAUTH_TOKEN", "COPILOT_GITHUB_TOKEN", "HF_TOKEN"}
	// baseEnv is what a process needs to run at all (Strict keeps it).
	baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "EDITOR", "VISUAL", "PI_*", "XDG_*"}
	// urlCredentials is a value with a password in a URL.
	urlCredentials = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@`)
)

// Filter returns the variables of env (KEY=value) a child gets.
func (p EnvPolicy) Filter(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if p.passes(name, value) {
			out = append(out, kv)
		}
	}
	return out
}

func (p EnvPolicy) passes(name, value string) bool {
	switch {
	case matchAny(p.Allow, name):
		return true
	case matchAny(p.Deny, name), strings.HasPrefix(strings.ToUpper(name), "TEMPORAL_"):
		return false
	case matchAny(providerCredentials, name):
		return true
	case p.Strict:
		return matchAny(baseEnv, name)
	case matchAny(serviceSecrets, name), urlCredentials.MatchString(value):
		return false
	}
	return true
}

func matchAny(patterns []string, name string) bool {
	upper := strings.ToUpper(name)
	for _, pat := range patterns {
		if ok, _ := path.Match(strings.ToUpper(pat), upper); ok {
			return true
		}
	}
	return false
}
