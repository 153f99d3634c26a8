package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/searchattr"
)

// The search attributes a delegation or session sets (package searchattr
// defines them, for the activities and commands that read or register them
// too).
var (
	AgentKey         = searchattr.Agent
	StatusKey        = searchattr.Status
	CwdKey           = searchattr.Cwd
	ParentSessionKey = searchattr.ParentSession
)

// SearchAttributes are the custom search attributes a namespace needs, by
// name and type; the dev server and `subagents setup` register them.
func SearchAttributes() map[string]enumspb.IndexedValueType { return searchattr.All() }

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
