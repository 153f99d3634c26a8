package profiles

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/nearest"
)

// ConfigFile is the settings file, in pi's config dir and, for the keys a
// project may set, in the project's .pi folder: the "subagents" object the
// contracts describe (the task contract's models and permissions, the delegate contract's limits,
// the SingleResult contract's switches). The extension's own "extension" object sits beside
// it.
const ConfigFile = "subagents.json"

// Config is what the settings say, the environment applied:
//
//	{"subagents": {"finder": {"model": "openai/gpt-4o", "disabled": false},
//	               "permissions": {"default": "allow", "subagents": {"finder": "deny"},
//	                               "allowInternalRouting": false},
//	               "disabled": false, "extend_timeout_debounce": 30, "looping_tool_count": 5,
//	               "taskMaxConcurrency": 3, "taskMaxEvents": 120, "outputMaxChars": 8000,
//	               "trustedProjects": ["~/src/mine"]}}
type Config struct {
	Models               map[string]string
	DefaultPermission    string
	Permissions          map[string]string
	AllowInternalRouting bool
	// Disabled turns delegation off (SUBAGENTS_DISABLED); DisabledAgents
	// turns single profiles off (SUBAGENT_DISABLED).
	Disabled       bool
	DisabledAgents map[string]bool
	// ExtendTimeoutDebounce and LoopingToolCount are the delegate contract's limits of a
	// child run; nil leaves the run's default.
	ExtendTimeoutDebounce *int
	LoopingToolCount      *int
	// TaskMaxConcurrency is how many tasks of a batch run at once when the
	// call says nothing (0: the tool's default).
	TaskMaxConcurrency int
	// TaskMaxEvents caps a task's event timeline (the task contract); nil leaves
	// the run's default.
	TaskMaxEvents *int
	// OutputMaxChars caps a task's output in its results (the task
	// contract's terminal output payload cap); 0 leaves the worker's
	// (--output-max-chars, SUBAGENTS_OUTPUT_MAX_CHARS, default 8000). Read
	// when each child run starts (Admit), as the worker checks the run.
	OutputMaxChars int
	// MaxRuntime is the hard ceiling of a turn in seconds, extensions
	// included (nil: the timeout plus ten minutes).
	MaxRuntime *int
	// AllowWrite lets the subagent tool (the SingleResult contract) run a profile that
	// can edit or write files; without it that tool runs read-only ones.
	AllowWrite bool
	// TrustGroup names a group whose members may write the profiles,
	// extensions, skills and prompt files a child loads (a team's shared
	// project); without it only the service's user (and root) may.
	TrustGroup string
	// TrustedProjects are the project folders (absolute, cleaned) whose
	// saved plans may run gate commands: a plan file in a cloned
	// repository runs its commands only where the user said so
	// (TrustsProject).
	TrustedProjects []string
	// MaxDepth is how deep subagents nest (maxDepth, SUBAGENTS_MAX_DEPTH;
	// 0: DefaultMaxDepth): a child at a depth below it may delegate with
	// the delegation tools its profile lists (nesting.go).
	MaxDepth int
	// Worktree runs every task whose profile can edit or write files, in
	// a git checkout, in a git worktree of its own (worktree,
	// SUBAGENTS_WORKTREE; docs/worktrees.md), as a profile's worktree: true
	// does for its own tasks.
	Worktree bool
}

// A setting: its key under "subagents", its variable, and whether a
// project's file may set it. What widens what a child may do (models,
// permissions) is read from pi's config dir only: opening pi in a cloned
// repository must not change which model spends your money or which
// profiles may run; a project may only make runs stricter or slower.
type setting struct {
	key, env string
	// alias is the contract's own variable, read when env is unset.
	alias   string
	project bool
	apply   func(c *Config, v any, from string) error
}

