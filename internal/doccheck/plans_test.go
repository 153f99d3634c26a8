package doccheck

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/profiles"
)

// TestPlanExamples: every example plan in docs/plans is a valid plan file
// whose arguments bind (the required ones given), and docs/plans.md links
// it; the e2e tests run each of them.
func TestPlanExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "plans", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("docs/plans has %d example plans, want the five patterns", len(files))
	}
	page := strings.Join(read(t, "docs/plans.md").lines, "\n")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := profiles.ReadPlanFile(f)
			if err != nil {
				t.Fatal(err)
			}
			args := map[string]string{}
			for name, a := range p.Args {
				if a.Required {
					args[name] = "x"
				}
			}
			if _, err := api.BindPlanArgs(p, args); err != nil {
				t.Fatal(err)
			}
			if p.Description == "" {
				t.Error("an example plan says what it does in description")
			}
			if !strings.Contains(page, "(plans/"+filepath.Base(f)+")") {
				t.Errorf("docs/plans.md does not link plans/%s", filepath.Base(f))
			}
		})
	}
}
