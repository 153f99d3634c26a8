package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// uiSource is where the UI's address the check asks came from.
type uiSource int

const (
	// uiGiven: --ui-url or SUBAGENTS_UI_URL.
	uiGiven uiSource = iota
	// uiFromService: the running local service said it (its socket's
	// `service` answer), its --ui-port whatever it is.
	uiFromService
	// uiGuessed: the local service did not say (an older one), or cannot
	// be asked (a Temporal of another kind): its frontend's port + 1000,
	// where `subagents dev` and the Temporal CLI serve it by default.
	uiGuessed
)

// checkUI: the Temporal UI answers its health check (which needs no
// login) at its address.
func checkUI(ctx context.Context, get func(context.Context, string) (int, error), uiURL string, from uiSource) Result {
	uiURL = strings.TrimSuffix(uiURL, "/")
	fix := "pass the UI's address with --ui-url or SUBAGENTS_UI_URL, and check that it runs"
	switch from {
	case uiFromService:
		fix = "the service says it serves its UI at " + uiURL + ": " + restartFix + "; or pass the UI's address with --ui-url"
	case uiGuessed:
		fix = "the service does not say where its UI is (it is older than this command, or not a subagents dev), so its frontend's port + 1000 was asked: pass the UI's address with --ui-url, or " + restartFix + ", after which it says"
	}
	health := uiURL + "/healthz"
	code, err := get(ctx, health)
	r := Result{}
	switch {
	case err != nil:
		r = fail(CheckUI, fmt.Sprintf("the Temporal UI does not answer at %s: %s", uiURL, oneLine(err.Error())), fix)
	case code != http.StatusOK:
		r = warn(CheckUI, fmt.Sprintf("the Temporal UI at %s answers its health check with HTTP %d", uiURL, code), fix).with("http_status", code)
	default:
		v := fmt.Sprintf("the Temporal UI answers at %s", uiURL)
		switch from {
		case uiFromService:
			v += " (`subagents ui` prints the link that logs a browser in)"
		case uiGuessed:
			v += " (the frontend's port + 1000: the service does not say where its UI is)"
		}
		r = ok(CheckUI, v)
	}
	return r.with("url", uiURL).with("source", [...]string{"given", "service", "port + 1000"}[from])
}

// checkDisk: the filesystem of the data dir (where the local service keeps
// its database, the children's session files and outputs) has room.
func checkDisk(free func(string) (uint64, error), dataDir string, minFree uint64) Result {
	at := existingAncestor(dataDir)
	n, err := free(at)
	if err != nil {
		return warn(CheckDisk, fmt.Sprintf("cannot tell the free space at %s: %s", at, oneLine(err.Error())), "check the folder exists and is readable")
	}
	fix := fmt.Sprintf("free some space on that filesystem, or move the data dir to a larger one (SUBAGENTS_DATA_DIR, then restart the service); sessions are under %s", filepath.Join(dataDir, "sessions"))
	r := ok(CheckDisk, fmt.Sprintf("%s free for the data dir %s", bytesText(n), dataDir))
	switch {
	case n < minFree:
		r = fail(CheckDisk, fmt.Sprintf("only %s free for the data dir %s, below the %s it should have (--min-free)", bytesText(n), dataDir, bytesText(minFree)), fix)
	case n < 4*minFree:
		r = warn(CheckDisk, fmt.Sprintf("only %s free for the data dir %s, less than 4 times the %s it should have (--min-free)", bytesText(n), dataDir, bytesText(minFree)), fix)
	}
	return r.with("free_bytes", n).with("min_free_bytes", minFree).with("path", at)
}

// existingAncestor is path, or its nearest folder that exists: a data dir
// not made yet will be made on that filesystem.
func existingAncestor(path string) string {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			return p
		}
	}
}

// bytesText says n bytes in binary units, to one decimal.
func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
