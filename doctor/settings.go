package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/durable-pi/subagents/internal/nearest"
	"github.com/durable-pi/subagents/profiles"
)

// The settings files (docs/settings.md): subagents.json in pi's config dir
// and in the folder's .pi (the "extension" object the pi extension reads,
// the "subagents" object the service reads), and pi's own settings.json
// beside each, which pi refuses to start with when it does not parse.

// piSettingsFile is pi's own settings file.
const piSettingsFile = "settings.json"

// extensionGlobalOnly are the extension's keys a project's file may not
// set (extension/src/settings.ts GLOBAL_ONLY): they decide which program
// runs and where delegations go.
var extensionGlobalOnly = []string{"bin", "address", "dataDir", "autoStart", "namespace", "taskQueue"}

// extensionKeys are the keys of the extension's settings.
var extensionKeys = append(slices.Clone(extensionGlobalOnly), "tools", "maxLinesPerWindow", "onUpdateThrottleMs", "taskRetentionMs")

// unknownExtensionKey says that the extension's key at path (under
// "extension") is none it knows, with the near one of known it likely is,
// in the words the extension's own warning uses (extension/src/settings.ts
// unknownKeys): the same mistake reads the same wherever it is reported.
func unknownExtensionKey(path []string, known []string) string {
	prefix := "extension." + strings.Join(path[:len(path)-1], ".")
	if len(path) > 1 {
		prefix += "."
	}
	key := path[len(path)-1]
	if near := nearest.Closest(key, known); near != "" {
		return fmt.Sprintf("unknown setting %q: did you mean %q? The extension ignores it", prefix+key, prefix+near)
	}
	return fmt.Sprintf("unknown setting %q: the extension ignores it (docs/settings.md lists its keys)", prefix+key)
}

// extensionTools are the tool families "tools" may turn off.
var extensionTools = []string{"subagent", "task", "delegate", "primary"}

// settingsFile is one file the check reads.
type settingsFile struct {
	path    string
	project bool
	// ours: a subagents.json (else pi's settings.json).
	ours bool
}

func settingsFiles(cfg Config) []settingsFile {
	var out []settingsFile
	if cfg.AgentDir != "" {
		out = append(out, settingsFile{filepath.Join(cfg.AgentDir, profiles.ConfigFile), false, true},
			settingsFile{filepath.Join(cfg.AgentDir, piSettingsFile), false, false})
	}
	if cfg.Cwd != "" {
		out = append(out, settingsFile{filepath.Join(cfg.Cwd, ".pi", profiles.ConfigFile), true, true},
			settingsFile{filepath.Join(cfg.Cwd, ".pi", piSettingsFile), true, false})
	}
	return out
}

// checkSettings: the settings files parse, their values are of the kinds
// and ranges the extension and the service accept (with the file and line
// of each that is not), and a project's file sets nothing it may not.
func checkSettings(cfg Config, read func(string) ([]byte, error)) Result {
	var errs []FileError
	var ignored []string
	var read1 []string
	parsedOurs := true
	for _, f := range settingsFiles(cfg) {
		data, err := read(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, FileError{File: f.path, Message: oneLine(err.Error())})
			parsedOurs = parsedOurs && !f.ours
			continue
		}
		read1 = append(read1, f.path)
		doc, e := parseSettings(f.path, data)
		if e != nil {
			errs = append(errs, *e)
			parsedOurs = parsedOurs && !f.ours
			continue
		}
		if !f.ours {
			continue
		}
		ext, ign := extensionErrors(f, data, doc)
		errs = append(errs, ext...)
		ignored = append(ignored, ign...)
	}
	errs = append(errs, extensionEnvErrors(cfg.Getenv)...)
	// The service's own reading of the "subagents" objects and the
	// variables: the first mistake it would refuse a delegation for.
	if parsedOurs {
		if _, err := profiles.LoadConfig(cfg.AgentDir, cfg.Cwd, cfg.Getenv); err != nil {
			errs = append(errs, serviceSettingsError(cfg, read, err))
		}
	}
	ignoredFix := fmt.Sprintf("correct or remove the keys the extension ignores; the program, the address, the data dir and the queue are set in %s or the environment only, never by a project", filepath.Join(cfg.AgentDir, profiles.ConfigFile))
	switch {
	case len(errs) > 0:
		// The keys ignored are said too: a misspelt key beside a wrong
		// value is two things to mend, and the second would otherwise
		// show only once the first is.
		v := fmt.Sprintf("%d %s: %s", len(errs), plural(len(errs), "mistake in the settings", "mistakes in the settings"), listErrors(errs))
		fix := "correct the value at that line (docs/settings.md gives each setting's kind and range), or the variable"
		if len(ignored) > 0 {
			v += "; and ignored: " + strings.Join(ignored, "; ")
			fix += "; " + ignoredFix
		}
		r := fail(CheckSettings, v, fix).with("errors", errs).with("files", read1)
		if len(ignored) > 0 {
			r = r.with("ignored", ignored)
		}
		return r
	case len(ignored) > 0:
		return warn(CheckSettings, strings.Join(ignored, "; "), ignoredFix).with("files", read1).with("ignored", ignored)
	}
	v := "no settings files: the defaults apply"
	if len(read1) > 0 {
		v = fmt.Sprintf("%d settings %s valid: %s", len(read1), plural(len(read1), "file", "files"), strings.Join(read1, ", "))
	}
	return ok(CheckSettings, v).with("files", read1)
}

