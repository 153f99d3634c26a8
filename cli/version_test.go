package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/version"
)

func TestVersion(t *testing.T) {
	tests := []struct {
		args []string
		want string
		code errcode.Code
	}{
		{args: []string{"version"}, want: "subagents " + version.Version + " ("},
		{args: []string{"--version"}, want: "subagents " + version.Version + " ("},
		{args: []string{"version", "--json"}, want: `"version":"` + version.Version + `"`},
		{args: []string{"version", "extra"}, code: errcode.InvalidInput},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Run(context.Background(), tc.args, &out, &errOut, nil)
			if tc.code != "" {
				if errcode.CodeOf(err) != tc.code {
					t.Fatalf("err = %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("%q, %v; want %q", out.String(), err, tc.want)
			}
			if strings.HasSuffix(tc.args[len(tc.args)-1], "json") {
				var v map[string]string
				if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["os"] == "" || v["arch"] == "" {
					t.Fatalf("--json: %q %v", out.String(), err)
				}
			}
		})
	}
}
