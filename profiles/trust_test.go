package profiles

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

// otherUID is the second local user of these tests: as root they chown
// files to it; as anyone else they judge as if the worker ran as it, which
// makes the tester's own files another user's.
const otherUID = 65534

// asOther makes path another user's for p, and returns the policy to judge
// with.
func asOther(t *testing.T, p trustPolicy, path string) trustPolicy {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := os.Lchown(path, otherUID, otherUID); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p.uid, p.user = otherUID, "nobody"
	return p
}

// groupOf is path's group.
func groupOf(t *testing.T, path string) uint32 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Gid
}

func TestTrustCheck(t *testing.T) {
	own := newTrustPolicy(Config{}, "/agent")
	tests := []struct {
		name string
		// setup makes the tree under root and returns the path to check
		// and the policy to judge it with.
		setup func(t *testing.T, root string) (string, trustPolicy)
		want  []string // in the error; none: allowed
	}{
		{"the user's own file", func(t *testing.T, root string) (string, trustPolicy) {
			return file(t, root, "a/x.md", 0o644), own
		}, nil},
		{"another user's file", func(t *testing.T, root string) (string, trustPolicy) {
			f := file(t, root, "a/x.md", 0o644)
			return f, asOther(t, own, f)
		}, []string{"x.md is owned by uid", "(mode 0644)", "chown"}},
		{"another user's folder above the file", func(t *testing.T, root string) (string, trustPolicy) {
			f := file(t, root, "a/x.md", 0o644)
			return f, asOther(t, own, filepath.Dir(f))
		}, []string{"is owned by uid", "chown"}},
		{"writable by any user", func(t *testing.T, root string) (string, trustPolicy) {
			return file(t, root, "a/x.md", 0o646), own
		}, []string{"x.md can be changed by any user (mode 0646)", "chmod o-w"}},
		{"a folder above writable by any user", func(t *testing.T, root string) (string, trustPolicy) {
			f := file(t, root, "a/x.md", 0o644)
			chmodT(t, filepath.Dir(f), 0o777)
			return f, own
		}, []string{"/a can be changed by any user (mode 0777)"}},
		{"a sticky folder above an existing file", func(t *testing.T, root string) (string, trustPolicy) {
			f := file(t, root, "a/x.md", 0o644)
			chmodT(t, filepath.Dir(f), 0o1777)
			return f, own
		}, nil},
		{"a sticky folder above a missing file", func(t *testing.T, root string) (string, trustPolicy) {
			f := file(t, root, "a/x.md", 0o644)
			chmodT(t, filepath.Dir(f), 0o1777)
			return filepath.Join(filepath.Dir(f), "missing.ts"), own
		}, []string{"(mode 1777)"}},
		{"writable by a group that is not trusted", func(t *testing.T, root string) (string, trustPolicy) {
			f := file(t, root, "a/x.md", 0o664)
			p := own
			p.groups = map[uint32]string{}
			return f, p
		}, []string{"can be changed by group", "(mode 0664)", "chmod g-w", `"trustGroup"`, "/agent/subagents.json"}},
		{"writable by the group trustGroup names", func(t *testing.T, root string) (string, trustPolicy) {
			f := file(t, root, "a/x.md", 0o664)
			p := own
			p.groups = map[uint32]string{groupOf(t, f): "team"}
			return f, p
		}, nil},
		{"a link in the user's folder to another user's file", func(t *testing.T, root string) (string, trustPolicy) {
			target := file(t, root, "b/target.ts", 0o644)
			link := filepath.Join(root, "a", "x.ts")
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			p := asOther(t, own, filepath.Dir(target))
			return link, p
		}, []string{"is owned by uid"}},
		{"a link whose target does not exist yet", func(t *testing.T, root string) (string, trustPolicy) {
			link := filepath.Join(root, "a", "x.ts")
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(root, "nobody-yet", "x.ts"), link); err != nil {
				t.Fatal(err)
			}
			return link, own
		}, []string{"is a link whose target cannot be resolved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			path, p := tt.setup(t, root)
			err := p.check("extension \"x\"", path)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errcode.Is(err, errcode.PermissionDenied) {
				t.Fatalf("err = %v, want PERMISSION_DENIED", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if !strings.HasPrefix(err.Error(), `Permission denied: extension "x": `) {
				t.Errorf("the error does not name what it refused first: %v", err)
			}
		})
	}
}

func file(t *testing.T, root, rel string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	chmodT(t, p, mode)
	return p
}

func chmodT(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if mode&0o1000 != 0 {
		mode = mode&0o777 | os.ModeSticky
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func TestExtraArgResources(t *testing.T) {
	got := extraArgResources([]string{"--verbose", "-e", "./a.ts", "--extension=/b.ts", "--skill", "s", "--system-prompt=p.md", "--model", "x", "--theme"})
	want := []flagValue{{"--extension", "./a.ts"}, {"--extension", "/b.ts"}, {"--skill", "s"}, {"--system-prompt", "p.md"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestResolveRefusesWhatAnotherUserWrote: the worker's resolve (ResolveTasks
// and Admit) refuses a project profile, or what it names, that another
// user could have written, with PERMISSION_DENIED; the user's own runs.
func TestResolveRefusesWhatAnotherUserWrote(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		setup   func(t *testing.T, proj string) // after the files are written
		want    string                          // in the error; "": allowed
	}{
		{"the user's own profile and extension", "extensions: ./ext.ts", nil, ""},
		{"a package source is not a file here", "extensions: npm:some-extension", nil, ""},
		{"a profile others may change", "", func(t *testing.T, proj string) {
			chmodT(t, filepath.Join(proj, ".pi", "agents", "p.md"), 0o666)
		}, `profile "p": `},
		{"its agents folder others may change", "", func(t *testing.T, proj string) {
			chmodT(t, filepath.Join(proj, ".pi", "agents"), 0o777)
		}, "agents can be changed by any user"},
		{"the .pi folder others may change", "", func(t *testing.T, proj string) {
			chmodT(t, filepath.Join(proj, ".pi"), 0o777)
		}, ".pi can be changed by any user"},
		{"an extension others may change, relative to the cwd", "extensions: ./ext.ts", func(t *testing.T, proj string) {
			chmodT(t, filepath.Join(proj, "ext.ts"), 0o646)
		}, `extension "./ext.ts" of profile "p"`},
		{"an extension in extraArgs", "extraArgs: -e, ./ext.ts", func(t *testing.T, proj string) {
			chmodT(t, filepath.Join(proj, "ext.ts"), 0o646)
		}, `--extension "./ext.ts" in the extraArgs`},
		{"a skill others may change", "suggestedSkills: s", func(t *testing.T, proj string) {
			chmodT(t, filepath.Join(proj, ".pi", "skills", "s.md"), 0o646)
		}, "skill "},
		{"a skill read into the prompt", "loadSkills: s", func(t *testing.T, proj string) {
			chmodT(t, filepath.Join(proj, ".pi", "skills", "s.md"), 0o646)
		}, "skill "},
		{"a prompt given as a file", "appendSystemPrompt: notes.md", func(t *testing.T, proj string) {
			chmodT(t, filepath.Join(proj, "notes.md"), 0o646)
		}, "prompt file "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proj := t.TempDir()
			file(t, proj, ".pi/agents/p.md", 0o644)
			src := "---\nname: p\n" + tt.profile + "\n---\nBe brief.\n"
			if err := os.WriteFile(filepath.Join(proj, ".pi", "agents", "p.md"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			file(t, proj, "ext.ts", 0o644)
			file(t, proj, ".pi/skills/s.md", 0o644)
			file(t, proj, "notes.md", 0o644)
			chmodT(t, proj, 0o755)
			if tt.setup != nil {
				tt.setup(t, proj)
			}
			a := &Activities{AgentDir: t.TempDir()}
			// The user's own project: trusted, so only the files' owners
			// and modes decide.
			piTrusts(t, a.AgentDir, proj)
			out, err := a.ResolveTasks(context.Background(), ResolveRequest{Tasks: []ResolveTask{{Profile: "p", Cwd: proj}}})
			if err != nil {
				t.Fatal(err)
			}
			e := out[0].Error
			if tt.want == "" {
				if e != nil {
					t.Fatalf("refused: %s", e.Message)
				}
				return
			}
			if e == nil || e.Code != errcode.PermissionDenied || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("error %+v, want PERMISSION_DENIED saying %q", e, tt.want)
			}
		})
	}
}

// TestTrustGroupIsGlobal: trustGroup comes from pi's config dir (or
// SUBAGENTS_TRUST_GROUP), never from a project's file, names a group that
// exists, and lets that group's write access pass the trust check.
func TestTrustGroupIsGlobal(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	setting := `{"subagents":{"trustGroup":` + strconv.Quote(g.Name) + `}}`
	agent, cwd := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(cwd, ".pi"), 0o755))
	must(t, os.WriteFile(filepath.Join(cwd, ".pi", ConfigFile), []byte(setting), 0o644))
	if c, err := LoadConfig(agent, cwd, nil); err != nil || c.TrustGroup != "" {
		t.Fatalf("a project's trustGroup: %q %v", c.TrustGroup, err)
	}
	must(t, os.WriteFile(filepath.Join(agent, ConfigFile), []byte(setting), 0o644))
	c, err := LoadConfig(agent, cwd, nil)
	if err != nil || c.TrustGroup != g.Name {
		t.Fatalf("pi's config dir's trustGroup: %q %v", c.TrustGroup, err)
	}
	f := file(t, t.TempDir(), "x.md", 0o664)
	if err := newTrustPolicy(c, agent).check("x", f); err != nil {
		t.Fatalf("group %s is trusted: %v", g.Name, err)
	}
	if c, err := LoadConfig(agent, "", func(k string) string { return map[string]string{"SUBAGENTS_TRUST_GROUP": "no-such-group-29"}[k] }); !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), `no group "no-such-group-29"`) {
		t.Fatalf("SUBAGENTS_TRUST_GROUP of no group: %q %v", c.TrustGroup, err)
	}
}
