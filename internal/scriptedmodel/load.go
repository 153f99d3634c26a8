package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// scriptName is what a script may be called: what [[script:NAME]] can name.
var scriptName = regexp.MustCompile(`^[A-Za-z0-9_.\-]+$`)

// LoadScripts reads the scripts at path, by name: a folder of *.json
// files, each one script (a JSON list of steps) named after its file
// without .json; or one JSON file of named scripts, {"name": [step, ...]}.
// A step field that does not exist is an error, not ignored: a misspelt
// field would otherwise change the answer without a word.
func LoadScripts(path string) (map[string][]Step, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("scripts: %w", err)
	}
	out := map[string][]Step{}
	if !info.IsDir() {
		if err := decodeStrict(path, &out); err != nil {
			return nil, err
		}
		for name := range out {
			if !scriptName.MatchString(name) {
				return nil, fmt.Errorf("%s: script %q: a script's name is made of letters, digits, _ . and -, so that [[script:NAME]] can name it", path, name)
			}
		}
		return out, nil
	}
	// In the order of their names (Glob sorts), so that errors read the same each run.
	files, err := filepath.Glob(filepath.Join(path, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no *.json files: a script is a file NAME.json there holding a list of steps, [{\"text\":\"...\"}, ...] (docs/scripted-model.md)", path)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if !scriptName.MatchString(name) {
			return nil, fmt.Errorf("%s: a script's name (its file's name without .json) is made of letters, digits, _ . and -, so that [[script:NAME]] can name it: rename the file", f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("scripts: %w", err)
		}
		steps, err := ParseScript(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[name] = steps
	}
	return out, nil
}

// decodeStrict reads the JSON of path into v, refusing fields v does not have.
func decodeStrict(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("scripts: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ParseScript reads one script: a JSON list of steps, nothing after it, a
// step at least. A field a step does not have is an error (a misspelt one
// would otherwise make a step that silently does nothing).
func ParseScript(b []byte) ([]Step, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var steps []Step
	if err := dec.Decode(&steps); err != nil {
		return nil, fmt.Errorf("want a JSON array of steps: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("no steps")
	}
	return steps, nil
}
