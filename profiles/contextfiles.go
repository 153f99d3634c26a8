package profiles

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/durable-pi/subagents/api"
)

// pi reads context files (AGENTS.md, CLAUDE.md) into every prompt from its
// config dir and from the cwd and each folder above it, whoever wrote them
// and whatever the project's trust (resource-loader.ts
// loadProjectContextFiles). A folder above a checkout may be shared (a
// world-writable /srv/work, a team's parent folder): another local account
// could put instructions there that steer the user's children. The worker
// leaves such files out: each is judged by the trust policy's check (its
// owner, its mode and every folder above it), and where another account
// could make a file between the check and pi's start (a folder pi looks in
// that it may write to), pi's own loading is off and the files the check
// accepted are passed inline, so pi never reads one the check did not see.

// contextCandidates are the names pi looks for in each folder, in its
// order: the first that is a file is the folder's context file.
var contextCandidates = []string{"AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"}

// maxInlineContext bounds the context text passed on the child's command
// line: Linux refuses one argument over 128 KiB (MAX_ARG_STRLEN); above
// this the files are passed by path, and pi reads them itself.
const maxInlineContext = 100_000

// ContextFiles is what a child's prompt gets of the context files pi
// would load, when another user could have written one of them or could
// add one before pi starts.
type ContextFiles struct {
	// LeftOut are the files another user could have written: none of them
	// reaches the child's prompt.
	LeftOut []string `json:"leftOut,omitempty"`
	// Prompts are the user's own files, rendered as pi renders them, for
	// --append-system-prompt (pi's own loading is turned off).
	Prompts []string `json:"prompts,omitempty"`
}

type contextFile struct{ path, content string }

// contextFilesOf are the context files pi would load for a child in cwd,
// in pi's order: agentDir's, then those of the folders from the top down
// to cwd.
func contextFilesOf(agentDir, cwd string) []string {
	var out []string
	seen := map[string]bool{}
	if agentDir != "" {
		if f := contextFileIn(agentDir); f != "" {
			out = append(out, f)
			seen[f] = true
		}
	}
	var chain []string
	for _, dir := range ancestors(filepath.Clean(cwd)) {
		if f := contextFileIn(dir); f != "" && !seen[f] {
			chain = append([]string{f}, chain...)
			seen[f] = true
		}
	}
	return append(out, chain...)
}

func contextFileIn(dir string) string {
	for _, name := range contextCandidates {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// ForeignContext is nil when every context file pi would load for a child
// in cwd passes the trust policy (trustPolicy.check, cfg's trustGroup)
// and no folder pi looks in is one another account could add a file to
// (the child then loads them itself, its prompt as pi makes it); else
// which files are left out and the text of the others.
func ForeignContext(cfg Config, agentDir, cwd string) *ContextFiles {
	if cwd == "" {
		return nil
	}
	policy := newTrustPolicy(cfg, agentDir)
	policy.refuses = "a child's prompt gets no context file another user could have written"
	dirs := ancestors(filepath.Clean(cwd))
	if agentDir != "" {
		dirs = append(dirs, agentDir)
	}
	// A folder that fails the check is one another account owns or may
	// write to (a sticky /tmp too: they may add a name that is not there):
	// what pi would find there a moment later is not what was checked.
	open := false
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err == nil && policy.check("context files in "+dir, dir) != nil {
			open = true
			break
		}
	}
	var out ContextFiles
	var own []contextFile
	for _, p := range contextFilesOf(agentDir, cwd) {
		if err := policy.check("context file "+p, p); err != nil {
			out.LeftOut = append(out.LeftOut, p)
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		own = append(own, contextFile{p, strings.TrimPrefix(string(data), "\ufeff")})
	}
	if len(out.LeftOut) == 0 && !open {
		return nil
	}
	if len(own) > 0 {
		parts := []string{"Project-specific instructions and guidelines:"}
		size := 0
		for _, f := range own {
			parts = append(parts, fmt.Sprintf("<project_instructions path=%q>\n%s\n</project_instructions>", f.path, f.content))
			size += len(f.content)
		}
		if size <= maxInlineContext {
			out.Prompts = []string{strings.Join(parts, "\n\n")}
		} else {
			for _, f := range own {
				out.Prompts = append(out.Prompts, f.path)
			}
		}
	}
	return &out
}

// Apply gives in what the context check decided: no context files of
// pi's own and the user's files' text instead. A profile that turns
// context files off keeps them off.
func (c *ContextFiles) Apply(in api.RunPiInput) api.RunPiInput {
	if c == nil || in.NoContextFiles {
		return in
	}
	in.NoContextFiles = true
	in.AppendSystemPrompt = append(append([]string(nil), in.AppendSystemPrompt...), c.Prompts...)
	return in
}
