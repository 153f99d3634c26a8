package worker

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/internal/errcode"
)

// KeyFileEnv turns NAME_FILE variables of environ whose NAME is a model
// provider's key (activities.ProviderCredential: one pi or the user's
// models.json reads) into NAME=<the file's content>, for the children's
// environment, which no filter sees again (a SENDGRID_API_KEY_FILE stays the
// worker's):
// the convention of compose and Kubernetes secrets (and of the postgres
// image's POSTGRES_PASSWORD_FILE), so a model key can live in a mounted
// file instead of the worker's environment or command line. An empty file is
// an unset key. A variable already set by NAME itself wins over its file.
func KeyFileEnv(environ []string) ([]string, error) {
	set := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	var out []string
	for _, kv := range environ {
		fileVar, path, _ := strings.Cut(kv, "=")
		name, ok := strings.CutSuffix(fileVar, "_FILE")
		if !ok || !strings.HasSuffix(name, "_API_KEY") || set[name] || path == "" || !activities.ProviderCredential(name, environ) {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("%s: %v", fileVar, err))
		}
		if key := strings.TrimSpace(string(b)); key != "" {
			out = append(out, name+"="+key)
		}
	}
	slices.Sort(out)
	return out, nil
}
