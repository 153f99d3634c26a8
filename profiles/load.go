package profiles

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

//go:embed builtin/*.md
var builtinFS embed.FS

// Set is the profiles visible from one working directory.
type Set struct {
	byName map[string]*Profile
	// under is the scope of the built-in or global profile each project
	// profile of the same name replaces: replacing one is a power an
	// untrusted project does not have (projecttrust.go).
	under map[string]Scope
}

// Options say where to look.
type Options struct {
	// Cwd is the task's working directory; project-local profiles are read
	// from the nearest .pi folder at or above it.
	Cwd string
	// AgentDir is pi's config dir: $PI_CODING_AGENT_DIR, else ~/.pi/agent.
	AgentDir string
	// PromptDirs are more global folders of profiles, such as the sessions contract's
	// prompts/ folder of an installed subagents extension
	// ($SUBAGENTS_PROMPT_DIRS, colon-separated). pi's own ~/.pi/agent/prompts
	// holds prompt templates, not profiles, so it is not read.
	PromptDirs []string
	// Getenv reads the SUBAGENTS_* variables (SUBAGENTS_TRUSTED_PROJECTS)
	// that decide, with pi's trust.json, whether the project is trusted
	// (nil: the process's environment).
	Getenv func(string) string
}

// DefaultPromptDirs are the sessions contract's prompts/ folders: those named by
// $SUBAGENTS_PROMPT_DIRS (the extension names its own when it starts the
// service), then the extension's prompts/ of the source tree this binary
// was built in (bin/subagents beside extension/).
func DefaultPromptDirs() []string {
	exe, _ := os.Executable()
	return promptDirs(os.Getenv("SUBAGENTS_PROMPT_DIRS"), exe)
}

func promptDirs(list, exe string) []string {
	var dirs []string
	if list != "" {
		dirs = filepath.SplitList(list)
	}
	if exe == "" {
		return dirs
	}
	tree := filepath.Join(filepath.Dir(filepath.Dir(exe)), "extension", "prompts")
	if info, err := os.Stat(tree); err == nil && info.IsDir() && !slices.Contains(dirs, tree) {
		dirs = append(dirs, tree)
	}
	return dirs
}

// DefaultAgentDir is pi's config dir as pi finds it.
func DefaultAgentDir() string {
	if d := os.Getenv("PI_CODING_AGENT_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".pi", "agent")
}

// source is one folder of profile files.
type source struct {
	dir     string
	scope   Scope
	replace bool // the delegate contract's agent-profiles: the body replaces pi's prompt
}

func (o Options) sources() []source {
	var out []source
	for _, d := range o.PromptDirs {
		if d != "" {
			out = append(out, source{d, ScopeGlobal, false})
		}
	}
	if o.AgentDir != "" {
		out = append(out,
			source{filepath.Join(o.AgentDir, "agents"), ScopeGlobal, false},
			source{filepath.Join(o.AgentDir, "agent-profiles"), ScopeGlobal, true},
		)
	}
	if root := projectRoot(o.Cwd); root != "" {
		out = append(out,
			source{filepath.Join(root, ".pi", "agents"), ScopeProject, false},
			source{filepath.Join(root, ".pi", "agent-profiles"), ScopeProject, true},
		)
	}
	return out
}

// projectRoot is the nearest folder at or above cwd that holds a .pi folder.
func projectRoot(cwd string) string {
	if cwd == "" {
		return ""
	}
	for dir := filepath.Clean(cwd); ; dir = filepath.Dir(dir) {
		if info, err := os.Stat(filepath.Join(dir, ".pi")); err == nil && info.IsDir() {
			return dir
		}
		if dir == filepath.Dir(dir) {
			return ""
		}
	}
}

// cache keeps parsed sets keyed by where they were read from, valid while
// no profile file changed (by name, size and modification time): a changed
// file is seen at once, and an unchanged tree is not parsed again.
var cache struct {
	sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	signature string
	set       *Set
}

// maxCacheEntries bounds the cache: one entry per distinct cwd and agent
// dir, which a worker sees few of.
const maxCacheEntries = 256

type fileRef struct {
	path  string
	src   source
	stamp string
}

// scan lists the profile files of opts' folders, and what a later look
// must find unchanged for the same set: each folder (present or not) and
// each file.
func scan(opts Options) (files []fileRef, watched []Watch, err error) {
	for _, src := range opts.sources() {
		dir, err := os.Stat(src.dir)
		if errors.Is(err, fs.ErrNotExist) {
			watched = append(watched, Watch{Path: src.dir})
			continue
		}
		if err != nil {
			return nil, nil, errcode.Errorf(errcode.InvalidInput, "profiles folder %s: %v", src.dir, err)
		}
		watched = append(watched, watchOf(src.dir, dir))
		entries, err := os.ReadDir(src.dir)
		if err != nil {
			return nil, nil, errcode.Errorf(errcode.InvalidInput, "profiles folder %s: %v", src.dir, err)
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
				continue
			}
			p := filepath.Join(src.dir, e.Name())
			info, err := e.Info()
			if err != nil {
				continue
			}
			w := watchOf(p, info)
			watched = append(watched, w)
			files = append(files, fileRef{path: p, src: src, stamp: fmt.Sprintf("%s|%d|%d\n", p, w.Size, info.ModTime().UnixNano())})
		}
	}
	return files, watched, nil
}

