// Package profiles loads agent profiles: markdown files with YAML
// frontmatter whose body is the child's system prompt. It reads every contract's
// format (the sessions contract's prompts, the delegate contract's agent-profiles, the task contract's flags)
// and ours, and resolves a profile into how a child pi runs.
package profiles

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/nearest"
)

// Scope says where a profile came from; a later scope overrides an earlier
// one by name.
type Scope string

// Scopes, in override order.
const (
	ScopeBuiltin Scope = "builtin"
	ScopeGlobal  Scope = "global"
	ScopeProject Scope = "project"
)

// ThinkingLevels are the levels a profile or model override may name.
var ThinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}

// ReadOnlyTools are the only tools a readonly profile is ever granted.
var ReadOnlyTools = []string{"read", "grep", "find", "ls"}

// AllTools are pi's built-in tools: what a blacklist is subtracted from.
var AllTools = []string{"read", "bash", "edit", "write", "grep", "find", "ls"}

// DelegationTools are the parent-side tools of this project and of the
// contracts; a child never gets one, whatever its profile says, so depth holds.
var DelegationTools = []string{"subagent", "task", "delegate_to_subagents", "get_subagent_output", "get_subagent_session", "list_subagent_profiles"}

// Profile is one loaded profile. A malformed file is a Profile with Err set:
// it is listed, and using it fails with that error.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Scope       Scope  `json:"scope"`
	// Path is the file it was read from ("" for built-ins).
	Path string `json:"path,omitempty"`
	// SystemPrompt is the markdown body; ReplaceSystemPrompt says whether it
	// replaces pi's own (the delegate contract's agent-profiles) or is appended to it.
	SystemPrompt        string `json:"-"`
	ReplaceSystemPrompt bool   `json:"-"`

	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Thinking string `json:"thinking,omitempty"`
	// FallbackModels are tried in order, each `provider/id[:thinking]`,
	// when the model fails with a provider error another model may not
	// have (a rate limit, an overload): see docs/profiles.md.
	FallbackModels []string `json:"fallbackModels,omitempty"`

	// Tools is an allowlist (the delegate contract tools, the sessions contract approved/allowed);
	// ExcludeTools a blacklist (excludeTools, denied_tools).
	Tools        []string `json:"tools,omitempty"`
	ExcludeTools []string `json:"excludeTools,omitempty"`
	NoTools      bool     `json:"noTools,omitempty"`

	NoExtensions       bool     `json:"noExtensions,omitempty"`
	Extensions         []string `json:"extensions,omitempty"`
	NoSkills           bool     `json:"noSkills,omitempty"`
	SuggestedSkills    []string `json:"suggestedSkills,omitempty"`
	LoadSkills         []string `json:"loadSkills,omitempty"`
	NoContextFiles     bool     `json:"noContextFiles,omitempty"`
	AppendSystemPrompt string   `json:"appendSystemPrompt,omitempty"`
	// APIKey goes to the child's environment only; it is never listed.
	APIKey    string   `json:"-"`
	ExtraArgs []string `json:"extraArgs,omitempty"`

	Primary  bool `json:"primary,omitempty"`
	Internal bool `json:"internal,omitempty"`

	TimeoutSeconds int `json:"timeout,omitempty"`
	// QuestionTimeoutSeconds is how long a question of its children waits
	// for an answer (0: api.DefaultQuestionTimeout); a task's own wins.
	QuestionTimeoutSeconds int  `json:"questionTimeoutSeconds,omitempty"`
	MaxFinalizeRetries     *int `json:"maxFinalizeRetries,omitempty"`
	// Finalize false accepts the final assistant text as the result.
	Finalize bool `json:"finalize"`
	// AsksFinalize is a profile's `finalize: true`, said in so many words:
	// under delegate_to_subagents only such a profile's children must
	// finalize (TextResultTool).
	AsksFinalize bool `json:"-"`
	Readonly     bool `json:"readonly,omitempty"`
	// Worktree runs every task of the profile in a git worktree of its
	// cwd (docs/worktrees.md): a task cannot turn it off.
	Worktree bool `json:"worktree,omitempty"`
	// MaxDepth lowers the settings' maxDepth for this profile's children
	// (0: the settings' limit): a profile may only lower it (nesting.go).
	MaxDepth int `json:"maxDepth,omitempty"`

	Err error `json:"-"`
	// Untrusted marks a project profile refused (Err) only because its
	// project is not trusted and it would add code or power
	// (projecttrust.go): trusting the project, not editing it, fixes it.
	Untrusted bool `json:"-"`
}

