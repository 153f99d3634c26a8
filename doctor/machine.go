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

// checkUI: the Temporal UI answers its health check (which needs no
// login) at its address.
func checkUI(ctx context.Context, get func(context.Context, string) (int, error), uiURL string, local bool) Result {
	fix := "pass the UI's address with --ui-url or SUBAGENTS_UI_URL, and check that it runs"
	if local {
		fix = "the local service serves it on its frontend's port + 1000 unless started with --headless or another --ui-port: start it without (`subagents stop`, then `subagents dev`), or pass the UI's address with --ui-url"
	}
	uiURL = strings.TrimSuffix(uiURL, "/")
	health := uiURL + "/healthz"
	code, err := get(ctx, health)
	switch {
	case err != nil:
		return fail(CheckUI, fmt.Sprintf("the Temporal UI does not answer at %s: %s", uiURL, oneLine(err.Error())), fix).with("url", uiURL)
	case code != http.StatusOK:
		return warn(CheckUI, fmt.Sprintf("the Temporal UI at %s answers its health check with HTTP %d", uiURL, code), fix).with("url", uiURL).with("http_status", code)
	}
	v := fmt.Sprintf("the Temporal UI answers at %s", uiURL)
	if local {
		v += " (`subagents ui` prints the link that logs a browser in)"
	}
	return ok(CheckUI, v).with("url", uiURL)
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
