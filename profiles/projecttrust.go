package profiles

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/durable-pi/subagents/internal/errcode"
)

// A cloned repository is not the user's: its .pi folder may hold profiles
// and plans written by anyone. pi itself loads a project's code-bearing
// resources only after a trust decision (its docs' security.md, "project
// trust"); a project's profile that would run code or widen what a child
// may do is the same kind of resource, so it is held to the same decision.

// PiTrustFile is where pi saves the decisions of /trust, in its config dir:
// a JSON object from canonical folder to true, false or null.
const PiTrustFile = "trust.json"

// piSettingsFile is pi's own settings file in its config dir, which holds
// defaultProjectTrust.
const piSettingsFile = "settings.json"

// ProjectTrust is whether the user trusts the project at Root, and by
// which decision.
type ProjectTrust struct {
	Root    string
	Trusted bool
	// By names the decision, for messages: pi's trust.json entry,
	// defaultProjectTrust, or trustedProjects.
	By string
	// Unreadable says why trust.json could not be read, when it exists
	// but could not be read or parsed: the project is then untrusted,
	// and a refusal says so (fixing the file may be all that is needed).
	Unreadable string
}

// notTrusted is what a refusal says after "the project ROOT": why it is
// not trusted when that is not simply the absence of a decision.
func (t ProjectTrust) notTrusted() string {
	if t.Unreadable != "" {
		return "is not trusted (" + t.Unreadable + ", so no decision in it counts)"
	}
	return "is not trusted"
}

// TrustOfProject decides whether the user trusts the project whose root
// (the folder holding its .pi) is root, as pi decides for its own project
// resources (project-trust.ts): the nearest decision saved by /trust for
// the folder or one above it in agentDir's trust.json, else pi's
// defaultProjectTrust ("always" trusts; "ask", the default, and "never" do
// not, as pi without its prompt does not). The settings' trustedProjects
// trust a project too, whatever pi decided: they are the user's word in
// this project's own settings file. A trust.json pi cannot read trusts
// nothing, as pi then refuses to start: an unreadable or malformed file
// does not fall through to defaultProjectTrust, or a saved "no" in it
// would turn into "always".
func TrustOfProject(agentDir, root string, cfg Config) ProjectTrust {
	t := ProjectTrust{Root: root}
	if root == "" {
		return t
	}
	if cfg.TrustsProject(root) {
		t.Trusted, t.By = true, "trustedProjects in "+configPath(agentDir)
		return t
	}
	if agentDir == "" {
		return t
	}
	path, decision, ok, err := piTrustDecision(agentDir, root)
	if err != nil {
		t.Unreadable = err.Error()
		t.By = t.Unreadable
		return t
	}
	if ok {
		t.Trusted, t.By = decision, fmt.Sprintf("%s in %s", quoted(path), filepath.Join(agentDir, PiTrustFile))
		return t
	}
	if piDefaultProjectTrust(agentDir) == "always" {
		t.Trusted, t.By = true, "\"defaultProjectTrust\": \"always\" in "+filepath.Join(agentDir, piSettingsFile)
	}
	return t
}

// piTrustDecision is the nearest saved decision for root or a folder
// above it, as pi finds it (trust-manager.ts findNearestTrustEntry): keys
// are canonical paths, so root's links are resolved first. A missing
// file is no decision; any other failure to read or parse it is an error.
func piTrustDecision(agentDir, root string) (path string, trusted, ok bool, err error) {
	file := filepath.Join(agentDir, PiTrustFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, false, nil
	}
	if err != nil {
		return "", false, false, fmt.Errorf("%s cannot be read: %w", file, err)
	}
	var entries map[string]*bool
	if err := json.Unmarshal(data, &entries); err != nil {
		return "", false, false, fmt.Errorf("%s is not pi's trust file (a JSON object of folder to true, false or null): %w", file, err)
	}
	dir := filepath.Clean(root)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	for {
		if v, found := entries[dir]; found && v != nil {
			return dir, *v, true, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false, false, nil
		}
		dir = parent
	}
}

// piDefaultProjectTrust is pi's global defaultProjectTrust ("ask" when
// unset or unreadable, pi's default).
func piDefaultProjectTrust(agentDir string) string {
	data, err := os.ReadFile(filepath.Join(agentDir, piSettingsFile))
	if err != nil {
		return "ask"
	}
	var s struct {
		DefaultProjectTrust string `json:"defaultProjectTrust"`
	}
	if json.Unmarshal(data, &s) != nil || s.DefaultProjectTrust == "" {
		return "ask"
	}
	return s.DefaultProjectTrust
}

func configPath(agentDir string) string {
	if agentDir == "" {
		return ConfigFile + " in pi's config dir"
	}
	return filepath.Join(agentDir, ConfigFile)
}

