package profiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// Saved plans are plan documents (api.Plan) in files beside the agent
// profiles: <agentDir>/plans/NAME.yaml (the user's, scope global) and
// <project>/.pi/plans/NAME.yaml (the project's, the nearest folder at or
// above cwd with a .pi folder, as for profiles); .yml and .json too. The
// file's base name is the plan's name.
//
// A project's files may only narrow what runs, as its settings may:
//   - a project plan never replaces a global plan of the same name (unlike
//     a project profile): a cloned repository must not change what a name
//     the user relies on runs; the project's file is listed as shadowed;
//   - a project plan whose steps have a gate (a command the worker runs)
//     is refused unless the user trusts the project (pi's /trust, its
//     defaultProjectTrust, or trustedProjects: TrustOfProject): a
//     repository must not run commands because its plan was asked for by
//     name.
//
// Inline plans and the user's own global files run their gates.

// PlansDir is the folder of plan files in pi's config dir and in a
// project's .pi folder.
const PlansDir = "plans"

// planExts are the extensions of plan files, in the order in which a
// name's files are looked at.
var planExts = []string{".yaml", ".yml", ".json"}

// PlanInfo is one saved plan as `subagents profiles` lists it.
type PlanInfo struct {
	Name        string                 `json:"name"`
	Description string                 `json:"description,omitempty"`
	Args        map[string]api.PlanArg `json:"args,omitempty"`
	// Steps counts its task steps.
	Steps int    `json:"steps,omitempty"`
	Scope Scope  `json:"scope"`
	File  string `json:"file"`
	// Gates is true when a step has a gate command.
	Gates bool `json:"gates,omitempty"`
	// GatesRefused is true for a project plan with gates in a project the
	// settings do not trust: FindPlan refuses it.
	GatesRefused bool `json:"gates_refused,omitempty"`
	// ShadowedBy is the global plan file of the same name that is used
	// instead of this project one.
	ShadowedBy string `json:"shadowed_by,omitempty"`
	// Error is why the file cannot be used (malformed, another user's).
	Error string `json:"error,omitempty"`
}

// planFile is one plan name's file in one folder.
type planFile struct {
	name, path string
	scope      Scope
	// err: the name is no plan name, or two files in the folder give it.
	err error
}

// planDirs are the folders of plan files, global first.
func planDirs(opts Options) []source {
	var out []source
	if opts.AgentDir != "" {
		out = append(out, source{dir: filepath.Join(opts.AgentDir, PlansDir), scope: ScopeGlobal})
	}
	if root := projectRoot(opts.Cwd); root != "" {
		out = append(out, source{dir: filepath.Join(root, ".pi", PlansDir), scope: ScopeProject})
	}
	return out
}

// scanPlans lists the plan files of opts' folders, global first, each
// folder's by name, and what a later look must find unchanged.
func scanPlans(opts Options) ([]planFile, []Watch, error) {
	var files []planFile
	var watched []Watch
	for _, src := range planDirs(opts) {
		info, err := os.Stat(src.dir)
		if errors.Is(err, fs.ErrNotExist) {
			watched = append(watched, Watch{Path: src.dir})
			continue
		}
		if err != nil {
			return nil, nil, errcode.Errorf(errcode.InvalidInput, "plans folder %s: %v", src.dir, err)
		}
		watched = append(watched, watchOf(src.dir, info))
		entries, err := os.ReadDir(src.dir)
		if err != nil {
			return nil, nil, errcode.Errorf(errcode.InvalidInput, "plans folder %s: %v", src.dir, err)
		}
		byName := map[string][]string{}
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if e.IsDir() || !isPlanExt(ext) {
				continue
			}
			p := filepath.Join(src.dir, e.Name())
			if fi, err := e.Info(); err == nil {
				watched = append(watched, watchOf(p, fi))
			}
			name := strings.TrimSuffix(e.Name(), ext)
			byName[name] = append(byName[name], p)
		}
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			paths := byName[name]
			sort.Slice(paths, func(i, j int) bool { return extRank(paths[i]) < extRank(paths[j]) })
			f := planFile{name: name, path: paths[0], scope: src.scope}
			switch {
			case !api.ValidName(name):
				f.err = errcode.Errorf(errcode.InvalidInput, "plan file %s: %q is no plan name (a plan is named by its file, and a name is %s)", f.path, name, api.NameRule)
			case len(paths) > 1:
				f.err = errcode.Errorf(errcode.InvalidInput, "plan %q: %s are all plan files of that name in %s; keep one", name, strings.Join(baseNames(paths), " and "), src.dir)
			}
			files = append(files, f)
		}
	}
	return files, watched, nil
}

func isPlanExt(ext string) bool {
	for _, e := range planExts {
		if ext == e {
			return true
		}
	}
	return false
}

