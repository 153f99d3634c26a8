package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

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

// TestListTable (issue 42): list's columns fit what they hold. A plan
// step's ID (plan-<UUID>-<key>) is longer than the column made for a
// delegation's and pushed its row out of line; an ID is never cut, as the
// next command takes it. A plan shows as a plan.
func TestListTable(t *testing.T) {
	at := time.Date(2026, 11, 28, 13, 46, 0, 0, time.Local)
	plan := "plan-01a22268-435f-74d9-9f6d-30dcd3399bc7"
	runs := []client.ListItem{
		{ID: plan, Kind: "delegation", Status: "failed", Agent: "plan", Started: at, Name: "lanes"},
		{ID: plan + "-api-writer-with-a-long-key-R2", Kind: "session", Status: "failed", Open: true, Agent: "implementer-fast", Started: at, Name: "api-writer"},
		{ID: "delegation-01a22268-5703-714e-98a6-e792dc5a9969", Kind: "delegation", Status: "completed", Agent: "delegation", Started: at},
		{ID: "01a22268-5703-714e-98a6-e792dc5a9969", Kind: "session", Status: "waiting_for_input", Open: true, Agent: "scout", Started: at, Name: "nested",
			ParentSessionID: plan + "-api-writer-with-a-long-key-R2"},
	}
	var b strings.Builder
	runsInTree, depths := nestedOrder(runs)
	listTable(&b, runsInTree, depths)
	want := `KIND       ID                                                                      STATUS            OPEN AGENT            STARTED           NAME
plan       plan-01a22268-435f-74d9-9f6d-30dcd3399bc7                               failed            -    plan             2026-11-28 13:46  lanes
session    plan-01a22268-435f-74d9-9f6d-30dcd3399bc7-api-writer-with-a-long-key-R2 failed            open implementer-fast 2026-11-28 13:46  api-writer
session    └ 01a22268-5703-714e-98a6-e792dc5a9969                                  waiting_for_input open scout            2026-11-28 13:46  nested
delegation delegation-01a22268-5703-714e-98a6-e792dc5a9969                         completed         -    delegation       2026-11-28 13:46  -
`
	if got := b.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}