// Bounds of the numeric settings, as the contracts give them.
const (
	maxExtendTimeoutDebounce = 300 // the delegate contract: clamped to 0..300 seconds
	maxLoopingToolCount      = 50  // the delegate contract: 0..50, 0 disables
	// MaxTaskConcurrency is the most tasks a batch runs at once (the
	// delegation's own bound).
	MaxTaskConcurrency = 16
	// MaxOutputChars bounds outputMaxChars: a result carries the output and
	// the finalize result, each cut to the cap, and Temporal refuses a
	// payload over 2 MB; 100,000 characters (up to 400 KB each) stay far
	// below it, and far above what a parent's context wants back.
	MaxOutputChars = 100_000
)

var settings = []setting{
	{"disabled", "SUBAGENTS_DISABLED", "", true, func(c *Config, v any, from string) error {
		b, err := asBool("disabled", v, from)
		// A project may turn delegation off, never back on.
		c.Disabled = c.Disabled || b
		return err
	}},
	{"extend_timeout_debounce", "SUBAGENTS_EXTEND_TIMEOUT_DEBOUNCE", "", true, func(c *Config, v any, from string) error {
		n, err := asInt("extend_timeout_debounce", v, from, math.MinInt, math.MaxInt)
		n = min(max(n, 0), maxExtendTimeoutDebounce)
		c.ExtendTimeoutDebounce = &n
		return err
	}},
	{"looping_tool_count", "SUBAGENTS_LOOPING_TOOL_COUNT", "", true, func(c *Config, v any, from string) error {
		n, err := asInt("looping_tool_count", v, from, math.MinInt, math.MaxInt)
		n = min(max(n, 0), maxLoopingToolCount)
		c.LoopingToolCount = &n
		return err
	}},
	{"taskMaxConcurrency", "SUBAGENTS_TASK_MAX_CONCURRENCY", "", true, func(c *Config, v any, from string) error {
		n, err := asInt("taskMaxConcurrency", v, from, 1, MaxTaskConcurrency)
		c.TaskMaxConcurrency = n
		return err
	}},
	{"max_runtime", "SUBAGENTS_MAX_RUNTIME", "", true, func(c *Config, v any, from string) error {
		// A day: far beyond any turn, still a bound.
		n, err := asInt("max_runtime", v, from, 1, 86400)
		c.MaxRuntime = &n
		return err
	}},
	{"allowWrite", "SUBAGENTS_ALLOW_WRITE", "", false, func(c *Config, v any, from string) error {
		b, err := asBool("allowWrite", v, from)
		c.AllowWrite = b
		return err
	}},
	{"maxDepth", "SUBAGENTS_MAX_DEPTH", "", false, func(c *Config, v any, from string) error {
		// The SingleResult contract's subagents.maxDepth: how deep children nest
		// (nesting.go). MaxSettingsDepth bounds it: each level is a pi
		// process and a workflow per task, and a chain deeper than that
		// is a loop, not a plan.
		n, err := asInt("maxDepth", v, from, 1, MaxSettingsDepth)
		c.MaxDepth = n
		return err
	}},
	// A project may turn isolation on: it only makes runs stricter (and
	// a project's writers are what collide in its checkout).
	{"worktree", "SUBAGENTS_WORKTREE", "", true, func(c *Config, v any, from string) error {
		b, err := asBool("worktree", v, from)
		c.Worktree = c.Worktree || b
		return err
	}},
	{"trustGroup", "SUBAGENTS_TRUST_GROUP", "", false, func(c *Config, v any, from string) error {
		name, ok := v.(string)
		if !ok || strings.TrimSpace(name) == "" {
			return errcode.Errorf(errcode.InvalidInput, "%s: trustGroup must be a group's name, not %s", from, quoted(v))
		}
		if _, err := user.LookupGroup(name); err != nil {
			return errcode.Errorf(errcode.InvalidInput, "%s: trustGroup: no group %q on this machine", from, name)
		}
		c.TrustGroup = name
		return nil
	}},
	// Global only: a repository must not be able to vouch for itself.
	{"trustedProjects", "SUBAGENTS_TRUSTED_PROJECTS", "", false, func(c *Config, v any, from string) error {
		dirs, err := asFolders("trustedProjects", v, from)
		c.TrustedProjects = dirs
		return err
	}},
	{"taskMaxEvents", "SUBAGENTS_TASK_MAX_EVENTS", "OHM_SUBAGENTS_TASK_MAX_EVENTS", true, func(c *Config, v any, from string) error {
		n, err := asInt("taskMaxEvents", v, from, 0, api.MaxEventsCeiling)
		c.TaskMaxEvents = &n
		return err
	}},
	// Only the contract's variable: SUBAGENTS_OUTPUT_MAX_CHARS is the
	// worker's own default (--output-max-chars), which this one overrides
	// for a task.
	// A value above MaxOutputChars is taken at it, as the delegate
	// contract clamps its limits: the task contract sets no upper bound, and
	// a value its users kept must not refuse every task.
	{"outputMaxChars", "", "OHM_SUBAGENTS_OUTPUT_MAX_CHARS", true, func(c *Config, v any, from string) error {
		n, err := asInt("outputMaxChars", v, from, 1, math.MaxInt32)
		c.OutputMaxChars = min(n, MaxOutputChars)
		return err
	}},
}

