package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
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

// keyword is a keyword search attribute and the value a run wants in it.
type keyword struct {
	key   temporal.SearchAttributeKeyKeyword
	value string
}

// upsertChanged upserts those of the attributes whose value the run does
// not hold yet (an empty value is skipped): one upsert for all of them,
// none when the starter set them already.
func upsertChanged(ctx workflow.Context, want ...keyword) {
	have := workflow.GetTypedSearchAttributes(ctx)
	var changed []temporal.SearchAttributeUpdate
	for _, w := range want {
		if w.value == "" {
			continue
		}
		if cur, set := have.GetKeyword(w.key); !set || cur != w.value {
			changed = append(changed, w.key.ValueSet(w.value))
		}
	}
	if len(changed) > 0 {
		_ = workflow.UpsertTypedSearchAttributes(ctx, changed...)
	}
}
