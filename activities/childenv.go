package activities

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/durable-pi/subagents/profiles"
)

// A child pi's environment: what of the worker's own it sees (EnvPolicy),
// and what the worker adds for it (childEnv): its markers, its PATH and its
// profile's API key.

// EnvPolicy decides which of the worker's environment variables a child pi
// sees. A child is a coding agent: it needs the user's environment and its
// model's provider credentials, not the user's other secrets nor the
// service's own. It never gets the worker's own nesting variables
// (callerEnv: PI_SUBAGENT_*), whatever Allow says. By default it never gets:
//   - the worker's Temporal settings (TEMPORAL_*: its address, API key and
//     TLS material);
//   - a variable whose name looks secret (secretName: PASS, PWD, PAT, AUTH,
//     SECRET, TOKEN, CREDENTIAL, PRIVATE, JWT, a KEY of a service), or
//     KUBECONFIG;
//   - a value that carries a secret: credentials in a URL
//     (scheme://user:pass@host, scheme://:pass@host, ?password=...), or a
//     token of a known shape (a private key, ghp_..., sk_live_...); but a
//     variable of folders (PATH, *PATH, HOME, *DIR) keeps its value.
//
// A provider credential is kept by its exact name: the variables pi 0.87.1
// reads for its model providers (pi-ai's env-api-keys and providers.md),
// and the names the user's pi config interpolates ($NAME in models.json or
// auth.json). The static AWS credentials (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) open the whole AWS account, not
// one model: only a child whose model is Amazon Bedrock gets them
// (FilterFor); AWS_PROFILE, AWS_BEARER_TOKEN_BEDROCK and the container and
// web-identity settings serve Bedrock for every child.
//
// Patterns are shell globs on the variable's name, case-insensitive. The
// order: Allow, then Deny, then provider credentials, then the secret
// rules; Strict then passes only a base set (PATH, HOME, locale, proxies,
// PI_*), for a worker shared by several users.
type EnvPolicy struct {
	Allow  []string
	Deny   []string
	Strict bool
}

// callerEnv say who a pi is (profiles' nesting variables): a worker started
// by a child's pi would have that child's, and pass another session's ID
// and token to every child it runs. A child gets its own, set by the
// worker (childEnv), never the worker's.
var callerEnv = map[string]bool{
	profiles.NestedEnv: true, profiles.ParentSessionEnv: true, profiles.TokenEnv: true, profiles.DepthEnv: true, profiles.ChildEnv: true,
}

// providerEnv are the provider credentials and settings pi reads, by exact
// name: kept unless Deny names them.
var providerEnv = map[string]bool{}

func init() {
	for _, name := range []string{
		// pi-ai dist/env-api-keys.js, getApiKeyEnvVars.
		"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_OAUTH_TOKEN", "COPILOT_GITHUB_TOKEN",
		"ANT_LING_API_KEY", "QWEN_TOKEN_PLAN_API_KEY", "QWEN_TOKEN_PLAN_CN_API_KEY", "OPENAI_API_KEY",
		"AZURE_OPENAI_API_KEY", "NVIDIA_API_KEY", "DEEPSEEK_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_API_KEY",
		"GROQ_API_KEY", "CEREBRAS_API_KEY", "XAI_API_KEY", "RADIUS_API_KEY", "OPENROUTER_API_KEY",
		"AI_GATEWAY_API_KEY", "ZAI_API_KEY", "ZAI_CODING_CN_API_KEY", "MISTRAL_API_KEY", "MINIMAX_API_KEY",
		"MINIMAX_CN_API_KEY", "MOONSHOT_API_KEY", "HF_TOKEN", "FIREWORKS_API_KEY", "TOGETHER_API_KEY",
		"BASETEN_API_KEY", "OPENCODE_API_KEY", "KIMI_API_KEY", "META_API_KEY", "CLOUDFLARE_API_KEY",
		"XIAOMI_API_KEY", "XIAOMI_TOKEN_PLAN_CN_API_KEY", "XIAOMI_TOKEN_PLAN_AMS_API_KEY", "XIAOMI_TOKEN_PLAN_SGP_API_KEY",
		// providers.md: the settings beside the keys.
		"AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_RESOURCE_NAME", "AZURE_OPENAI_API_VERSION", "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
		"CLOUDFLARE_ACCOUNT_ID", "CLOUDFLARE_GATEWAY_ID", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "LLAMA_BASE_URL",
		// Vertex AI's Application Default Credentials: a file's path, not
		// the secret; the child can read the file anyway.
		"GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
		// Bedrock for every child: a profile and files name where the
		// credentials are, the bearer token is Bedrock's own key.
		"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
		"AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
	} {
		providerEnv[name] = true
	}
}