// LoadConfig reads the settings for a task in cwd: ConfigFile in agentDir,
// then the keys a project may set from cwd/.pi/ConfigFile, then the
// SUBAGENTS_* variables of getenv (nil: none). Missing files are empty;
// a malformed one, or a value of the wrong type or out of range, is
// INVALID_INPUT naming the file, the key and the value.
func LoadConfig(agentDir, cwd string, getenv func(string) string) (Config, error) {
	cfg := Config{DefaultPermission: "allow"}
	if agentDir != "" {
		if err := cfg.readFile(filepath.Join(agentDir, ConfigFile), true); err != nil {
			return cfg, err
		}
	}
	if cwd != "" {
		if err := cfg.readFile(filepath.Join(cwd, ".pi", ConfigFile), false); err != nil {
			return cfg, err
		}
	}
	if getenv != nil {
		for _, s := range settings {
			for _, name := range []string{s.env, s.alias} {
				if name == "" {
					continue
				}
				if v := strings.TrimSpace(getenv(name)); v != "" {
					if err := s.apply(&cfg, v, name); err != nil {
						return cfg, err
					}
					break
				}
			}
		}
	}
	return cfg, nil
}

func (c *Config) readFile(path string, global bool) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return errcode.Errorf(errcode.InvalidInput, "%s: %v", path, err)
	}
	var raw struct {
		Subagents map[string]json.RawMessage `json:"subagents"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return errcode.Errorf(errcode.InvalidInput, "%s: %v", path, err)
	}
	// In key order: the first error is the same on every read.
	keys := make([]string, 0, len(raw.Subagents))
	for k := range raw.Subagents {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		v := raw.Subagents[key]
		if i := slices.IndexFunc(settings, func(s setting) bool { return s.key == key }); i >= 0 {
			if !global && !settings[i].project {
				continue
			}
			var val any
			if err := json.Unmarshal(v, &val); err != nil {
				return errcode.Errorf(errcode.InvalidInput, "%s: subagents.%s: %v", path, key, err)
			}
			if err := settings[i].apply(c, val, path+": subagents."+key); err != nil {
				return err
			}
			continue
		}
		if key == "permissions" {
			if global {
				if err := c.readPermissions(path, v); err != nil {
					return err
				}
			}
			continue
		}
		if err := c.readAgent(path, key, v, global); err != nil {
			return err
		}
	}
	return nil
}

// SettingError is a mistake in one key of a settings file's "subagents"
// object: a key that is no setting, or a value of the wrong kind. It says
// the file and the key's path under "subagents", so that the doctor puts
// it on the key's line; the error that carries it is INVALID_INPUT.
type SettingError struct {
	File string
	// Key is the key's path under "subagents": ["finder", "modle"].
	Key []string
	// What is the mistake without the file (`unknown setting "x"`, or
	// `subagents.finder.model must be ...`); Next what to do, or "".
	What, Next string
	// unknown: the key is no setting; else its value is wrong.
	unknown bool
}

// Error says the mistake with the file: `unknown setting "x" in FILE: did
// you mean "y"?`, or `FILE: subagents.x must be ..., not ...`.
func (e *SettingError) Error() string {
	if e.unknown {
		return e.What + " in " + e.File + ": " + e.Next
	}
	return e.File + ": " + e.Short()
}

// Short is the mistake without the file, for a report that names the
// file and the line beside it.
func (e *SettingError) Short() string {
	if e.Next == "" {
		return e.What
	}
	return e.What + ": " + e.Next
}

// settingErr is the INVALID_INPUT error carrying e.
func settingErr(e *SettingError) error {
	return errcode.Wrap(errcode.InvalidInput, e, e.Error())
}

// unknownSetting is the error for key, at path under "subagents", which
// none of known is: with the near one it likely is, else what the place
// takes (otherwise).
func unknownSetting(file string, path []string, known []string, otherwise string) error {
	prefix := strings.Join(path[:len(path)-1], ".")
	if prefix != "" {
		prefix += "."
	}
	e := &SettingError{File: file, Key: path, What: fmt.Sprintf("unknown setting %q", prefix+path[len(path)-1]), Next: otherwise, unknown: true}
	if near := nearest.Closest(path[len(path)-1], known); near != "" {
		e.Next = fmt.Sprintf("did you mean %q?", prefix+near)
	}
	return settingErr(e)
}

// wrongKind is the error for a value of the wrong kind at path under
// "subagents": what it must be, and what it is.
func wrongKind(file string, path []string, mustBe string, v any) error {
	return settingErr(&SettingError{File: file, Key: path, What: fmt.Sprintf("subagents.%s must be %s, not %s", strings.Join(path, "."), mustBe, quoted(v))})
}

// settingKeys are the keys of the "subagents" object that are settings,
// for the near one a misspelt key likely is.
func settingKeys() []string {
	keys := []string{"permissions"}
	for _, s := range settings {
		keys = append(keys, s.key)
	}
	return keys
}

// entryKeys are a profile's entry's keys (the task contract's model, the
// SingleResult contract's disabled); permissionKeys the permissions'.
var (
	entryKeys      = []string{"model", "disabled"}
	permissionKeys = []string{"default", "subagents", "allowInternalRouting"}
)

const noSuchSetting = `no setting has that name (docs/settings.md lists them), and a profile's entry is an object {"model": ..., "disabled": ...}`

// decodeObject reads v as a JSON object, or says it is none.
func decodeObject(v json.RawMessage) (map[string]any, bool) {
	var m map[string]any
	if json.Unmarshal(v, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

func (c *Config) readPermissions(path string, v json.RawMessage) error {
	perm, isObject := decodeObject(v)
	if !isObject {
		var val any
		_ = json.Unmarshal(v, &val)
		return wrongKind(path, []string{"permissions"}, `an object {"default": ..., "subagents": {...}, "allowInternalRouting": ...}`, val)
	}
	for _, k := range slices.Sorted(maps.Keys(perm)) {
		if !slices.Contains(permissionKeys, k) {
			return unknownSetting(path, []string{"permissions", k}, permissionKeys, `the permissions take "default", "subagents" and "allowInternalRouting"`)
		}
	}
	policy := func(key []string, v any) (string, error) {
		if s, isString := v.(string); isString && (s == "allow" || s == "deny") {
			return s, nil
		}
		return "", wrongKind(path, key, `"allow" or "deny"`, v)
	}
	// An empty default is no policy, as before: the default stays allow.
	if v, set := perm["default"]; set && v != "" {
		p, err := policy([]string{"permissions", "default"}, v)
		if err != nil {
			return err
		}
		c.DefaultPermission = p
	}
	c.Permissions, c.AllowInternalRouting = nil, false
	if v, set := perm["subagents"]; set {
		m, isObject := v.(map[string]any)
		if !isObject {
			return wrongKind(path, []string{"permissions", "subagents"}, `an object of profile names, each "allow" or "deny"`, v)
		}
		c.Permissions = map[string]string{}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			p, err := policy([]string{"permissions", "subagents", name}, m[name])
			if err != nil {
				return err
			}
			c.Permissions[name] = p
		}
	}
	if v, set := perm["allowInternalRouting"]; set {
		b, isBool := v.(bool)
		if !isBool {
			return wrongKind(path, []string{"permissions", "allowInternalRouting"}, "true or false", v)
		}
		c.AllowInternalRouting = b
	}
	return nil
}

// readAgent reads one profile's entry: its model (pi's config dir only)
// and whether it is disabled (a project may disable, not enable). A key
// that is neither a setting nor an object is taken for a misspelt
// setting, as is an object whose keys are no entry's when its name is
// near a setting's.
func (c *Config) readAgent(path, id string, v json.RawMessage, global bool) error {
	entry, isObject := decodeObject(v)
	if !isObject {
		return unknownSetting(path, []string{id}, settingKeys(), noSuchSetting)
	}
	for _, k := range slices.Sorted(maps.Keys(entry)) {
		if slices.Contains(entryKeys, k) {
			continue
		}
		if near := nearest.Closest(id, settingKeys()); near != "" {
			return unknownSetting(path, []string{id}, settingKeys(), noSuchSetting)
		}
		return unknownSetting(path, []string{id, k}, entryKeys, `a profile's entry takes "model" and "disabled"`)
	}
	if m, set := entry["model"]; set {
		model, isString := m.(string)
		if !isString {
			return wrongKind(path, []string{id, "model"}, `a model "provider/id[:thinking]"`, m)
		}
		if model != "" && global {
			if _, _, _, err := ParseModelOverride(model); err != nil {
				return errcode.Errorf(errcode.InvalidInput, "%s: subagents.%s.model: %v", path, id, err)
			}
			if c.Models == nil {
				c.Models = map[string]string{}
			}
			c.Models[id] = model
		}
	}
	if d, set := entry["disabled"]; set {
		disabled, isBool := d.(bool)
		if !isBool {
			return wrongKind(path, []string{id, "disabled"}, "true or false", d)
		}
		if global || disabled {
			if c.DisabledAgents == nil {
				c.DisabledAgents = map[string]bool{}
			}
			c.DisabledAgents[id] = disabled
		}
	}
	return nil
}

func asBool(key string, v any, from string) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		switch strings.ToLower(b) {
		case "1", "true", "yes", "on":
			return true, nil
		case "0", "false", "no", "off":
			return false, nil
		}
	}
	return false, errcode.Errorf(errcode.InvalidInput, "%s: %s must be true or false, not %v", from, key, quoted(v))
}

