package workflows

import (
	"testing"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durable-pi/subagents/api"
)

// TestKeywordOfReadsAnAttributeWithoutItsType: an attribute as a history
// service that does not know its type yet hands it out (no "type" in its
// payload's metadata) reads the same as a typed one, where the typed view
// sees nothing: what a workflow decides from it is the same in a run and
// in its replay.
func TestKeywordOfReadsAnAttributeWithoutItsType(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	// Untyped, as such a history service's events carry them.
	//lint:ignore SA1019 untyped attributes are what this test needs
	if err := env.SetSearchAttributesOnStart(map[string]any{api.StatusKey.GetName(): "running"}); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Raw, Typed     string
		RawOK, TypedOK bool
		Holds, Other   bool
	}
	env.ExecuteWorkflow(func(ctx workflow.Context) (seen, error) {
		var r seen
		r.Raw, r.RawOK = keywordOf(ctx, api.StatusKey.GetName())
		r.Typed, r.TypedOK = workflow.GetTypedSearchAttributes(ctx).GetKeyword(api.StatusKey)
		r.Holds, r.Other = holds(ctx, api.StatusKey.GetName(), "running"), holds(ctx, api.AgentKey.GetName(), "delegation")
		return r, nil
	})
	var got seen
	if err := env.GetWorkflowResult(&got); err != nil {
		t.Fatal(err)
	}
	if !got.RawOK || got.Raw != "running" || !got.Holds || got.Other {
		t.Fatalf("keywordOf read %+v", got)
	}
	// Why keywordOf exists: the typed view does not see it.
	if got.TypedOK {
		t.Fatalf("the typed view read an untyped attribute (%q): keywordOf may no longer be needed", got.Typed)
	}
}
