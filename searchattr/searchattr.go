// Package searchattr names the search attributes every delegation and
// session carries, for the Temporal UI, `subagents list` and `subagents
// setup`: one definition that the workflows that set them, the activities
// that read them and the commands that register them share. It imports
// nothing of this project.
package searchattr

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// The attributes, all keywords: filter the UI's list with e.g.
// SubagentStatus="running" or SubagentAgent="scout".
var (
	Agent         = temporal.NewSearchAttributeKeyKeyword("SubagentAgent")
	Status        = temporal.NewSearchAttributeKeyKeyword("SubagentStatus")
	Cwd           = temporal.NewSearchAttributeKeyKeyword("SubagentCwd")
	ParentSession = temporal.NewSearchAttributeKeyKeyword("SubagentParentSession")
)

// All are the attributes a namespace needs, by name and type: what `subagents
// setup` and the dev server register.
func All() map[string]enumspb.IndexedValueType {
	out := map[string]enumspb.IndexedValueType{}
	for _, k := range []temporal.SearchAttributeKeyKeyword{Agent, Status, Cwd, ParentSession} {
		out[k.GetName()] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return out
}