// stringList reads a YAML sequence or a comma-separated string.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = SplitList(n.Value)
		return nil
	case yaml.SequenceNode:
		var items []string
		if err := n.Decode(&items); err != nil {
			return err
		}
		*l = nil
		for _, it := range items {
			if it = strings.TrimSpace(it); it != "" {
				*l = append(*l, it)
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: want a list or a comma-separated string", n.Line)
}

// SplitList reads a comma-separated list, its items trimmed and the empty
// ones dropped.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// frontmatter is every field any supported format may set.
type frontmatter struct {
	Name               string     `yaml:"name"`
	Description        string     `yaml:"description"`
	ApprovedTools      stringList `yaml:"approved_tools"`
	AllowedTools       stringList `yaml:"allowed_tools"`
	DeniedTools        stringList `yaml:"denied_tools"`
	Provider           string     `yaml:"provider"`
	Model              string     `yaml:"model"`
	FallbackModels     stringList `yaml:"fallbackModels"`
	ThinkingLevel      string     `yaml:"thinkingLevel"`
	Tools              stringList `yaml:"tools"`
	ExcludeTools       stringList `yaml:"excludeTools"`
	NoTools            bool       `yaml:"noTools"`
	NoExtensions       bool       `yaml:"noExtensions"`
	Extensions         stringList `yaml:"extensions"`
	NoSkills           bool       `yaml:"noSkills"`
	SuggestedSkills    stringList `yaml:"suggestedSkills"`
	LoadSkills         stringList `yaml:"loadSkills"`
	NoContextFiles     bool       `yaml:"noContextFiles"`
	AppendSystemPrompt string     `yaml:"appendSystemPrompt"`
	APIKey             string     `yaml:"apiKey"`
	ExtraArgs          stringList `yaml:"extraArgs"`
	Primary            bool       `yaml:"primary"`
	Internal           bool       `yaml:"internal"`
	Timeout            int        `yaml:"timeout"`
	QuestionTimeout    int        `yaml:"questionTimeoutSeconds"`
	MaxFinalizeRetries *int       `yaml:"maxFinalizeRetries"`
	Finalize           *bool      `yaml:"finalize"`
	Readonly           bool       `yaml:"readonly"`
	Worktree           bool       `yaml:"worktree"`
	MaxDepth           int        `yaml:"maxDepth"`
}

// frontmatterFields are the fields of frontmatter, read from its tags so
// that a field added there is known here too.
var frontmatterFields = func() []string {
	t := reflect.TypeFor[frontmatter]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		names = append(names, t.Field(i).Tag.Get("yaml"))
	}
	return names
}()

// unknownFields names the first top-level key of the frontmatter head
// that no format defines, with the field it likely is: a misspelt field
// is a mistake to fix, said in one line with the file's line ("frontmatter
// (line 3): unknown field \"descripton\": did you mean \"description\"?"),
// not yaml's "line 2: field descripton not found in type
// profiles.frontmatter", which counts from the frontmatter's first line.
func unknownFields(head []byte) error {
	var doc yaml.Node
	if yaml.Unmarshal(head, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		// The decoder says what is wrong with it.
		return nil
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if slices.Contains(frontmatterFields, k.Value) {
			continue
		}
		// The frontmatter starts on the file's second line, after "---".
		at := fmt.Sprintf("frontmatter (line %d): unknown field %q", k.Line+1, k.Value)
		if near := nearest.Closest(k.Value, frontmatterFields); near != "" {
			return fmt.Errorf("%s: did you mean %q?", at, near)
		}
		return fmt.Errorf("%s (docs/profiles.md lists the fields)", at)
	}
	return nil
}

// maxProfileBytes bounds one profile file: system prompts are a few KB; a
// larger file is a mistake, not a profile.
const maxProfileBytes = 256 << 10

