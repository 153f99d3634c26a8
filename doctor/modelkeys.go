package doctor

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/durable-pi/subagents/profiles"
)

// Where pi finds a provider's key (its docs: providers.md, models.md): a
// credential /login stored in auth.json, an apiKey of the provider in
// models.json (a literal, $NAME or ${NAME} from the environment, or a
// !command), then the provider's variable or the cloud's own credentials.
// The check names where each key is found, never the key.

// providerEnv are the variables pi 0.87.1 reads for a provider's key
// (pi-ai's env-api-keys, providers.md).
var providerEnv = map[string][]string{
	"anthropic":                  {"ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"},
	"github-copilot":             {"COPILOT_GITHUB_TOKEN"},
	"ant-ling":                   {"ANT_LING_API_KEY"},
	"qwen-token-plan":            {"QWEN_TOKEN_PLAN_API_KEY"},
	"qwen-token-plan-cn":         {"QWEN_TOKEN_PLAN_CN_API_KEY"},
	"qwen-token-plan-individual": {"QWEN_TOKEN_PLAN_API_KEY"},
	"openai":                     {"OPENAI_API_KEY"},
	"azure-openai-responses":     {"AZURE_OPENAI_API_KEY"},
	"nvidia":                     {"NVIDIA_API_KEY"},
	"deepseek":                   {"DEEPSEEK_API_KEY"},
	"google":                     {"GEMINI_API_KEY"},
	"google-vertex":              {"GOOGLE_CLOUD_API_KEY"},
	"groq":                       {"GROQ_API_KEY"},
	"cerebras":                   {"CEREBRAS_API_KEY"},
	"xai":                        {"XAI_API_KEY"},
	"radius":                     {"RADIUS_API_KEY"},
	"openrouter":                 {"OPENROUTER_API_KEY"},
	"vercel-ai-gateway":          {"AI_GATEWAY_API_KEY"},
	"zai":                        {"ZAI_API_KEY"},
	"zai-coding-cn":              {"ZAI_CODING_CN_API_KEY"},
	"mistral":                    {"MISTRAL_API_KEY"},
	"minimax":                    {"MINIMAX_API_KEY"},
	"minimax-cn":                 {"MINIMAX_CN_API_KEY"},
	"moonshotai":                 {"MOONSHOT_API_KEY"},
	"moonshotai-cn":              {"MOONSHOT_API_KEY"},
	"huggingface":                {"HF_TOKEN"},
	"fireworks":                  {"FIREWORKS_API_KEY"},
	"together":                   {"TOGETHER_API_KEY"},
	"baseten":                    {"BASETEN_API_KEY"},
	"opencode":                   {"OPENCODE_API_KEY"},
	"opencode-go":                {"OPENCODE_API_KEY"},
	"kimi-coding":                {"KIMI_API_KEY"},
	"meta":                       {"META_API_KEY"},
	"cloudflare-workers-ai":      {"CLOUDFLARE_API_KEY"},
	"cloudflare-ai-gateway":      {"CLOUDFLARE_API_KEY"},
	"xiaomi":                     {"XIAOMI_API_KEY"},
	"xiaomi-token-plan-cn":       {"XIAOMI_TOKEN_PLAN_CN_API_KEY"},
	"xiaomi-token-plan-ams":      {"XIAOMI_TOKEN_PLAN_AMS_API_KEY"},
	"xiaomi-token-plan-sgp":      {"XIAOMI_TOKEN_PLAN_SGP_API_KEY"},
}

// bedrock is Amazon Bedrock's provider: the AWS credential chain serves it.
const bedrock = "amazon-bedrock"

// modelUse is a model a profile (or pi's default) names.
type modelUse struct {
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	// By says who names it: "profile scout", "pi's default".
	By string `json:"by"`
	// Fallback: it is only a fallback of the profile's model, tried when
	// that one fails.
	Fallback bool `json:"fallback,omitempty"`
}