// parseSettings parses a settings file as JSON holding an object, and as
// YAML (which JSON is) for the lines of its keys; a syntax error is placed
// on its line.
func parseSettings(path string, data []byte) (*yaml.Node, *FileError) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		e := FileError{File: path, Message: err.Error()}
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			e.Line = 1 + bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n"))
		}
		return nil, &e
	}
	if _, isObject := v.(map[string]any); !isObject {
		return nil, &FileError{File: path, Line: 1, Message: "the file must hold one JSON object"}
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return nil, nil
	}
	return &doc, nil
}

// extensionErrors checks the "extension" object of a subagents.json as the
// extension reads it (extension/src/settings.ts); ignored are the keys a
// project's file sets that the extension ignores there.
func extensionErrors(f settingsFile, data []byte, doc *yaml.Node) (errs []FileError, ignored []string) {
	var raw struct {
		Extension map[string]json.RawMessage `json:"extension"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return []FileError{{File: f.path, Line: keyLine(doc, "extension"), Message: "\"extension\" must be an object: " + err.Error()}}, nil
	}
	keys := make([]string, 0, len(raw.Extension))
	for k := range raw.Extension {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var projectOnly []string
	for _, k := range keys {
		var v any
		_ = json.Unmarshal(raw.Extension[k], &v)
		at := FileError{File: f.path, Line: keyLine(doc, "extension", k)}
		if f.project && slices.Contains(extensionGlobalOnly, k) {
			projectOnly = append(projectOnly, k)
			continue
		}
		if !slices.Contains(extensionKeys, k) {
			// The extension reads what it knows and passes over the rest:
			// a misspelt key does nothing, which is worth saying.
			at.Message = unknownExtensionKey([]string{k}, extensionKeys)
			ignored = append(ignored, at.String())
			continue
		}
		if m, isObject := v.(map[string]any); k == "tools" && isObject {
			// So does a tool family it does not know.
			for _, name := range slices.Sorted(maps.Keys(m)) {
				if !slices.Contains(extensionTools, name) {
					e := FileError{File: f.path, Line: keyLine(doc, "extension", k, name), Message: unknownExtensionKey([]string{k, name}, extensionTools)}
					ignored = append(ignored, e.String())
				}
			}
		}
		if msg := extensionValueError(k, v); msg != "" {
			at.Message = "extension." + k + ": " + msg
			errs = append(errs, at)
		}
	}
	if len(projectOnly) > 0 {
		ignored = append(ignored, fmt.Sprintf("%s sets %s, which only pi's config dir or the environment may set: the extension ignores them", f.path, strings.Join(projectOnly, ", ")))
	}
	return errs, ignored
}

// extensionValueError says what is wrong with the extension's key k set
// to v, or "".
func extensionValueError(k string, v any) string {
	switch k {
	case "bin", "address", "dataDir", "namespace", "taskQueue":
		if s, isString := v.(string); !isString || strings.TrimSpace(s) == "" {
			return fmt.Sprintf("must be a non-empty string, not %s", jsonText(v))
		}
	case "autoStart":
		if _, isBool := v.(bool); !isBool {
			return fmt.Sprintf("must be true or false, not %s", jsonText(v))
		}
	case "tools":
		m, isObject := v.(map[string]any)
		if !isObject {
			return fmt.Sprintf("must be an object of %s, each true or false, not %s", strings.Join(extensionTools, ", "), jsonText(v))
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(extensionTools, name) {
				// Ignored, and said so (extensionErrors).
				continue
			}
			if _, isBool := m[name].(bool); !isBool {
				return fmt.Sprintf("%s must be true or false, not %s", name, jsonText(m[name]))
			}
		}
	case "maxLinesPerWindow":
		return wholeNumberError(v, 1, 1000, false)
	case "onUpdateThrottleMs":
		return wholeNumberError(v, 0, math.MaxInt64, true)
	case "taskRetentionMs":
		return wholeNumberError(v, 1, math.MaxInt64, true)
	}
	return ""
}

// wholeNumberError is "" for a whole number lo..hi (a number, or a string
// that reads as one, as the extension takes it), else what is wrong; ms
// says it is milliseconds.
func wholeNumberError(v any, lo, hi int64, ms bool) string {
	var n float64
	switch x := v.(type) {
	case float64:
		n = x
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return fmt.Sprintf("must be a whole number, not %s", jsonText(v))
		}
		n = f
	default:
		return fmt.Sprintf("must be a whole number, not %s", jsonText(v))
	}
	unit := ""
	if ms {
		unit = " of milliseconds"
	}
	if n != math.Trunc(n) || n < float64(lo) || (hi != math.MaxInt64 && n > float64(hi)) {
		if hi == math.MaxInt64 {
			return fmt.Sprintf("must be a whole number%s, at least %d, not %s", unit, lo, jsonText(v))
		}
		return fmt.Sprintf("must be a whole number%s, %d to %d, not %s", unit, lo, hi, jsonText(v))
	}
	return ""
}

// extensionEnvErrors are the variables the extension refuses to start
// with (extension/src/settings.ts).
func extensionEnvErrors(getenv func(string) string) []FileError {
	if getenv == nil {
		return nil
	}
	var errs []FileError
	for _, v := range []struct {
		names  []string
		lo, hi int64
		ms     bool
	}{
		{[]string{"SUBAGENTS_MAX_LINES_PER_WINDOW"}, 1, 1000, false},
		{[]string{"SUBAGENTS_ONUPDATE_THROTTLE_MS", "OHM_SUBAGENTS_ONUPDATE_THROTTLE_MS"}, 0, math.MaxInt64, true},
		{[]string{"SUBAGENTS_TASK_RETENTION_MS", "OHM_SUBAGENTS_TASK_RETENTION_MS"}, 1, math.MaxInt64, true},
	} {
		for _, name := range v.names {
			val := getenv(name)
			if val == "" {
				continue
			}
			if msg := wholeNumberError(val, v.lo, v.hi, v.ms); msg != "" {
				errs = append(errs, FileError{File: "$" + name, Message: msg})
			}
			break
		}
	}
	return errs
}

// serviceSettingsError places LoadConfig's error: "FILE: subagents.KEY:
// ..." on the key's line, a variable's under its name.
func serviceSettingsError(cfg Config, read func(string) ([]byte, error), err error) FileError {
	var se *profiles.SettingError
	if errors.As(err, &se) {
		// A key that is no setting, or a value of the wrong kind: on the
		// key's own line, however deep.
		e := FileError{File: se.File, Message: se.Short()}
		if data, rerr := read(se.File); rerr == nil {
			var doc yaml.Node
			if yaml.Unmarshal(data, &doc) == nil {
				e.Line = keyLine(&doc, append([]string{"subagents"}, se.Key...)...)
			}
		}
		return e
	}
	msg := oneLine(err.Error())
	for _, f := range settingsFiles(cfg) {
		rest, found := strings.CutPrefix(msg, f.path+": ")
		if !f.ours || !found {
			continue
		}
		e := FileError{File: f.path, Message: rest}
		data, rerr := read(f.path)
		if rerr != nil {
			return e
		}
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil {
			return e
		}
		switch {
		case strings.HasPrefix(rest, "subagents."):
			key := strings.TrimPrefix(rest, "subagents.")
			if i := strings.IndexAny(key, ".: "); i >= 0 {
				key = key[:i]
			}
			e.Line = keyLine(&doc, "subagents", key)
		case strings.HasPrefix(rest, "permission"):
			e.Line = keyLine(&doc, "subagents", "permissions")
		}
		return e
	}
	if name, rest, found := strings.Cut(msg, ": "); found && strings.ToUpper(name) == name && !strings.ContainsAny(name, "/ ") {
		return FileError{File: "$" + name, Message: rest}
	}
	return FileError{File: "settings", Message: msg}
}

// keyLine is the line of the key at path (mapping keys, outermost first)
// in doc, or 0.
func keyLine(doc *yaml.Node, path ...string) int {
	if doc == nil {
		return 0
	}
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				line, n, found = n.Content[i].Line, n.Content[i+1], true
				break
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// jsonText is v as JSON, for messages.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
