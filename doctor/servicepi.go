package doctor

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/durable-pi/subagents/worker"
)

// The pi that matters is the one the running service starts its children
// with, which it found at its own start from its own flags, environment,
// binary and folder (worker.DefaultPiLookup): not necessarily the one the
// doctor would find from its. Where /proc describes the service's process
// (Linux, the same user), the doctor rebuilds the service's lookup from
// it and judges that pi.

// procRoot is where Linux describes processes.
const procRoot = "/proc"

// ServicePiLookup is where the service of pid looked for pi when it
// started: its --pi, its $SUBAGENTS_PI, the source tree around its binary
// and its folder, then its PATH. known is false when its process cannot
// be read (no /proc, another user's process, gone).
func ServicePiLookup(pid int) (l worker.PiLookup, known bool) {
	return servicePiLookup(filepath.Join(procRoot, strconv.Itoa(pid)))
}

// servicePiLookup reads the process described at dir.
func servicePiLookup(dir string) (worker.PiLookup, bool) {
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return worker.PiLookup{}, false
	}
	environ, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return worker.PiLookup{}, false
	}
	exe, err := os.Readlink(filepath.Join(dir, "exe"))
	if err != nil {
		return worker.PiLookup{}, false
	}
	cwd, err := os.Readlink(filepath.Join(dir, "cwd"))
	if err != nil {
		return worker.PiLookup{}, false
	}
	env := nulFields(environ)
	return piLookupOf(nulFields(cmdline), func(k string) string { return envValue(env, k) }, exe, cwd), true
}

// piLookupOf is the lookup of a `subagents dev` started with argv and env,
// running exe in cwd, as worker.DefaultPiLookup makes it in that process.
func piLookupOf(argv []string, getenv func(string) string, exe, cwd string) worker.PiLookup {
	l := worker.PiLookup{Flag: piFlag(argv), Env: getenv("SUBAGENTS_PI")}
	// A binary replaced since the service started (`make` while it runs)
	// is listed with this mark; its folder is still the tree it came from.
	exe = strings.TrimSuffix(exe, " (deleted)")
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	l.TreeRoots = []string{filepath.Dir(filepath.Dir(exe)), cwd}
	path := getenv("PATH")
	l.LookPath = func(file string) (string, error) { return lookPathIn(file, path, cwd) }
	return l
}

// piFlag is the value of a --pi flag in argv (the flag package's forms:
// -pi or --pi, then the value as the next word or after "="), or "".
func piFlag(argv []string) string {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "pi" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// lookPathIn finds file in the folders of path (a PATH), a relative one
// taken from cwd, as the process whose PATH it is would.
func lookPathIn(file, path, cwd string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		if p := filepath.Join(dir, file); isExecutable(p) {
			return p, nil
		}
	}
	return "", &os.PathError{Op: "lookpath", Path: file, Err: fs.ErrNotExist}
}

// nulFields splits /proc's NUL-separated lists.
func nulFields(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// envValue is the value of k in env (the last, as a process reads it).
func envValue(env []string, k string) string {
	v := ""
	for _, kv := range env {
		if name, val, found := strings.Cut(kv, "="); found && name == k {
			v = val
		}
	}
	return v
}