// modelUses are the providers this folder's profiles run on: each
// profile's model (the settings' subagents.NAME.model over the profile's
// own) and its fallbacks, and pi's default provider for the profiles that
// name none. A model named without its provider is left out: pi resolves
// it from its catalog.
func modelUses(list []*profiles.Profile, overrides map[string]string, defaultProvider string) (uses []modelUse, unresolved []string) {
	usesDefault := false
	for _, p := range list {
		if p.Err != nil {
			continue
		}
		provider, model := p.Provider, p.Model
		if o, found := overrides[p.Name]; found {
			if pr, m, _, err := profiles.ParseModelOverride(o); err == nil {
				provider, model = pr, m
			}
		}
		switch {
		case provider != "":
			uses = append(uses, modelUse{Provider: provider, Model: model, By: "profile " + p.Name})
		case model != "":
			unresolved = append(unresolved, p.Name)
		default:
			usesDefault = true
		}
		for _, f := range p.FallbackModels {
			if pr, m, _, err := profiles.ParseModelOverride(f); err == nil && pr != "" {
				uses = append(uses, modelUse{Provider: pr, Model: m, By: "profile " + p.Name + " (fallback)", Fallback: true})
			}
		}
	}
	if usesDefault && defaultProvider != "" {
		uses = append(uses, modelUse{Provider: defaultProvider, By: "pi's default (settings.json defaultProvider)"})
	}
	return uses, unresolved
}

// piCredentials are what pi's config dir and the environment hold.
type piCredentials struct {
	// auth are the providers auth.json holds a credential for.
	auth map[string]bool
	// custom are models.json's providers and their apiKey ("" for none).
	custom map[string]string
	getenv func(string) string
	// fileExists tells whether Google's application default credentials are there.
	fileExists func(string) bool
	home       string
}

// readCredentials reads auth.json and models.json in agentDir; a file that
// does not parse holds nothing (the settings check names it).
func readCredentials(agentDir string, read func(string) ([]byte, error), getenv func(string) string, fileExists func(string) bool, home string) piCredentials {
	c := piCredentials{auth: map[string]bool{}, custom: map[string]string{}, getenv: getenv, fileExists: fileExists, home: home}
	if b, err := read(filepath.Join(agentDir, "auth.json")); err == nil {
		var auth map[string]json.RawMessage
		if json.Unmarshal(b, &auth) == nil {
			for name := range auth {
				c.auth[name] = true
			}
		}
	}
	if b, err := read(filepath.Join(agentDir, "models.json")); err == nil {
		var models struct {
			Providers map[string]struct {
				APIKey string `json:"apiKey"`
			} `json:"providers"`
		}
		if json.Unmarshal(b, &models) == nil {
			for name, p := range models.Providers {
				c.custom[name] = p.APIKey
			}
		}
	}
	return c
}

// interpolated finds $NAME and ${NAME} in a models.json value.
var interpolated = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// find says where provider's key comes from, or why none is found.
func (c piCredentials) find(provider string) (source, missing string) {
	if c.auth[provider] {
		return "auth.json", ""
	}
	if key, custom := c.custom[provider]; custom && key != "" {
		if strings.HasPrefix(key, "!") {
			return "a command in models.json (not run here)", ""
		}
		for _, m := range interpolated.FindAllStringSubmatch(key, -1) {
			if c.getenv(m[1]) == "" {
				return "", fmt.Sprintf("models.json's provider %s reads $%s, which is not set", provider, m[1])
			}
		}
		return "models.json", ""
	}
	for _, name := range providerEnv[provider] {
		if c.getenv(name) != "" {
			return "$" + name, ""
		}
	}
	switch provider {
	case bedrock:
		if c.getenv("AWS_PROFILE") != "" || c.getenv("AWS_ACCESS_KEY_ID") != "" && c.getenv("AWS_SECRET_ACCESS_KEY") != "" ||
			c.getenv("AWS_BEARER_TOKEN_BEDROCK") != "" || c.getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != "" ||
			c.getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "" || c.getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" {
			return "the AWS credentials", ""
		}
		return "", "no AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK)"
	case "google-vertex":
		adc := c.getenv("GOOGLE_APPLICATION_CREDENTIALS")
		if adc == "" && c.home != "" {
			adc = filepath.Join(c.home, ".config", "gcloud", "application_default_credentials.json")
		}
		project := c.getenv("GOOGLE_CLOUD_PROJECT") != "" || c.getenv("GCLOUD_PROJECT") != ""
		if adc != "" && c.fileExists(adc) && project && c.getenv("GOOGLE_CLOUD_LOCATION") != "" {
			return "Google's application default credentials", ""
		}
	}
	if vars := providerEnv[provider]; len(vars) > 0 {
		return "", fmt.Sprintf("no key for %s: $%s is not set and auth.json holds none", provider, vars[len(vars)-1])
	}
	if _, custom := c.custom[provider]; custom {
		return "", fmt.Sprintf("models.json's provider %s has no apiKey and auth.json holds none", provider)
	}
	return "", fmt.Sprintf("no key for %s in auth.json, models.json or the environment", provider)
}