func extRank(p string) int {
	for i, e := range planExts {
		if filepath.Ext(p) == e {
			return i
		}
	}
	return len(planExts)
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// PlansWatched is what ListPlans(opts) depends on: the plans folders
// (present or not) and their files. Watched gives the .pi folders that
// decide the project's root.
func PlansWatched(opts Options) ([]Watch, error) {
	_, watched, err := scanPlans(opts)
	return watched, err
}

// ListPlans lists the saved plans visible from opts.Cwd, by name, a global
// plan before a project one of the same name (which is then marked
// ShadowedBy). A file that cannot be used is listed with its error; only a
// folder that cannot be read fails the listing.
func ListPlans(opts Options) ([]PlanInfo, error) {
	// Settings that do not read (FindPlan fails with their error) must not
	// hide the listing: it is judged by none, the strictest (no trusted
	// group or project).
	cfg, err := LoadConfig(opts.AgentDir, "", os.Getenv)
	if err != nil {
		cfg = Config{}
	}
	return listPlans(opts, cfg, newTrustPolicy(cfg, opts.AgentDir))
}

func listPlans(opts Options, cfg Config, trust trustPolicy) ([]PlanInfo, error) {
	files, _, err := scanPlans(opts)
	if err != nil {
		return nil, err
	}
	global := map[string]string{}
	out := []PlanInfo{}
	for _, f := range files {
		info := PlanInfo{Name: f.name, Scope: f.scope, File: f.path}
		if f.scope == ScopeGlobal {
			global[f.name] = f.path
		} else {
			info.ShadowedBy = global[f.name]
		}
		plan, src, err := loadPlanFile(f, trust)
		if err != nil {
			info.Error = err.Error()
		} else {
			info.Description, info.Args, info.Steps = plan.Description, plan.Args, len(api.TaskSteps(plan))
			info.Gates = firstGate(plan) != nil
			info.GatesRefused = CheckPlanGates(cfg, opts.AgentDir, plan, &src) != nil
		}
		out = append(out, info)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// FindPlan reads the saved plan called name, as visible from opts.Cwd: the
// global file if there is one (a project file never replaces it), else
// the project's. Its arguments are not bound (api.BindPlanArgs). An
// unknown name is INVALID_INPUT listing the plans there are; a file
// another user could have written, or a project plan with gates in a
// project the user's settings do not trust, is PERMISSION_DENIED saying
// how to fix it; a malformed file is INVALID_INPUT naming the file and,
// where it can, the line.
func FindPlan(opts Options, name string) (api.Plan, api.PlanSource, error) {
	cfg, err := LoadConfig(opts.AgentDir, "", os.Getenv)
	if err != nil {
		return api.Plan{}, api.PlanSource{}, err
	}
	return findPlan(opts, cfg, newTrustPolicy(cfg, opts.AgentDir), name)
}

func findPlan(opts Options, cfg Config, trust trustPolicy, name string) (api.Plan, api.PlanSource, error) {
	if err := api.ValidateName("plan", name); err != nil {
		return api.Plan{}, api.PlanSource{}, err
	}
	files, _, err := scanPlans(opts)
	if err != nil {
		return api.Plan{}, api.PlanSource{}, err
	}
	// files are global first: the first of the name is the one used.
	for _, f := range files {
		if f.name != name {
			continue
		}
		plan, src, err := loadPlanFile(f, trust)
		if err != nil {
			return api.Plan{}, api.PlanSource{}, err
		}
		if err := CheckPlanGates(cfg, opts.AgentDir, plan, &src); err != nil {
			return api.Plan{}, api.PlanSource{}, err
		}
		return plan, src, nil
	}
	return api.Plan{}, api.PlanSource{}, unknownPlan(opts, files, name)
}

// unknownPlan is the error for a name no file gives: the plans there are,
// and where they are read from.
func unknownPlan(opts Options, files []planFile, name string) error {
	var names []string
	for _, f := range files {
		names = append(names, f.name)
	}
	sort.Strings(names)
	names = compact(names)
	avail := strings.Join(names, ", ")
	if avail == "" {
		avail = "(none)"
	}
	var dirs []string
	for _, src := range planDirs(opts) {
		dirs = append(dirs, src.dir)
	}
	where := ""
	if len(dirs) > 0 {
		where = fmt.Sprintf(" (saved plans are NAME.yaml, .yml or .json in %s)", strings.Join(dirs, " and "))
	}
	return errcode.Errorf(errcode.InvalidInput, "Unknown plan: %q. Available plans: %s%s", name, avail, where)
}

func compact(sorted []string) []string {
	out := sorted[:0]
	for _, s := range sorted {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// loadPlanFile checks who could have written f, then reads and validates
// it.
func loadPlanFile(f planFile, trust trustPolicy) (api.Plan, api.PlanSource, error) {
	src := api.PlanSource{Name: f.name, File: f.path, Scope: string(f.scope)}
	if f.err != nil {
		return api.Plan{}, src, f.err
	}
	if err := trust.check(fmt.Sprintf("plan %q", f.name), f.path); err != nil {
		return api.Plan{}, src, err
	}
	plan, err := ReadPlanFile(f.path)
	return plan, src, err
}

// ReadPlanFile reads and validates one plan file (YAML, or JSON for a
// .json file): its fields are the JSON names of api.Plan and no others,
// its name is the file's base name (a name: field that differs is an
// error), and it passes api.ValidatePlan. Errors are INVALID_INPUT naming
// the file and, where the parser knows it, the line. The rules are those
// of a saved plan also for a file given by its path, so that a file reads
// the same whether it is named or given. Who may have written it is not
// checked here (FindPlan does, for a saved plan).
func ReadPlanFile(path string) (api.Plan, error) {
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	fail := func(line int, err error, msg string) (api.Plan, error) {
		at := ""
		if line > 0 {
			at = fmt.Sprintf("line %d: ", line)
		}
		return api.Plan{}, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("plan file %s: %s%s", path, at, msg))
	}
	info, err := os.Stat(path)
	if err != nil {
		return fail(0, err, err.Error())
	}
	// A plan is at most MaxPlanBytes as JSON; a YAML file of the same plan
	// is about as long, so a larger file is refused before it is read.
	if info.Size() > api.MaxPlanBytes {
		return fail(0, nil, fmt.Sprintf("the file is %d KiB; a plan is at most %d KiB", info.Size()>>10, api.MaxPlanBytes>>10))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fail(0, err, err.Error())
	}

	var doc *yaml.Node // for the lines of errors; nil if unknown
	var js []byte
	if filepath.Ext(path) == ".json" {
		var v any
		var syn *json.SyntaxError
		if err := json.Unmarshal(data, &v); errors.As(err, &syn) {
			return fail(1+bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n")), err, syn.Error())
		}
		// JSON is YAML: its parse gives the lines of later errors.
		var n yaml.Node
		if yaml.Unmarshal(data, &n) == nil {
			doc = &n
		}
		js = data
	} else {
		n, v, err := parseYAML(data)
		if err != nil {
			line, msg := yamlError(err)
			return fail(line, err, msg)
		}
		doc = n
		if js, err = json.Marshal(v); err != nil {
			return fail(0, err, err.Error())
		}
	}

	plan, err := api.ParsePlan(js)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "plan: ")
		line := 0
		if m := unknownFieldRule.FindStringSubmatch(msg); m != nil {
			line = keyLine(doc, m[1], "")
		} else if m := typeErrorRule.FindStringSubmatch(msg); m != nil {
			line = typedKeyLine(doc, m[2][strings.LastIndex(m[2], ".")+1:], m[1])
			msg = fmt.Sprintf("%s must be %s, not %s", m[2], goTypeWords(m[3]), jsonKindWords[m[1]])
		}
		return fail(line, err, msg)
	}
	if plan.Name != "" && plan.Name != name {
		return fail(keyLine(doc, "name", plan.Name), nil, fmt.Sprintf("name %q is not the file's name %q: a saved plan is named by its file (rename the file, or drop name:)", plan.Name, name))
	}
	plan.Name = name
	if err := api.ValidatePlan(plan); err != nil {
		msg := strings.TrimPrefix(err.Error(), "plan: ")
		line := 0
		if m := stepRule.FindStringSubmatch(msg); m != nil {
			line = keyLine(doc, "key", m[1])
		}
		return fail(line, err, msg)
	}
	return plan, nil
}

var (
	unknownFieldRule = regexp.MustCompile(`unknown field "([^"]+)"`)
	stepRule         = regexp.MustCompile(`^step "([^"]+)"`)
	yamlLineRule     = regexp.MustCompile(`^line (\d+): `)
	// typeErrorRule reads encoding/json's "cannot unmarshal string into Go
	// struct field Step.steps.timeout of type int": the kind of the
	// value, the field's path after the Go type's name, and the Go type.
	typeErrorRule = regexp.MustCompile(`cannot unmarshal (\w+)(?: \S+)? into Go struct field \w+\.([\w.]+) of type (\S+)`)
)

// jsonKindWords say encoding/json's kinds of values in a plan author's
// words.
var jsonKindWords = map[string]string{
	"string": "text", "number": "a number", "bool": "true or false", "array": "a list", "object": "a mapping",
}

// goTypeWords says a plan field's Go type in a plan author's words.
func goTypeWords(t string) string {
	switch {
	case t == "string":
		return "text"
	case strings.HasPrefix(t, "int"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping"
}

// yamlKinds are the YAML tags of the values of each encoding/json kind.
var yamlKinds = map[string][]string{
	"string": {"!!str"}, "number": {"!!int", "!!float"}, "bool": {"!!bool"},
}

// typedKeyLine is the line of the first mapping key named key whose value
// is of the encoding/json kind, or 0: the key a type error is about.
func typedKeyLine(doc *yaml.Node, key, kind string) int {
	return findKey(doc, func(k, v *yaml.Node) bool {
		if k.Value != key {
			return false
		}
		switch kind {
		case "array":
			return v.Kind == yaml.SequenceNode
		case "object":
			return v.Kind == yaml.MappingNode
		}
		return v.Kind == yaml.ScalarNode && slices.Contains(yamlKinds[kind], v.Tag)
	})
}

// parseYAML reads one YAML document as its node (for lines) and as a
// value JSON can hold.
func parseYAML(data []byte) (*yaml.Node, any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("the file is empty")
		}
		return nil, nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("line %d: a plan file holds one YAML document; this is a second", next.Line)
	}
	var v any
	if err := doc.Decode(&v); err != nil {
		return nil, nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		line := doc.Line
		if len(doc.Content) > 0 {
			line = doc.Content[0].Line
		}
		return nil, nil, fmt.Errorf("line %d: a plan is a mapping (name:, description:, args:, steps:), not %s", line, describe(v))
	}
	v, err := jsonable(v)
	return &doc, v, err
}

func describe(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case nil:
		return "nothing"
	}
	return "a single value"
}

// jsonable turns what yaml.v3 decodes into a value encoding/json can
// write: mappings with keys that are not strings (yaml.v3 gives
// map[any]any for those) get their keys as text, and a float JSON cannot
// hold (.inf, .nan) is an error.
func jsonable(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			x[k] = j
		}
		return x, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = j
		}
		return out, nil
	case []any:
		for i, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			x[i] = j
		}
		return x, nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%v is not a number a plan can hold", x)
		}
	}
	return v, nil
}

