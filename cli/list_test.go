package cli

import (
	"slices"
	"testing"

	"github.com/durable-pi/subagents/client"
)

func TestNestedOrder(t *testing.T) {
	run := func(id, parent string) client.ListItem { return client.ListItem{ID: id, ParentSessionID: parent} }
	for _, c := range []struct {
		name   string
		runs   []client.ListItem
		ids    []string
		depths []int
	}{
		{"nothing nests", []client.ListItem{run("a", "pi"), run("b", "pi")}, []string{"a", "b"}, []int{0, 0}},
		{"a grandchild under its task, listed first", []client.ListItem{run("g", "c"), run("x", "pi"), run("c", "pi"), run("g2", "g")},
			[]string{"x", "c", "g", "g2"}, []int{0, 0, 1, 2}},
		{"a parent not listed", []client.ListItem{run("g", "gone")}, []string{"g"}, []int{0}},
		{"a ring", []client.ListItem{run("a", "b"), run("b", "a")}, []string{"a", "b"}, []int{0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs, depths := nestedOrder(c.runs)
			var ids []string
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, c.ids) || !slices.Equal(depths, c.depths) {
				t.Fatalf("nestedOrder = %v %v, want %v %v", ids, depths, c.ids, c.depths)
			}
		})
	}
}
