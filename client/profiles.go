package client

import (
	"fmt"
	"strings"

	"github.com/durable-pi/subagents/profiles"
)

// ProfileSummary is one profile in `subagents profiles --json`.
type ProfileSummary struct {
	Name        string   `json:"name"`
	Scope       string   `json:"scope"`
	Description string   `json:"description,omitempty"`
	Model       string   `json:"model"`
	Thinking    string   `json:"thinking,omitempty"`
	Tools       []string `json:"tools"`
	Readonly    bool     `json:"readonly,omitempty"`
	Primary     bool     `json:"primary,omitempty"`
	Internal    bool     `json:"internal,omitempty"`
	Finalize    bool     `json:"finalize"`
	Path        string   `json:"path,omitempty"`
	Error       string   `json:"error,omitempty"`
	// Summary is the one-line description `subagents profiles` prints and
	// list_subagent_profiles shows.
	Summary string `json:"summary"`
}

// ProfilesEnvelope is the --json answer of `subagents profiles`.
type ProfilesEnvelope struct {
	ContractVersion string           `json:"contract_version"`
	Count           int              `json:"count"`
	Profiles        []ProfileSummary `json:"profiles"`
	// Watched is what the listing depends on, as it was: the extension
	// keeps the listing with it, and a pi start that finds every path
	// unchanged uses the listing without asking the service again.
	Watched []profiles.Watch `json:"watched,omitempty"`
}

// ListProfiles summarises the profiles visible from cwd.
func ListProfiles(cwd, agentDir string, includeInternal bool) (ProfilesEnvelope, error) {
	opts := profiles.Options{Cwd: cwd, AgentDir: agentDir, PromptDirs: profiles.DefaultPromptDirs()}
	set, err := profiles.Load(opts)
	if err != nil {
		return ProfilesEnvelope{}, err
	}
	watched, err := profiles.Watched(opts)
	if err != nil {
		return ProfilesEnvelope{}, err
	}
	env := ProfilesEnvelope{ContractVersion: ContractVersion, Profiles: []ProfileSummary{}, Watched: watched}
	for _, p := range set.List(includeInternal) {
		s := ProfileSummary{Name: p.Name, Scope: string(p.Scope), Path: p.Path}
		if p.Err != nil {
			s.Error = p.Err.Error()
		} else {
			s.Description, s.Thinking, s.Readonly, s.Primary, s.Internal, s.Finalize =
				p.Description, p.Thinking, p.Readonly, p.Primary, p.Internal, p.Finalize
			s.Model = "default"
			if p.Model != "" {
				s.Model = strings.TrimPrefix(p.Provider+"/"+p.Model, "/")
			}
			s.Tools = p.GrantedTools()
			if s.Tools == nil {
				s.Tools = []string{}
			}
		}
		s.Summary = summaryLine(s)
		env.Profiles = append(env.Profiles, s)
	}
	env.Count = len(env.Profiles)
	return env, nil
}

// summaryLine is the delegate contract's one-line profile summary: name, scope, model,
// description and the settings that matter.
func summaryLine(p ProfileSummary) string {
	if p.Error != "" {
		return fmt.Sprintf("%s (%s) — error: %s", p.Name, p.Scope, p.Error)
	}
	parts := []string{fmt.Sprintf("%s (%s)", p.Name, p.Scope), "model: " + p.Model}
	if p.Thinking != "" {
		parts[1] += ":" + p.Thinking
	}
	tools := "none"
	if len(p.Tools) > 0 {
		tools = strings.Join(p.Tools, ",")
	}
	parts = append(parts, "tools: "+tools)
	for _, flag := range []struct {
		on   bool
		name string
	}{{p.Readonly, "readonly"}, {p.Primary, "primary"}, {p.Internal, "internal"}, {!p.Finalize, "no finalize"}} {
		if flag.on {
			parts = append(parts, flag.name)
		}
	}
	line := strings.Join(parts, " · ")
	if p.Description != "" {
		line += " — " + p.Description
	}
	return line
}