// yamlError is a yaml.v3 error's line and message without its "yaml: "
// prefix; an error with several lines is joined on one.
func yamlError(err error) (int, string) {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	msg = strings.TrimPrefix(msg, "yaml: ")
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	msg = strings.Join(parts, "; ")
	if m := yamlLineRule.FindStringSubmatch(msg); m != nil {
		var line int
		_, _ = fmt.Sscan(m[1], &line)
		return line, strings.TrimPrefix(msg, m[0])
	}
	return 0, msg
}

// keyLine is the line of the first mapping key named key in doc (with
// that value, when value is not ""), or 0.
func keyLine(doc *yaml.Node, key, value string) int {
	return findKey(doc, func(k, v *yaml.Node) bool {
		return k.Value == key && (value == "" || v.Kind == yaml.ScalarNode && v.Value == value)
	})
}

// findKey is the line of the first mapping key in doc, in document order,
// for which match holds, or 0 (also when doc is nil).
func findKey(doc *yaml.Node, match func(k, v *yaml.Node) bool) int {
	if doc == nil {
		return 0
	}
	var walk func(n *yaml.Node) int
	walk = func(n *yaml.Node) int {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if match(n.Content[i], n.Content[i+1]) {
					return n.Content[i].Line
				}
			}
		}
		for _, c := range n.Content {
			if l := walk(c); l > 0 {
				return l
			}
		}
		return 0
	}
	return walk(doc)
}

