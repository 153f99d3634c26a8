package dev

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// The tour's scripts are files, one per script: a JSON array of
// scripted-model steps (scriptedmodel.Step), named after the file
// (scripts/delegate.json is [[script:delegate]]), read as
// scriptedmodel.ParseScript reads one; the tour reads them from its
// embedded files (an fs.FS) and watches the folder it wrote them to.

// readScripts reads every *.json of dir in fsys as a script. A file that
// is not an array of steps, names a field a step does not have, or holds no
// step is an error naming the file: a misspelt field would otherwise make a
// step that silently does nothing.
func readScripts(fsys fs.FS, dir string) (map[string][]scriptedmodel.Step, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, errcode.Wrap(errcode.InvalidInput, err, "scripts: "+err.Error())
	}
	scripts := map[string][]scriptedmodel.Step{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, errcode.Wrap(errcode.InvalidInput, err, "scripts: "+err.Error())
		}
		steps, err := scriptedmodel.ParseScript(b)
		if err != nil {
			return nil, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("script %s (%s): %v", name, path.Join(dir, e.Name()), err))
		}
		scripts[name] = steps
	}
	return scripts, nil
}

// watchScripts registers dir's scripts with model again whenever a file
// changes or a new one appears, until ctx ends: a user who copies a script
// of the tour's folder and changes it runs it against the service the tour
// left up, with no restart. A file that does not read is reported once per
// change to w, and the script keeps its last good steps.
func watchScripts(ctx context.Context, dir string, model *scriptedmodel.Server, w io.Writer) {
	seen := map[string]time.Time{}
	scan := func(report bool) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".json")
			if !ok || e.IsDir() {
				continue
			}
			info, err := e.Info()
			if err != nil || info.ModTime().Equal(seen[name]) {
				continue
			}
			seen[name] = info.ModTime()
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err == nil {
				var steps []scriptedmodel.Step
				if steps, err = scriptedmodel.ParseScript(b); err == nil {
					model.Script(name, steps...)
					if report {
						_, _ = fmt.Fprintf(w, "scripted model: script %s read from %s\n", name, filepath.Join(dir, e.Name()))
					}
					continue
				}
			}
			_, _ = fmt.Fprintf(w, "scripted model: script %s (%s) not read, its last good steps stay: %v\n", name, filepath.Join(dir, e.Name()), err)
		}
	}
	scan(false)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			scan(true)
		}
	}
}
