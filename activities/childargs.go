package activities

import (
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/profiles"
)

// What a child pi is started with: its pi flags from the run's input
// (model, tools, extensions, skills, system prompt), the cold run's command
// line, and with a pool the warm spec a warm child must have been started
// with to serve the run (runSpec).

// runSpec is a run's child environment and, with a pool, the warm spec a
// child must have been started with to serve it.
func (a *Activities) runSpec(in api.RunPiInput, admission profiles.Admission) ([]string, warmSpec) {
	env := a.childEnv(in.Depth, in.Model, append(apiKeyEnv(in.Model, admission.APIKey), admission.Env...))
	if a.pool == nil || in.Worktree != nil || profiles.Nested(in.Tools) {
		// A worktree is the session's alone and removed after each run:
		// no warm child could have been started in it, and none may be
		// kept in it. A child that delegates has its session ID in its
		// environment (profiles.ParentSessionEnv): no warm child started
		// for another session may serve it.
		return env, warmSpec{}
	}
	return env, a.specFor(a.flags(in), in.Cwd, env, a.loadedFiles(in))
}

// args is the pi command line of a cold child run; its prompt goes in on
// stdin.
func (a *Activities) args(in api.RunPiInput, sessionFile string) []string {
	return append([]string{"--mode", "json", "--session", sessionFile}, a.flags(in)...)
}

// flags are the child's pi flags but its mode, session and prompt: what a
// warm child must have been started with to serve the run.
func (a *Activities) flags(in api.RunPiInput) []string {
	var args []string
	if in.Model != "" {
		args = append(args, "--model", in.Model)
	}
	if in.Thinking != "" {
		args = append(args, "--thinking", in.Thinking)
	}
	var tools []string
	if !in.NoTools {
		tools = in.Tools
		if len(tools) == 0 {
			tools = api.DefaultTools
		}
	}
	if !in.NoFinalize {
		// contact_supervisor is a profile's to grant (its tools list it):
		// a child that asks stops until someone answers, which a parent
		// pi cannot do yet (docs/questions.md).
		tools = append(append([]string(nil), tools...), api.FinalizeToolName)
	}
	if len(tools) > 0 {
		args = append(args, "--tools", strings.Join(tools, ","))
	} else {
		args = append(args, "--no-tools")
	}
	// No discovered extensions: a child gets exactly what its profile names,
	// and never the parent's delegation tools.
	args = append(args, "--no-extensions")
	if !in.NoFinalize {
		args = append(args, "--extension", a.finalize)
	}
	for _, e := range in.Extensions {
		args = append(args, "--extension", e)
	}
	if in.NoSkills {
		args = append(args, "--no-skills")
	}
	for _, s := range in.Skills {
		args = append(args, "--skill", s)
	}
	if in.NoContextFiles {
		args = append(args, "--no-context-files")
	}
	switch {
	case in.SystemPrompt != "" && in.ReplaceSystemPrompt:
		args = append(args, "--system-prompt", in.SystemPrompt)
	case in.SystemPrompt != "":
		args = append(args, "--append-system-prompt", in.SystemPrompt)
	}
	for _, p := range in.AppendSystemPrompt {
		args = append(args, "--append-system-prompt", p)
	}
	return append(args, in.ExtraArgs...)
}

// loadedFiles are the files a child loads at its start besides pi: a warm
// child started before one of them changed must not serve.
func (a *Activities) loadedFiles(in api.RunPiInput) []string {
	files := append([]string(nil), in.Extensions...)
	if !in.NoFinalize {
		files = append(files, a.finalize)
	}
	return files
}