// Watch is one path a set of profiles was read from, as it was: a later
// look that finds every one as it was (no folder appeared, none went, no
// file changed) would read the same set, and need not ask.
type Watch struct {
	Path string `json:"path"`
	// MtimeMs is its modification time in whole milliseconds; 0: it did
	// not exist.
	MtimeMs int64 `json:"mtime_ms"`
	// Size is a file's size (a folder's is left out).
	Size int64 `json:"size,omitempty"`
}

func watchOf(path string, info fs.FileInfo) Watch {
	w := Watch{Path: path, MtimeMs: max(info.ModTime().UnixMilli(), 1)}
	if !info.IsDir() {
		w.Size = info.Size()
	}
	return w
}

// Watched is what the set Load(opts) gives depends on: the folders and
// files it reads, the .pi folders that decide the project's root (those
// between cwd and it must stay absent), and this program (its built-in
// profiles).
func Watched(opts Options) ([]Watch, error) {
	_, watched, err := scan(opts)
	if err != nil {
		return nil, err
	}
	if opts.Cwd != "" {
		for dir := filepath.Clean(opts.Cwd); ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, ".pi")
			info, err := os.Stat(p)
			if err == nil && info.IsDir() {
				watched = append(watched, watchOf(p, info))
				break
			}
			watched = append(watched, Watch{Path: p})
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if info, err := os.Stat(exe); err == nil {
			watched = append(watched, watchOf(exe, info))
		}
	}
	if projectRoot(opts.Cwd) != "" {
		watched = append(watched, trustWatched(opts.AgentDir)...)
	}
	return watched, nil
}

