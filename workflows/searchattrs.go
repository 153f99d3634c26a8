package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

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
