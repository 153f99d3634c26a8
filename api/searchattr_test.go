package api

import (
	"maps"
	"slices"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

// TestSearchAttributes: the names are part of every namespace set up so far and of the
// operators' saved queries: they never change spelling.
func TestSearchAttributes(t *testing.T) {
	all := SearchAttributes()
	names := slices.Sorted(maps.Keys(all))
	if want := []string{"SubagentAgent", "SubagentCwd", "SubagentDelegation", "SubagentParentSession", "SubagentSendUntil", "SubagentStatus"}; !slices.Equal(names, want) {
		t.Fatalf("attributes %v, want %v", names, want)
	}
	for name, typ := range all {
		if name == SendUntilKey.GetName() {
			if typ != enumspb.INDEXED_VALUE_TYPE_DATETIME {
				t.Errorf("%s is %v, want a datetime", name, typ)
			}
			continue
		}
		if typ != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			t.Errorf("%s is %v, want a keyword", name, typ)
		}
	}
}
