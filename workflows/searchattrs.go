package workflows

import (
	"go.temporal.io/sdk/converter"
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
	var changed []temporal.SearchAttributeUpdate
	for _, w := range want {
		if w.value == "" {
			continue
		}
		if !holds(ctx, w.key.GetName(), w.value) {
			changed = append(changed, w.key.ValueSet(w.value))
		}
	}
	if len(changed) > 0 {
		_ = workflow.UpsertTypedSearchAttributes(ctx, changed...)
	}
}

// holds reports whether the run's search attribute name holds the keyword
// value.
func holds(ctx workflow.Context, name, value string) bool {
	got, ok := keywordOf(ctx, name)
	return ok && got == value
}

// keywordOf is the run's keyword search attribute name, read from the
// attribute's payload itself. The typed view (GetTypedSearchAttributes)
// needs the type the server adds to each attribute as it reads the event,
// from a cache of the registered attributes; in a cluster, a history
// service that has not yet seen attributes registered moments before
// (`subagents setup`) gives the first run of a workflow task no types,
// and a replay from the frontend later does: the typed view said "not set"
// in the run and "set" in its replay, and what the workflow decided from
// it was nondeterministic (a failed workflow task in TestCluster). The
// payload's data is the same either way.
func keywordOf(ctx workflow.Context, name string) (string, bool) {
	//lint:ignore SA1019 the raw payloads are the point: the typed view is what differs between a run and its replay
	p := workflow.GetInfo(ctx).SearchAttributes.GetIndexedFields()[name]
	if p == nil {
		return "", false
	}
	var got string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &got); err != nil {
		return "", false
	}
	return got, true
}
