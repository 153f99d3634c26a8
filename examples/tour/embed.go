// Package tour holds the files of `subagents demo --tour` (cli/dev/tour.go):
// the scripted model's scripts, the agent profiles, the requests and the
// plan it runs, and the small project its tasks work in. They are embedded
// into the binary, so an installed `subagents` has them, and the tour
// writes them out to a folder a user can read, copy and change.
package tour

import "embed"

// Files are this folder's files but this one: README.md, scripts/ (one JSON
// array of scripted-model steps per script, named after its file), agents/,
// project/, batch.json, plan.yaml and worktree.json.
//
//go:embed README.md scripts agents project batch.json plan.yaml worktree.json
var Files embed.FS