// firstGate is the first task step of p with a gate, or nil.
func firstGate(p api.Plan) *api.PlanStep {
	for _, s := range api.TaskSteps(p) {
		if s.Gate != nil {
			return &s
		}
	}
	return nil
}

// CheckPlanGates refuses, with PERMISSION_DENIED, a project's saved plan
// whose steps have gate commands when the user does not trust the project
// (TrustOfProject: pi's trust.json and defaultProjectTrust in agentDir, or
// cfg's trustedProjects): the message says how to trust
// it. An inline plan (src nil) and a global one pass: they are the
// user's own. The project is the folder that holds the plan's .pi folder.
func CheckPlanGates(cfg Config, agentDir string, p api.Plan, src *api.PlanSource) error {
	if src == nil || src.Scope != string(ScopeProject) {
		return nil
	}
	gate := firstGate(p)
	if gate == nil {
		return nil
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(src.File)))
	trust := TrustOfProject(agentDir, root, cfg)
	if trust.Trusted {
		return nil
	}
	command := gate.Gate.Command
	if r := []rune(command); len(r) > 80 {
		command = string(r[:80]) + "…"
	}
	return errcode.Errorf(errcode.PermissionDenied,
		"Permission denied: plan %q is the project's (%s) and step %q runs a gate command (%s), and the project %s %s: a repository's plan runs commands only in a project you trust. %s",
		src.Name, src.File, gate.Key, command, root, trust.notTrusted(), HowToTrust(agentDir, root))
}