func asInt(key string, v any, from string, lo, hi int) (int, error) {
	var n int
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1e9 {
			return 0, errcode.Errorf(errcode.InvalidInput, "%s: %s must be a whole number, not %v", from, key, x)
		}
		n = int(x)
	case string:
		i, err := strconv.Atoi(x)
		if err != nil {
			return 0, errcode.Errorf(errcode.InvalidInput, "%s: %s must be a whole number, not %q", from, key, x)
		}
		n = i
	default:
		return 0, errcode.Errorf(errcode.InvalidInput, "%s: %s must be a whole number, not %v", from, key, quoted(v))
	}
	if n < lo || n > hi {
		return 0, errcode.Errorf(errcode.InvalidInput, "%s: %s must be %d to %d, not %d", from, key, lo, hi, n)
	}
	return n, nil
}

// asFolders reads a list of absolute folders: a JSON array of strings, or
// a variable's colon-separated list. "~" and "~/..." are the home folder;
// a relative folder is refused, as it would mean a different one in every
// cwd.
func asFolders(key string, v any, from string) ([]string, error) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case string:
		for _, d := range filepath.SplitList(x) {
			items = append(items, d)
		}
	default:
		return nil, errcode.Errorf(errcode.InvalidInput, "%s: %s must be a list of absolute folders, not %s", from, key, quoted(v))
	}
	var out []string
	for _, item := range items {
		d, ok := item.(string)
		if !ok {
			return nil, errcode.Errorf(errcode.InvalidInput, "%s: %s must be a list of absolute folders, not %s", from, key, quoted(v))
		}
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		if d == "~" || strings.HasPrefix(d, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, errcode.Errorf(errcode.InvalidInput, "%s: %s: %q: no home folder to expand ~ to: %v", from, key, d, err)
			}
			d = filepath.Join(home, strings.TrimPrefix(d, "~"))
		}
		if !filepath.IsAbs(d) {
			return nil, errcode.Errorf(errcode.InvalidInput, "%s: %s: %q is not an absolute folder (a relative one would name a different folder from every cwd)", from, key, d)
		}
		out = append(out, filepath.Clean(d))
	}
	return out, nil
}