// Parse reads one profile file's content. It never panics: every failure is
// an INVALID_INPUT error naming the file.
func Parse(src []byte, path string, scope Scope) (*Profile, error) {
	if len(src) > maxProfileBytes {
		return nil, errcode.Errorf(errcode.InvalidInput, "profile %s: larger than %d KB", path, maxProfileBytes>>10)
	}
	head, body, err := splitFrontmatter(src)
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidInput, "profile %s: %v", path, err)
	}
	if err := unknownFields(head); err != nil {
		return nil, errcode.Errorf(errcode.InvalidInput, "profile %s: %v", path, err)
	}
	var fm frontmatter
	dec := yaml.NewDecoder(bytes.NewReader(head))
	dec.KnownFields(true)
	if err := dec.Decode(&fm); err != nil && err.Error() != "EOF" {
		return nil, errcode.Errorf(errcode.InvalidInput, "profile %s: frontmatter: %v", path, err)
	}
	p := &Profile{
		Name: fm.Name, Description: strings.TrimSpace(fm.Description), Scope: scope, Path: path,
		SystemPrompt: strings.TrimSpace(string(body)),
		Provider:     strings.ToLower(strings.TrimSpace(fm.Provider)), Thinking: fm.ThinkingLevel,
		NoTools: fm.NoTools, NoExtensions: fm.NoExtensions, Extensions: fm.Extensions,
		NoSkills: fm.NoSkills, SuggestedSkills: fm.SuggestedSkills, LoadSkills: fm.LoadSkills,
		NoContextFiles: fm.NoContextFiles, AppendSystemPrompt: fm.AppendSystemPrompt, APIKey: fm.APIKey,
		ExtraArgs: fm.ExtraArgs, Primary: fm.Primary, Internal: fm.Internal, TimeoutSeconds: fm.Timeout,
		MaxFinalizeRetries: fm.MaxFinalizeRetries, Finalize: fm.Finalize == nil || *fm.Finalize, Readonly: fm.Readonly,
		AsksFinalize: fm.Finalize != nil && *fm.Finalize, QuestionTimeoutSeconds: fm.QuestionTimeout,
		Worktree: fm.Worktree, MaxDepth: fm.MaxDepth,
	}
	if err := p.setModel(fm.Model); err != nil {
		return nil, errcode.Errorf(errcode.InvalidInput, "profile %s: %v", path, err)
	}
	for _, ref := range fm.FallbackModels {
		provider, model, thinking, err := ParseModelOverride(ref)
		if err != nil {
			return nil, errcode.Errorf(errcode.InvalidInput, "profile %s: fallbackModels: %v", path, err)
		}
		p.FallbackModels = append(p.FallbackModels, ModelRef(provider, model, thinking))
	}
	whitelist := append(append([]string(nil), fm.ApprovedTools...), fm.AllowedTools...)
	if len(whitelist) > 0 && len(fm.DeniedTools) > 0 {
		return nil, errcode.Errorf(errcode.InvalidInput,
			"profile %s: approved_tools/allowed_tools (whitelist) and denied_tools (blacklist) are both set; use one of them", path)
	}
	if len(fm.Tools) > 0 && len(whitelist) > 0 {
		return nil, errcode.Errorf(errcode.InvalidInput, "profile %s: tools and approved_tools/allowed_tools are both set; use one of them", path)
	}
	p.Tools = append(fm.Tools, whitelist...)
	p.ExcludeTools = append(fm.ExcludeTools, fm.DeniedTools...)
	if err := p.validate(); err != nil {
		return nil, errcode.Errorf(errcode.InvalidInput, "profile %s: %v", path, err)
	}
	return p, nil
}

// splitFrontmatter cuts "---\nYAML\n---\nbody". A file without frontmatter
// is all body.
func splitFrontmatter(src []byte) (head, body []byte, err error) {
	s := bytes.TrimPrefix(src, []byte("\ufeff"))
	s = bytes.ReplaceAll(s, []byte("\r\n"), []byte("\n"))
	if !bytes.HasPrefix(s, []byte("---\n")) {
		return nil, s, nil
	}
	rest := s[len("---\n"):]
	if bytes.HasPrefix(rest, []byte("---\n")) || bytes.Equal(rest, []byte("---")) {
		return nil, bytes.TrimPrefix(rest, []byte("---")), nil
	}
	end := bytes.Index(rest, []byte("\n---\n"))
	if end < 0 {
		if bytes.HasSuffix(rest, []byte("\n---")) {
			return rest[:len(rest)-len("\n---")], nil, nil
		}
		return nil, nil, fmt.Errorf("frontmatter starts with --- but never ends")
	}
	return rest[:end], rest[end+len("\n---\n"):], nil
}

