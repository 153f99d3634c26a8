package profiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// TestResolveTextResultTool (issue 39): under delegate_to_subagents (tool
// "delegate") a child is offered subagent_finalize but not asked for it,
// unless its profile says finalize: true; finalize: false stays without
// the tool; the other tools keep the finalize contract.
func TestResolveTextResultTool(t *testing.T) {
	agent, cwd := t.TempDir(), t.TempDir()
	dir := filepath.Join(agent, "agents")
	must(t, os.MkdirAll(dir, 0o755))
	for name, fm := range map[string]string{"plain": "", "strict": "finalize: true\n", "textual": "finalize: false\n"} {
		must(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte("---\nname: "+name+"\n"+fm+"---\nWork.\n"), 0o644))
	}
	tests := []struct {
		profile, tool        string
		optional, noFinalize bool
	}{
		{"", TextResultTool, true, false},
		{"plain", TextResultTool, true, false},
		{"strict", TextResultTool, false, false},
		{"textual", TextResultTool, false, true},
		{"", "task", false, false},
		{"", "", false, false},
		{"plain", "task", false, false},
		{"textual", "task", false, true},
	}
	a := &Activities{AgentDir: agent}
	for _, tt := range tests {
		t.Run(tt.profile+"/"+tt.tool, func(t *testing.T) {
			out, err := a.ResolveTasks(t.Context(), ResolveRequest{Tasks: []ResolveTask{{Profile: tt.profile, Cwd: cwd, Tool: tt.tool}}})
			if err != nil || out[0].Error != nil {
				t.Fatalf("resolve: %v %+v", err, out[0].Error)
			}
			if c := out[0].Child; c.FinalizeOptional != tt.optional || c.NoFinalize != tt.noFinalize {
				t.Fatalf("finalizeOptional %v, noFinalize %v; want %v, %v", c.FinalizeOptional, c.NoFinalize, tt.optional, tt.noFinalize)
			}
		})
	}
}

// TestProfileQuestionTimeout (issue 39): questionTimeoutSeconds is a
// profile's field, resolved with its task; out of range it is
// INVALID_INPUT.
func TestProfileQuestionTimeout(t *testing.T) {
	p, err := Parse([]byte("---\nname: patient\nquestionTimeoutSeconds: 7200\n---\nWait.\n"), "patient.md", ScopeGlobal)
	if err != nil || p.QuestionTimeoutSeconds != 7200 {
		t.Fatalf("parse: %v, questionTimeoutSeconds %d", err, p.QuestionTimeoutSeconds)
	}
	for _, v := range []string{"-1", "604801"} {
		_, err := Parse([]byte("---\nname: a\nquestionTimeoutSeconds: "+v+"\n---\n"), "a.md", ScopeGlobal)
		if !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), "questionTimeoutSeconds must be 1 to 604800") {
			t.Errorf("questionTimeoutSeconds %s: %v", v, err)
		}
	}
	agent, cwd := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(agent, "agents"), 0o755))
	must(t, os.WriteFile(filepath.Join(agent, "agents", "patient.md"), []byte("---\nname: patient\nquestionTimeoutSeconds: 7200\n---\nWait.\n"), 0o644))
	out, err := (&Activities{AgentDir: agent}).ResolveTasks(t.Context(), ResolveRequest{Tasks: []ResolveTask{{Profile: "patient", Cwd: cwd}, {Cwd: cwd}}})
	if err != nil || out[0].QuestionTimeoutSeconds != 7200 || out[1].QuestionTimeoutSeconds != 0 {
		t.Fatalf("resolved: %v %+v", err, out)
	}
	if !api.ValidQuestionTimeout(0) || !api.ValidQuestionTimeout(api.MaxQuestionTimeoutSeconds) || api.ValidQuestionTimeout(-1) {
		t.Fatal("ValidQuestionTimeout's range is not 0 to a week")
	}
}
