package api

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// The search attributes every delegation and session carries, for the
// Temporal UI, `subagents list` and `subagents setup`; all keywords: filter
// the UI's list with e.g. SubagentStatus="running" or SubagentAgent="scout".
var (
	AgentKey         = temporal.NewSearchAttributeKeyKeyword("SubagentAgent")
	StatusKey        = temporal.NewSearchAttributeKeyKeyword("SubagentStatus")
	CwdKey           = temporal.NewSearchAttributeKeyKeyword("SubagentCwd")
	ParentSessionKey = temporal.NewSearchAttributeKeyKeyword("SubagentParentSession")
)

// SearchAttributes are the attributes a namespace needs, by name and type:
// what `subagents setup` and the dev server register.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	out := map[string]enumspb.IndexedValueType{}
	for _, k := range []temporal.SearchAttributeKeyKeyword{AgentKey, StatusKey, CwdKey, ParentSessionKey} {
		out[k.GetName()] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return out
}
