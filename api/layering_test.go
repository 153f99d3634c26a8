package api

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/durable-pi/subagents/"

// TestLayering keeps the import graph docs/design.md "The packages" describes: the
// vocabulary imports nothing of the project but its error codes, the
// packages that only speak it do not reach into the child run, the worker
// does not reach into the command or the client library, and only the two
// mains (and cli/dev) import the command.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				imports[pkg] = append(imports[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	tests := []struct {
		pkg    string
		only   []string // when set: the project packages it may import
		denied []string
	}{
		{pkg: "api", only: []string{"internal/errcode"}},
		{pkg: "internal/errcode", only: []string{}},
		{pkg: "connection", only: []string{"internal/errcode"}},
		{pkg: "client", denied: []string{"activities", "workflows", "worker", "cli"}},
		{pkg: "profiles", denied: []string{"activities", "workflows", "client", "worker"}},
		{pkg: "internal/metrics", denied: []string{"activities", "workflows", "client", "worker"}},
		{pkg: "workflows", denied: []string{"activities", "client", "worker", "cli"}},
		{pkg: "activities", denied: []string{"workflows", "client", "worker", "cli"}},
		{pkg: "worker", denied: []string{"client", "cli"}},
	}
	for _, tt := range tests {
		got := imports[tt.pkg]
		if tt.only != nil {
			for _, imp := range got {
				if !slices.Contains(tt.only, imp) {
					t.Errorf("%s imports %s; it may import only %v of the project", tt.pkg, imp, tt.only)
				}
			}
		}
		for _, imp := range tt.denied {
			if slices.Contains(got, imp) {
				t.Errorf("%s imports %s", tt.pkg, imp)
			}
		}
	}
	for pkg, imps := range imports {
		if slices.Contains(imps, "cli") && !strings.HasPrefix(pkg, "cmd/subagents") && pkg != "cli/dev" {
			t.Errorf("%s imports cli: only the mains and cli/dev may", pkg)
		}
	}
}
