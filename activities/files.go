package activities

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/durable-pi/subagents/api"
)

// maxFileBytes is the delegate contract's per-file limit: larger files become a
// placeholder so one log file cannot fill the child's context.
const maxFileBytes = 1024 * 1024

// FileContext reads files relative to cwd and returns them as the delegate contract's
// `=== path ===` blocks, to go before the prompt. A file that cannot be used
// becomes a placeholder line; it never fails the task.
func FileContext(cwd string, files []api.FileSpec) string {
	if len(files) == 0 {
		return ""
	}
	var b strings.Builder
	for _, f := range files {
		b.WriteString(fileBlock(cwd, f))
		b.WriteString("\n")
	}
	return b.String()
}

func fileBlock(cwd string, f api.FileSpec) string {
	p := f.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("[file not found: %s]\n", f.Path)
	case err != nil || info.IsDir():
		return fmt.Sprintf("[could not read file: %s]\n", f.Path)
	case info.Size() > maxFileBytes:
		return fmt.Sprintf("[file too large: %s (%dKB, limit %dKB)]\n", f.Path, (info.Size()+1023)/1024, maxFileBytes/1024)
	}
	data, err := os.ReadFile(p)
	if err != nil || !utf8.Valid(data) {
		return fmt.Sprintf("[could not read file: %s]\n", f.Path)
	}
	text := selectLines(string(data), f)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return fmt.Sprintf("=== %s ===\n%s", f.Path, text)
}

func selectLines(text string, f api.FileSpec) string {
	if f.Start == 0 && f.End == 0 && f.Head == 0 && f.Tail == 0 {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	from, to := 0, len(lines)
	switch {
	case f.Head > 0:
		to = min(f.Head, len(lines))
	case f.Tail > 0:
		from = max(len(lines)-f.Tail, 0)
	default:
		if f.Start > 0 {
			from = min(f.Start-1, len(lines))
		}
		if f.End > 0 {
			to = min(f.End, len(lines))
		}
	}
	return strings.Join(lines[from:to], "")
}