// HowToTrust says how the user trusts root, for a refusal's message.
func HowToTrust(agentDir, root string) string {
	dir := agentDir
	if dir == "" {
		dir = "~/.pi/agent"
	}
	return fmt.Sprintf("If you trust this project, run /trust in pi opened in %s (pi saves it in %s), set \"defaultProjectTrust\": \"always\" in %s to trust every project, "+
		"or add it to \"trustedProjects\" under \"subagents\" in %s, e.g. {\"subagents\": {\"trustedProjects\": [%s]}} (or SUBAGENTS_TRUSTED_PROJECTS, colon-separated); a project's own .pi files cannot trust it",
		root, filepath.Join(dir, PiTrustFile), filepath.Join(dir, piSettingsFile), configPath(agentDir), quoted(root))
}

// powers are what a project profile adds beyond narrowing pi's defaults:
// code or prompt files it makes the child load, a provider key of its own
// (the child's requests, and what the task reads, would go to the
// account of whoever wrote the key), tools beyond the
// read-only set, a tool of its own in the parent (primary), or a name
// that replaces one of the user's or a built-in profile (shadows, by
// name, that profile's scope). An empty list: it only narrows.
func (p *Profile) powers(shadows map[string]Scope, cwd string) []string {
	var out []string
	if s, ok := shadows[p.Name]; ok {
		out = append(out, fmt.Sprintf("it replaces the %s profile %q", s, p.Name))
	}
	if len(p.Extensions) > 0 {
		out = append(out, "it loads extensions ("+strings.Join(p.Extensions, ", ")+")")
	}
	if p.APIKey != "" {
		// The key itself is never put in a message.
		out = append(out, "it sets an apiKey for the child's provider")
	}
	if len(p.ExtraArgs) > 0 {
		out = append(out, "it passes extra arguments to pi ("+strings.Join(p.ExtraArgs, " ")+")")
	}
	if skills := append(slices.Clone(p.LoadSkills), p.SuggestedSkills...); len(skills) > 0 {
		out = append(out, "it names skills ("+strings.Join(skills, ", ")+")")
	}
	for _, text := range []string{p.SystemPrompt, p.AppendSystemPrompt} {
		if f := promptFile(text, cwd); f != "" {
			out = append(out, "it reads the prompt file "+f)
		}
	}
	var wide []string
	for _, tool := range append(p.GrantedTools(), p.Tools...) {
		if !slices.Contains(ReadOnlyTools, tool) && !slices.Contains(wide, tool) {
			wide = append(wide, tool)
		}
	}
	if len(wide) > 0 {
		why := "it grants tools beyond the read-only " + strings.Join(ReadOnlyTools, ",") + " (" + strings.Join(wide, ", ") + ")"
		if len(p.Tools) == 0 && len(p.ExcludeTools) == 0 && !p.Readonly {
			why += ": with no tools: line a profile gets pi's default tools"
		}
		out = append(out, why)
	}
	if p.Primary {
		out = append(out, "it asks to be a tool of its own in your pi (primary: true)")
	}
	return out
}

// gateUntrusted gives the set a project whose trust is t may use: the
// project profiles that only narrow as they are, each of the others
// replaced by a copy that carries a PERMISSION_DENIED refusal naming its
// file and how to trust the project (listed, and failing when used, as a
// malformed profile does). set is the cached one: it is not changed.
func gateUntrusted(set *Set, underneath map[string]Scope, cwd, agentDir string, t ProjectTrust) *Set {
	var out *Set
	for name, p := range set.byName {
		if p.Scope != ScopeProject || p.Err != nil {
			continue
		}
		why := p.powers(underneath, cwd)
		if len(why) == 0 {
			continue
		}
		if out == nil {
			out = &Set{byName: make(map[string]*Profile, len(set.byName))}
			for n, q := range set.byName {
				out.byName[n] = q
			}
		}
		refused := *p
		refused.Primary, refused.Untrusted = false, true
		refused.Err = errcode.Errorf(errcode.PermissionDenied,
			"Permission denied: profile %q (%s) is the project's, and the project %s %s: %s. A profile in a project you have not trusted may only narrow what a child does (read-only tools, no extensions, skills, prompt files or extra arguments, not primary, no built-in or user profile's name). %s",
			name, p.Path, t.Root, t.notTrusted(), strings.Join(why, "; "), HowToTrust(agentDir, t.Root))
		out.byName[name] = &refused
	}
	if out == nil {
		return set
	}
	return out
}

// trustWatched are the files the project trust decision is read from:
// a listing that depends on it is stale when one of them changes.
func trustWatched(agentDir string) []Watch {
	if agentDir == "" {
		return nil
	}
	var out []Watch
	for _, name := range []string{PiTrustFile, piSettingsFile, ConfigFile} {
		p := filepath.Join(agentDir, name)
		if info, err := os.Stat(p); err == nil {
			out = append(out, watchOf(p, info))
		} else {
			out = append(out, Watch{Path: p})
		}
	}
	return out
}
