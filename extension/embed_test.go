package extension

import (
	"bytes"
	"strings"
	"testing"
)

func TestFinalizeSourceJoinsBothTools(t *testing.T) {
	src := string(FinalizeSource)
	if n := strings.Count(src, "export default "); n != 1 {
		t.Fatalf("the joined module has %d default exports, want 1", n)
	}
	for _, want := range []string{`FINALIZE_TOOL = "subagent_finalize"`, `CONTACT_SUPERVISOR_TOOL = "contact_supervisor"`,
		"function subagentFinalize(", "function contactSupervisor(", "subagentFinalize(pi);\n\tcontactSupervisor(pi);"} {
		if !strings.Contains(src, want) {
			t.Errorf("the joined module lacks %q", want)
		}
	}
}

func TestJoinChildExtensions(t *testing.T) {
	for _, tc := range []struct {
		name              string
		finalize, contact string
		err               string
	}{
		{"both", finalizeDefault + "pi) {}", contactDefault + "pi) {}", ""},
		{"finalize without its default", "function subagentFinalize(pi) {}", contactDefault + "pi) {}", "subagent-finalize.ts"},
		{"contact twice", finalizeDefault + "pi) {}", contactDefault + "a) {}\n" + contactDefault + "b) {}", "contact-supervisor.ts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := joinChildExtensions([]byte(tc.finalize), []byte(tc.contact))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Count(got, []byte("export default")) != 1 || !bytes.Contains(got, []byte("function contactSupervisor(pi) {}")) {
				t.Fatalf("joined:\n%s", got)
			}
		})
	}
}
