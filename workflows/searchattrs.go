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

// upsertChanged upserts those of the keyword attributes whose value the run
// does not hold yet (an empty value is skipped): one upsert for all of them,
// none when the starter set them already.
func upsertChanged(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) {
	have := workflow.GetTypedSearchAttributes(ctx)
	var missing []temporal.SearchAttributeUpdate
	for _, u := range updates {
		probe := temporal.NewSearchAttributes(u)
		for _, k := range []temporal.SearchAttributeKeyKeyword{AgentKey, StatusKey, CwdKey, ParentSessionKey} {
			v, ok := probe.GetKeyword(k)
			if !ok || v == "" {
				continue
			}
			if cur, set := have.GetKeyword(k); !set || cur != v {
				missing = append(missing, u)
			}
		}
	}
	if len(missing) > 0 {
		_ = workflow.UpsertTypedSearchAttributes(ctx, missing...)
	}
}