// setModel reads `provider/id[:thinking]` (or a bare id or pattern).
func (p *Profile) setModel(model string) error {
	model = strings.TrimSpace(model)
	if model == "" {
		return nil
	}
	if i := strings.LastIndex(model, ":"); i > 0 && slices.Contains(ThinkingLevels, model[i+1:]) {
		if p.Thinking == "" {
			p.Thinking = model[i+1:]
		}
		model = model[:i]
	}
	if provider, id, ok := strings.Cut(model, "/"); ok {
		if provider == "" || id == "" {
			return fmt.Errorf("model %q: want <provider>/<model>[:<thinking>]", model)
		}
		p.Provider = strings.ToLower(provider)
		model = id
	}
	p.Model = model
	return nil
}

func (p *Profile) validate() error {
	if p.Name == "" {
		return fmt.Errorf("name is required")
	}
	if !api.ValidName(p.Name) {
		return fmt.Errorf("name %q must be %s", p.Name, api.NameRule)
	}
	if p.Thinking != "" && !slices.Contains(ThinkingLevels, p.Thinking) {
		return fmt.Errorf("thinkingLevel %q must be one of %s", p.Thinking, strings.Join(ThinkingLevels, ", "))
	}
	if !p.NoTools && len(p.Tools) > 0 && len(p.ExcludeTools) > 0 {
		return fmt.Errorf(`profile %q has both "tools" and "excludeTools" set. These are mutually exclusive`, p.Name)
	}
	if len(p.SuggestedSkills) > 0 && p.NoSkills {
		return seedError(`Profile "%s" has both "suggestedSkills" and "noSkills" set. These are mutually exclusive — --no-skills would override --skill flags.`, p.Name)
	}
	if len(p.LoadSkills) > 0 && p.NoSkills {
		return seedError(`Profile "%s" has both "loadSkills" and "noSkills" set. These are mutually exclusive — --no-skills disables skill discovery.`, p.Name)
	}
	if p.MaxDepth < 0 {
		return fmt.Errorf("maxDepth must be at least 1 (0 or none: the settings' limit)")
	}
	if p.TimeoutSeconds < 0 {
		return fmt.Errorf("timeout must be at least 1 second")
	}
	if !api.ValidQuestionTimeout(p.QuestionTimeoutSeconds) {
		return fmt.Errorf("questionTimeoutSeconds must be 1 to %d (a week)", api.MaxQuestionTimeoutSeconds)
	}
	if p.MaxFinalizeRetries != nil && (*p.MaxFinalizeRetries < 0 || *p.MaxFinalizeRetries > 10) {
		return fmt.Errorf("maxFinalizeRetries must be between 0 and 10")
	}
	return p.validateExtraArgs()
}

// unsafeArg is the shell-injection check of the delegate contract's profiles reference.
var unsafeArg = regexp.MustCompile("^[\\s|&;$\\\\`!]|&&|\\|\\||;|>|<")

var toolFlags = []string{"--tools", "-t", "--no-tools", "-nt"}

func (p *Profile) restrictsTools() bool {
	return p.NoTools || len(p.Tools) > 0 || len(p.ExcludeTools) > 0 || p.Readonly
}

func (p *Profile) validateExtraArgs() error {
	for _, arg := range p.ExtraArgs {
		if strings.ContainsRune(arg, 0) {
			return seedError("Invalid extraArg: contains null byte")
		}
		if unsafeArg.MatchString(arg) {
			return seedError("Refusing extraArg: potentially unsafe argument '%s...'", clip(arg, 20))
		}
		fields := strings.Fields(arg)
		if len(fields) == 0 {
			continue
		}
		flag, _, _ := strings.Cut(fields[0], "=")
		if p.restrictsTools() && slices.Contains(toolFlags, flag) {
			return seedError(`Refusing extraArg "%s" which would override profile tool restrictions. Use the dedicated profile fields instead.`, arg)
		}
	}
	return nil
}

// seedError keeps a message the contracts define word for word, capital and full
// stop included, which Go's error-string style would otherwise change.
func seedError(format string, args ...any) error {
	return errcode.New(errcode.InvalidInput, fmt.Sprintf(format, args...))
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}
