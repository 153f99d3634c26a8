package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Search attributes that let the Temporal UI and `subagents list` filter
// delegations and sessions, e.g. SubagentStatus="running".
var (
	AgentKey         = temporal.NewSearchAttributeKeyKeyword("SubagentAgent")
	StatusKey        = temporal.NewSearchAttributeKeyKeyword("SubagentStatus")
	CwdKey           = temporal.NewSearchAttributeKeyKeyword("SubagentCwd")
	ParentSessionKey = temporal.NewSearchAttributeKeyKeyword("SubagentParentSession")
)

// SearchAttributes are the custom search attributes a namespace needs, by
// name and type; the dev server registers them at start.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		AgentKey.GetName():         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		StatusKey.GetName():        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		CwdKey.GetName():           enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		ParentSessionKey.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}