// bedrockEnv are the AWS credentials pi's Bedrock provider reads from the
// environment that open more than Bedrock: a child gets them only when its
// model is Bedrock's.
var bedrockEnv = map[string]bool{
	"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true, "AWS_CONTAINER_AUTHORIZATION_TOKEN": true,
}

// bedrockProvider is pi's provider name for Amazon Bedrock.
const bedrockProvider = "amazon-bedrock"

// baseEnv is what a process needs to run at all (Strict keeps it).
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "EDITOR", "VISUAL", "PI_*", "XDG_*"}

// ProviderCredential is whether a child may be given variable name as a
// model provider's credential: a name pi reads for its providers, or one
// the user's models.json or auth.json (in env's PI_CODING_AGENT_DIR, else
// ~/.pi/agent) reads for a provider of their own.
func ProviderCredential(name string, env []string) bool {
	return providerEnv[name] || configuredEnvNames(env)[name]
}

// Filter returns the variables of env (KEY=value) a child gets, whatever
// its model (the Bedrock-only credentials are dropped).
func (p EnvPolicy) Filter(env []string) []string {
	return p.FilterFor("", env)
}

// FilterFor returns the variables of env a child whose model is model
// (provider/id) gets.
func (p EnvPolicy) FilterFor(model string, env []string) []string {
	provider, _, _ := strings.Cut(model, "/")
	configured := configuredEnvNames(env)
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if p.passes(name, value, provider, configured) {
			out = append(out, kv)
		}
	}
	return out
}

func (p EnvPolicy) passes(name, value, provider string, configured map[string]bool) bool {
	upper := strings.ToUpper(name)
	switch {
	case callerEnv[upper]:
		// Whatever Allow says: they are the worker's, and a child gets its
		// own (childEnv, the admission's).
		return false
	case matchAny(p.Allow, name):
		return true
	case matchAny(p.Deny, name), strings.HasPrefix(upper, "TEMPORAL_"):
		return false
	case providerEnv[upper], configured[upper], bedrockEnv[upper] && provider == bedrockProvider:
		return true
	case secretEnvName(name), envSecretValue(value) && !folderEnv(upper):
		return false
	case p.Strict:
		return matchAny(baseEnv, name)
	}
	return true
}

// envSecrets remembers secretValue's answer for environment values: the
// worker's few dozen values go through the policy for every child it
// starts, and secretValue's rules are regular expressions (3.5% of the
// CPU a one-task stub delegation costs, by the load bench's profile).
// envSecretsMax bounds it: the worker's environment is far smaller, and a
// value seen beyond it is checked each time, as before.
var (
	envSecrets      sync.Map // value → bool
	envSecretsCount atomic.Int64
)

const envSecretsMax = 4096

// envSecretValue is secretValue, remembered for the values envSecrets holds.
func envSecretValue(v string) bool {
	if known, ok := envSecrets.Load(v); ok {
		return known.(bool)
	}
	secret := secretValue(v)
	if envSecretsCount.Load() < envSecretsMax {
		if _, loaded := envSecrets.LoadOrStore(v, secret); !loaded {
			envSecretsCount.Add(1)
		}
	}
	return secret
}

// secretEnvName is a variable's name that says it holds a secret, or that
// hands a child more of the user's powers than its work needs: the cluster
// configuration kubectl reads.
func secretEnvName(name string) bool {
	return secretName(name) || strings.Contains(strings.ToUpper(name), "KUBECONFIG")
}

