package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// releaseBuild is a release built for this machine only (`make dist
// PLATFORMS=...`), once per test binary: the install tests publish it to a
// registry of their own.
type releaseBuild struct {
	once sync.Once
	// out is the folder cmd/dist wrote, which TestMain removes; dir its
	// dist/npm.
	out string
	dir string
	err error
}

// thisRelease is the release this tree builds; nextRelease the upgrade
// test's next one (-tags upgradeprobe: a changed workflow step).
var thisRelease, nextRelease releaseBuild

// distPackages builds the release's npm packages for this machine's
// platform (cmd/dist, as `make dist` runs it) and returns dist/npm's
// folder.
func distPackages(t *testing.T) string { return thisRelease.build(t) }

// build runs cmd/dist for this machine's platform with args, once.
func (r *releaseBuild) build(t *testing.T, args ...string) string {
	t.Helper()
	// cmd/dist copies extension/dist: the tests' one build of it (which
	// tests running beside this one may start) is over before the copy.
	parentExtension(t)
	r.once.Do(func() {
		out, err := os.MkdirTemp("", "subagents-dist-")
		if err != nil {
			r.err = err
			return
		}
		r.out = out
		// The first build of a release compiles everything anew (no cgo,
		// trimmed paths): minutes on two cores.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./cmd/dist", "-platforms", runtime.GOOS + "-" + runtime.GOARCH, "-out", out}, args...)...)
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			r.err = fmt.Errorf("make dist %s: %v\n%s", strings.Join(args, " "), err, b)
			return
		}
		r.dir = filepath.Join(out, "npm")
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.dir
}

// registry is a real npm registry server on loopback (verdaccio, from
// e2e/registry's lockfile: `make registry`), with no uplink: it serves only
// what the test publishes to it.
type registry struct {
	url     string
	npmrc   string // a user config that points npm at it, with a token to publish
	cacheNp string // npm's cache for this test, so that nothing comes from the machine's
}

func startRegistry(t *testing.T, e *env) registry {
	t.Helper()
	verdaccio, err := filepath.Abs(filepath.Join("registry", "node_modules", ".bin", "verdaccio"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(verdaccio); err != nil {
		t.Fatal("no verdaccio: `make test` installs it (make registry)")
	}
	dir := t.TempDir()
	port := freePort()
	config := fmt.Sprintf(`storage: %s
auth:
  htpasswd:
    file: %s
    max_users: -1
uplinks: {}
packages:
  '**':
    access: $all
    publish: $anonymous
listen: 127.0.0.1:%d
# A platform package is about 56 MB packed (base64 in the publish request):
# past verdaccio's default of 10 MB.
max_body_size: 200mb
log: { type: stdout, format: pretty, level: warn }
`, filepath.Join(dir, "storage"), filepath.Join(dir, "htpasswd"), port)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(e.pi.PathPrefix, "node"), verdaccio, "--config", filepath.Join(dir, "config.yaml"))
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("verdaccio:\n%s", out.String())
		}
	})
	r := registry{url: fmt.Sprintf("http://127.0.0.1:%d/", port), npmrc: filepath.Join(dir, "npmrc"), cacheNp: filepath.Join(dir, "npm-cache")}
	npmrc := fmt.Sprintf("registry=%s\n//127.0.0.1:%d/:_authToken=e2e-publisher\naudit=false\nfund=false\nupdate-notifier=false\n", r.url, port)
	if err := os.WriteFile(r.npmrc, []byte(npmrc), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testTimeout)
	for {
		resp, err := http.Get(r.url + "-/ping")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("verdaccio did not answer on %s: %v\n%s", r.url, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// env is npm's environment for the registry: its config, its own cache.
func (r registry) env() []string {
	// prefer-online: a package published seconds ago is newer than what
	// npm's cache of the registry's metadata holds.
	return []string{"npm_config_userconfig=" + r.npmrc, "npm_config_registry=" + r.url, "npm_config_cache=" + r.cacheNp, "npm_config_prefer_online=true"}
}

// packed is what `npm pack --json` says of a package it packed.
type packed struct {
	Name         string `json:"name"`
	Filename     string `json:"filename"`
	Size         int64  `json:"size"`
	UnpackedSize int64  `json:"unpackedSize"`
}

// platformBudget is [install]'s budget for a platform package, packed: a
// pi user downloads it on install. It holds the Temporal server and its UI
// (subagents-dev) beside the command; past the budget, look for what grew.
const platformBudget = 60 << 20

// npm runs npm with the registry's configuration on the Node beside pi,
// and fails the test if npm fails.
func (r registry) npm(t *testing.T, e *env, dir string, args ...string) []byte {
	t.Helper()
	out, err := r.run(e, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// run runs npm as npm does for the registry; its error carries npm's
// output, for callers that share a result between tests.
func (r registry) run(e *env, dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("npm", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+e.pi.PathPrefix+string(os.PathListSeparator)+os.Getenv("PATH")), r.env()...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("npm %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
}

// packedFolder is a package folder packed once per test binary: the
// install and upgrade tests publish this release each to a registry of
// their own, and packing a platform package (about 56 MB) takes seconds of
// CPU that a second pack of the same folder would spend again.
type packedFolder struct {
	once sync.Once
	tgz  string
	info packed
	err  error
}

var packedFolders sync.Map // package folder → *packedFolder

// pack packs a package folder once; the tarball lies in dist's folder,
// which TestMain removes. No `npm publish --dry-run` of it: every tarball
// packed here is published to a registry, which checks all a dry run does
// and more, and a dry run of the platform package took 6-7 CPU seconds.
func (r registry) pack(t *testing.T, e *env, dir string) (string, packed) {
	t.Helper()
	v, _ := packedFolders.LoadOrStore(dir, &packedFolder{})
	p := v.(*packedFolder)
	p.once.Do(func() {
		dest := filepath.Join(filepath.Dir(filepath.Dir(dir)), "packed", filepath.Base(dir))
		if p.err = os.MkdirAll(dest, 0o755); p.err != nil {
			return
		}
		var infos []packed
		out, err := r.run(e, dest, "pack", "--json", "--pack-destination", dest, dir)
		if err != nil {
			p.err = err
			return
		}
		if err := json.Unmarshal(out, &infos); err != nil || len(infos) != 1 {
			p.err = fmt.Errorf("npm pack %s: %v (%d packages)", dir, err, len(infos))
			return
		}
		p.tgz, p.info = filepath.Join(dest, infos[0].Filename), infos[0]
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.tgz, p.info
}

// publish publishes a package folder, packed once, to the registry.
func (r registry) publish(t *testing.T, e *env, dir string) packed {
	t.Helper()
	tgz, info := r.pack(t, e, dir)
	r.npm(t, e, filepath.Dir(tgz), "publish", tgz)
	return info
}

// publishRelease publishes a release's packages from its dist/npm folder:
// this platform's first, as a release publishes its platforms before the
// package that depends on them. The platform package stays within
// platformBudget.
func (r registry) publishRelease(t *testing.T, e *env, npmDir string) (platform, main packed) {
	t.Helper()
	platform = r.publish(t, e, filepath.Join(npmDir, "subagents-"+runtime.GOOS+"-"+runtime.GOARCH))
	if platform.Size > platformBudget {
		t.Errorf("%s is %.1f MB packed, past the budget of %d MB", platform.Name, float64(platform.Size)/(1<<20), platformBudget>>20)
	}
	main = r.publish(t, e, filepath.Join(npmDir, "subagents"))
	return platform, main
}

// piCommand runs pi with args (install, update) in the test's folder with
// env, and fails the test if it fails.
func (e *env) piCommand(env []string, args ...string) {
	e.t.Helper()
	cmd := exec.Command(e.pi.Path, args...)
	cmd.Env, cmd.Dir = env, e.workDir
	b, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("pi %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	e.t.Logf("pi %s:\n%s", strings.Join(args, " "), b)
}

// withoutGo is PATH with pi's folder first and no folder that holds a Go
// toolchain: a pi user's machine.
func withoutGo(e *env) string {
	dirs := []string{e.pi.PathPrefix}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "go")); err == nil {
			continue
		}
		dirs = append(dirs, d)
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

// TestInstallFromARegistry (issue [install]): a pi user installs the
// release as any pi package, from a registry, with no Go on the machine:
// `pi install npm:@durable-pi/subagents`, then a parent pi delegates: the
// extension starts the service from the installed platform package's
// binary, and the child's answer comes back; the installed `subagents
// doctor` passes. The same through `npm install -g`. Install to first
// result is measured (the scripted model answers at once).
func TestInstallFromARegistry(t *testing.T) {
	// Beside the other tests: the install to first result it records
	// (test-artifacts/) is then under the suite's load; nothing holds it to
	// a figure (the bench's install rows measure it on a quiet machine).
	t.Parallel()
	e := newEnv(t)
	npmDir := distPackages(t)
	reg := startRegistry(t, e)
	platform, main := reg.publishRelease(t, e, npmDir)

	w := e.newLocalWorld()
	path := withoutGo(e)
	if p, err := exec.LookPath("go"); err == nil && strings.HasPrefix(p, e.pi.PathPrefix) {
		t.Fatalf("go is on the user's PATH: %s", p)
	}
	e.parentEnvExtra = append(e.parentEnvExtra, append(reg.env(), "PATH="+path, "SUBAGENTS_BIN=")...)
	env := append(append(os.Environ(), e.parentEnv()...), e.parentEnvExtra...)

	began := time.Now()
	e.piCommand(env, "install", "npm:@durable-pi/subagents")
	installed := time.Since(began)
	var stderr syncBuffer
	p := e.spawnPi([]string{"--mode", "json", "--session", filepath.Join(t.TempDir(), "parent.jsonl"), e.scriptDelegation("installed", "answered by the installed release")}, &stderr)
	_ = p.stdin.Close()
	t.Cleanup(func() {
		p.kill()
		<-p.done
		if t.Failed() {
			t.Logf("parent pi events:\n%.20000s\nstderr:\n%s", p.events, stderr.String())
		}
	})
	p.wait(t)
	e.checkDelegation("installed", "answered by the installed release")
	first := time.Since(began)
	t.Logf("install to first result: %s (pi install %s)", first.Round(time.Millisecond), installed.Round(time.Millisecond))
	writeArtifact(t, "install-to-first-result.txt", fmt.Sprintf("pi install: %s\ninstall to first result: %s\n%s: %d bytes packed, %d unpacked\n%s: %d bytes packed, %d unpacked\n",
		installed.Round(time.Millisecond), first.Round(time.Millisecond), platform.Name, platform.Size, platform.UnpackedSize, main.Name, main.Size, main.UnpackedSize))

	// The service runs the installed binary, not the tree's.
	pid := w.servicePid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || !strings.Contains(exe, filepath.Join("node_modules", "@durable-pi", "subagents-"+npmOS()+"-"+npmCPU(), "bin")) {
		t.Fatalf("the service (pid %d) runs %q (%v), want the installed platform package's binary", pid, exe, err)
	}
	doctor := exec.Command(filepath.Join(filepath.Dir(exe), "subagents"), "doctor", "--cwd", e.workDir)
	doctor.Env = env
	if b, err := doctor.CombinedOutput(); err != nil {
		t.Fatalf("the installed subagents doctor: %v\n%s", err, b)
	}

	// npm install -g: the command on PATH, and the extension loaded from
	// where npm put it.
	prefix := t.TempDir()
	global := exec.Command("npm", "install", "-g", "--prefix", prefix, "@durable-pi/subagents")
	global.Env = env
	if b, err := global.CombinedOutput(); err != nil {
		t.Fatalf("npm install -g: %v\n%s", err, b)
	}
	version := exec.Command(filepath.Join(prefix, "bin", "subagents"), "version")
	version.Env = env
	if b, err := version.CombinedOutput(); err != nil || !strings.Contains(string(b), "subagents ") {
		t.Fatalf("subagents version from npm install -g: %v\n%s", err, b)
	}
}

// npmOS and npmCPU are this machine as npm names it (process.platform,
// process.arch).
func npmOS() string { return runtime.GOOS }

func npmCPU() string {
	if runtime.GOARCH == "amd64" {
		return "x64"
	}
	return runtime.GOARCH
}

// writeArtifact keeps a figure a test measured in test-artifacts/.
func writeArtifact(t *testing.T, name, text string) {
	t.Helper()
	dir := filepath.Join("..", "test-artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