// hasAny is whether some provider has a key: what pi needs to pick a model
// when nothing names one.
func (c piCredentials) hasAny() bool {
	if len(c.auth) > 0 || len(c.custom) > 0 {
		return true
	}
	for _, vars := range providerEnv {
		for _, v := range vars {
			if c.getenv(v) != "" {
				return true
			}
		}
	}
	return false
}

// checkModelKeys: every provider this folder's profiles run on has a key
// where pi looks for one.
func checkModelKeys(uses []modelUse, unresolved []string, creds piCredentials, agentDir string) Result {
	if len(uses) == 0 {
		if !creds.hasAny() {
			return fail(CheckModelKeys, "no profile names a provider and pi has no default one, and no provider key is in auth.json, models.json or the environment",
				"run /login in pi, or set your provider's key (e.g. ANTHROPIC_API_KEY) where the service runs")
		}
		return ok(CheckModelKeys, "no profile names a provider; pi picks one of those it has a key for").with("unresolved", unresolved)
	}
	byProvider := map[string][]string{}
	// main are the providers some profile runs on first, not only as a
	// fallback.
	main := map[string]bool{}
	var providers []string
	for _, u := range uses {
		if _, seen := byProvider[u.Provider]; !seen {
			providers = append(providers, u.Provider)
		}
		if !slices.Contains(byProvider[u.Provider], u.By) {
			byProvider[u.Provider] = append(byProvider[u.Provider], u.By)
		}
		main[u.Provider] = main[u.Provider] || !u.Fallback
	}
	slices.Sort(providers)
	found := map[string]string{}
	// missing fail the runs; fallbacks only a fallback, tried when the
	// profile's own model fails: the runs work without it.
	var missing, fallbacks, fixes []string
	for _, p := range providers {
		src, why := creds.find(p)
		if why != "" {
			line := fmt.Sprintf("%s (for %s)", why, strings.Join(byProvider[p], ", "))
			if main[p] {
				missing = append(missing, line)
			} else {
				fallbacks = append(fallbacks, line)
			}
			fixes = append(fixes, keyFix(p, creds))
			continue
		}
		found[p] = src
	}
	fix := strings.Join(fixes, "; ") + " (a running service keeps the environment it started with: restart it after setting a variable)"
	switch {
	case len(missing) > 0:
		v := strings.Join(missing, "; ")
		if len(fallbacks) > 0 {
			v += "; and for fallbacks only: " + strings.Join(fallbacks, "; ")
		}
		return fail(CheckModelKeys, v, fix).with("found", found).with("used_by", byProvider)
	case len(fallbacks) > 0:
		return warn(CheckModelKeys, strings.Join(fallbacks, "; ")+": the runs work on their profiles' own models; only a fallback to these would fail", fix).
			with("found", found).with("used_by", byProvider).with("unresolved", unresolved)
	}
	var parts []string
	for _, p := range providers {
		parts = append(parts, p+" from "+found[p])
	}
	return ok(CheckModelKeys, "a key for each provider the profiles use: "+strings.Join(parts, ", ")).
		with("found", found).with("used_by", byProvider).with("unresolved", unresolved)
}

// keyFix says how to give provider a key.
func keyFix(provider string, creds piCredentials) string {
	if key, custom := creds.custom[provider]; custom {
		if m := interpolated.FindStringSubmatch(key); m != nil {
			return fmt.Sprintf("set %s where the service runs", m[1])
		}
		return fmt.Sprintf("give provider %s an apiKey in models.json", provider)
	}
	if vars := providerEnv[provider]; len(vars) > 0 {
		return fmt.Sprintf("set %s where the service runs, or run /login in pi and choose %s", vars[len(vars)-1], provider)
	}
	if provider == bedrock {
		return "set AWS_PROFILE (or the AWS key variables) where the service runs"
	}
	return fmt.Sprintf("run /login in pi and choose %s, or define it with an apiKey in models.json", provider)
}

// defaultProvider is pi's defaultProvider: the project's .pi/settings.json
// over pi's config dir's.
func defaultProvider(agentDir, cwd string, read func(string) ([]byte, error)) string {
	out := ""
	for _, path := range []string{filepath.Join(agentDir, piSettingsFile), filepath.Join(cwd, ".pi", piSettingsFile)} {
		b, err := read(path)
		if err != nil {
			continue
		}
		var s struct {
			DefaultProvider string `json:"defaultProvider"`
		}
		if json.Unmarshal(b, &s) == nil && s.DefaultProvider != "" {
			out = s.DefaultProvider
		}
	}
	return out
}