// folderEnv names a variable that holds folders (PATH, GOPATH, HOME,
// TMPDIR, PWD): its value is no secret even where a folder's name looks
// like a token (/opt/sk-learn-examples-and-notebooks/bin), and a child
// without its PATH runs nothing.
func folderEnv(upper string) bool {
	switch upper {
	case "PWD", "OLDPWD", "SHELL":
		return true
	}
	return strings.HasSuffix(upper, "PATH") || upper == "HOME" || strings.HasSuffix(upper, "_HOME") || strings.HasSuffix(upper, "DIR")
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

// configRef is a $NAME or ${NAME} in a value of pi's config (pi's
// resolve-config-value: apiKey and header values interpolate variables).
var configRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// configuredEnvNames are the variables the user's pi config (models.json
// and auth.json in the agent dir env names: PI_CODING_AGENT_DIR, else
// ~/.pi/agent) reads for its providers: a custom provider's key is a
// provider key too.
func configuredEnvNames(env []string) map[string]bool {
	var dir, home string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PI_CODING_AGENT_DIR="); ok {
			dir = v
		} else if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if dir == "" && home != "" {
		dir = filepath.Join(home, ".pi", "agent")
	}
	names := map[string]bool{}
	if dir == "" {
		return names
	}
	for _, file := range []string{"models.json", "auth.json"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			continue
		}
		var doc any
		if json.Unmarshal(b, &doc) != nil {
			continue
		}
		addConfigRefs(doc, names)
	}
	return names
}

// addConfigRefs adds the names every string of v interpolates; a value
// starting with "!" is a command, "$$" a literal "$".
func addConfigRefs(v any, names map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			addConfigRefs(e, names)
		}
	case []any:
		for _, e := range v {
			addConfigRefs(e, names)
		}
	case string:
		if strings.HasPrefix(v, "!") {
			return
		}
		for _, m := range configRef.FindAllStringSubmatch(strings.ReplaceAll(v, "$$", ""), -1) {
			names[strings.ToUpper(m[1]+m[2])] = true
		}
	}
}

// apiKeyEnv passes a profile's apiKey in the environment, never on the
// command line: as PI_API_KEY (the delegate contract) and as the variable pi reads for the
// model's provider.
func apiKeyEnv(model, key string) []string {
	if key == "" {
		return nil
	}
	env := []string{"PI_API_KEY=" + key}
	if provider, _, ok := strings.Cut(model, "/"); ok && provider != "" {
		name, known := providerKeyVars[provider]
		if !known {
			name = strings.ToUpper(strings.ReplaceAll(provider, "-", "_")) + "_API_KEY"
		}
		env = append(env, name+"="+key)
	}
	return env
}

// providerKeyVars are the providers whose key variable is not simply
// <PROVIDER>_API_KEY (pi-ai's env-api-keys).
var providerKeyVars = map[string]string{
	"google":            "GEMINI_API_KEY",
	"google-vertex":     "GOOGLE_CLOUD_API_KEY",
	"huggingface":       "HF_TOKEN",
	"moonshotai":        "MOONSHOT_API_KEY",
	"vercel-ai-gateway": "AI_GATEWAY_API_KEY",
	"kimi-coding":       "KIMI_API_KEY",
}

// childEnv is the worker's environment, the configured additions, the
// markers that tell our extension it runs in a child and at which depth,
// Node 22 first on PATH, and extra (an apiKey).
func (a *Activities) childEnv(depth int, model string, extra []string) []string {
	// The worker's own environment goes through the policy, for this
	// child's model (a Bedrock child alone gets the static AWS keys); what
	// the worker's configuration names for children (Env) is meant for them.
	env := append(a.cfg.ChildEnvPolicy.FilterFor(model, os.Environ()), a.cfg.Env...)
	env = append(env, extra...)
	env = append(env, "PI_SUBAGENT_CHILD=1", "PI_SUBAGENT_DEPTH="+strconv.Itoa(max(depth, 1)))
	if a.cfg.PathPrefix != "" {
		search := os.Getenv("PATH")
		for _, kv := range a.cfg.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				search = v
			}
		}
		env = append(env, "PATH="+a.cfg.PathPrefix+string(os.PathListSeparator)+search)
	}
	return env
}