// TrustsProject reports whether the settings trust the project whose root
// is root: it is one of TrustedProjects or inside one (a folder of
// clones the user trusts as a whole). Both sides are compared by their
// real paths only, as pi keys trust.json: a link inside a trusted folder
// that points outside it leads to a folder the user never trusted.
func (c Config) TrustsProject(root string) bool {
	if root == "" || !filepath.IsAbs(root) {
		return false
	}
	r := realPath(root)
	for _, trusted := range c.TrustedProjects {
		t := realPath(trusted)
		if r == t || strings.HasPrefix(r, t+string(filepath.Separator)) || t == string(filepath.Separator) {
			return true
		}
	}
	return false
}

// realPath is p with the links of its longest existing part resolved
// (the rest, missing, cannot be a link yet).
func realPath(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		if filepath.Dir(dir) == dir {
			return p
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
	}
}

func quoted(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Enabled is nil when delegation and the profile name may run; else
// SUBAGENTS_DISABLED or SUBAGENT_DISABLED saying which setting to change.
func (c Config) Enabled(name string) error {
	if c.Disabled {
		return errcode.Errorf(errcode.SubagentsDisabled,
			"Subagents are disabled by configuration (subagents.disabled in %s, or SUBAGENTS_DISABLED)", ConfigFile)
	}
	if c.DisabledAgents[name] {
		return errcode.Errorf(errcode.SubagentDisabled,
			"Subagent %q is disabled by configuration (subagents.%s.disabled in %s)", name, name, ConfigFile)
	}
	return nil
}

// CallerKnobVars are the settings' variables that belong to the pi that
// delegates, not to the service (api.CallerKnobs): the task contract sets
// them per pi process. A service a pi started holds that pi's environment
// and serves every other pi too, so the worker never reads them from its
// own (WithoutCallerKnobs); each request carries its pi's (CallerKnobs).
var CallerKnobVars = []string{"OHM_SUBAGENTS_OUTPUT_MAX_CHARS", "OHM_SUBAGENTS_TASK_MAX_EVENTS"}

// CallerKnobs reads the calling pi's knobs from getenv (its environment),
// checked and bounded as the settings' values are; nil when it sets none.
func CallerKnobs(getenv func(string) string) (*api.CallerKnobs, error) {
	var cfg Config
	set := false
	for _, s := range settings {
		if !slices.Contains(CallerKnobVars, s.alias) {
			continue
		}
		if v := strings.TrimSpace(getenv(s.alias)); v != "" {
			if err := s.apply(&cfg, v, s.alias); err != nil {
				return nil, err
			}
			set = true
		}
	}
	if !set {
		return nil, nil
	}
	return &api.CallerKnobs{OutputMaxChars: cfg.OutputMaxChars, TaskMaxEvents: cfg.TaskMaxEvents}, nil
}

// WithoutCallerKnobs is getenv without CallerKnobVars: the worker's view
// of its environment.
func WithoutCallerKnobs(getenv func(string) string) func(string) string {
	return func(k string) string {
		if slices.Contains(CallerKnobVars, k) {
			return ""
		}
		return getenv(k)
	}
}