// Load returns the built-in profiles overridden by the global ones and
// those by the project's. A malformed file is kept with its error, and so
// is a project profile that would add code or power in a project the user
// has not trusted (projecttrust.go): it carries a PERMISSION_DENIED
// refusal.
func Load(opts Options) (*Set, error) {
	set, err := loadFiles(opts)
	if err != nil || !set.hasProject() {
		return set, err
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	// Only the user's own settings may trust a project; a malformed file
	// trusts nothing here, and the settings check names it.
	cfg, _ := LoadConfig(opts.AgentDir, "", getenv)
	trust := TrustOfProject(opts.AgentDir, projectRoot(opts.Cwd), cfg)
	if trust.Trusted {
		return set, nil
	}
	return gateUntrusted(set, set.under, opts.Cwd, opts.AgentDir, trust), nil
}

func (s *Set) hasProject() bool {
	for _, p := range s.byName {
		if p.Scope == ScopeProject {
			return true
		}
	}
	return false
}

// loadFiles is Load before the project's trust is applied: the parsed
// files, cached.
func loadFiles(opts Options) (*Set, error) {
	files, _, err := scan(opts)
	if err != nil {
		return nil, err
	}
	var sig strings.Builder
	for _, f := range files {
		sig.WriteString(f.stamp)
	}
	key := strings.Join(opts.PromptDirs, "\x00") + "\x00" + opts.AgentDir + "\x00" + projectRoot(opts.Cwd)
	cache.Lock()
	if e, ok := cache.entries[key]; ok && e.signature == sig.String() {
		cache.Unlock()
		return e.set, nil
	}
	cache.Unlock()

	set := &Set{byName: map[string]*Profile{}, under: map[string]Scope{}}
	for _, p := range builtins() {
		set.byName[p.Name] = p
	}
	for _, f := range files {
		p := readFile(f.path, f.src)
		if prev, ok := set.byName[p.Name]; ok && p.Scope == ScopeProject && prev.Scope != ScopeProject {
			set.under[p.Name] = prev.Scope
		}
		set.byName[p.Name] = p
	}

	cache.Lock()
	if cache.entries == nil || len(cache.entries) >= maxCacheEntries {
		cache.entries = map[string]cacheEntry{}
	}
	cache.entries[key] = cacheEntry{signature: sig.String(), set: set}
	cache.Unlock()
	return set, nil
}

// readFile parses one file; a failure becomes a profile that carries it,
// named by the file so that it is listed and its use fails clearly.
func readFile(p string, src source) *Profile {
	data, err := os.ReadFile(p)
	if err == nil {
		var prof *Profile
		if prof, err = Parse(data, p, src.scope); err == nil {
			prof.ReplaceSystemPrompt = src.replace
			return prof
		}
	} else {
		err = errcode.Errorf(errcode.InvalidInput, "profile %s: %v", p, err)
	}
	return &Profile{Name: strings.TrimSuffix(filepath.Base(p), ".md"), Scope: src.scope, Path: p, Err: err}
}

var builtinOnce struct {
	sync.Once
	list []*Profile
}

// builtins are parsed once; they are part of the binary.
func builtins() []*Profile {
	builtinOnce.Do(func() {
		entries, _ := builtinFS.ReadDir("builtin")
		for _, e := range entries {
			data, _ := builtinFS.ReadFile(path.Join("builtin", e.Name()))
			p, err := Parse(data, "", ScopeBuiltin)
			if err != nil {
				// A broken built-in is a bug in this binary; the test of the
				// built-ins catches it before release.
				p = &Profile{Name: strings.TrimSuffix(e.Name(), ".md"), Scope: ScopeBuiltin, Err: err}
			}
			builtinOnce.list = append(builtinOnce.list, p)
		}
	})
	return builtinOnce.list
}

// List returns the profiles sorted by name; internal ones only when
// includeInternal.
func (s *Set) List(includeInternal bool) []*Profile {
	var out []*Profile
	for _, p := range s.byName {
		if p.Internal && !includeInternal {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names are the names List returns.
func (s *Set) Names(includeInternal bool) []string {
	var names []string
	for _, p := range s.List(includeInternal) {
		names = append(names, p.Name)
	}
	return names
}

// Lookup finds a profile by name. Unknown: UNKNOWN_AGENT with the delegate contract's
// message; malformed: its parse error.
func (s *Set) Lookup(name string, includeInternal bool) (*Profile, error) {
	p, ok := s.byName[name]
	if !ok || (p.Internal && !includeInternal) {
		avail := strings.Join(s.Names(includeInternal), ", ")
		if avail == "" {
			avail = "(none)"
		}
		return nil, errcode.Errorf(errcode.UnknownAgent, "Unknown profile: %q. Available profiles: %s", name, avail)
	}
	if p.Err != nil {
		return nil, p.Err
	}
	return p, nil
}

// GrantedTools is the tool allowlist a child of this profile gets, or nil
// for no tools: the allowlist, or all tools minus the blacklist; never a
// delegation tool; only read-only tools when the profile is readonly.
func (p *Profile) GrantedTools() []string {
	if p.NoTools {
		return nil
	}
	var tools []string
	switch {
	case len(p.Tools) > 0:
		tools = slices.Clone(p.Tools)
	case len(p.ExcludeTools) > 0:
		for _, t := range AllTools {
			if !slices.Contains(p.ExcludeTools, t) {
				tools = append(tools, t)
			}
		}
	case p.Readonly:
		tools = slices.Clone(ReadOnlyTools)
	default:
		return slices.Clone(api.DefaultTools)
	}
	tools = slices.DeleteFunc(tools, func(t string) bool {
		return slices.Contains(DelegationTools, t) || (p.Readonly && !slices.Contains(ReadOnlyTools, t))
	})
	return slices.Compact(tools)
}
