package cli

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-pi/subagents/internal/errcode"
)

// testServiceHost is a machine of goos whose home is a temp folder and
// whose service manager records what it is asked (and fails with fail).
func testServiceHost(t *testing.T, goos string, fail error) (serviceHost, *[]string) {
	t.Helper()
	home := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"PATH": "/opt/node 22/bin:/usr/bin", "PI_CODING_AGENT_DIR": filepath.Join(home, "pi agent"),
		"SUBAGENTS_TRUSTED_PROJECTS": "/src/a:/src/$b", "SUBAGENTS_API_KEY": "secret-value", "ANTHROPIC_API_KEY": "sk-secret",
	}
	var ran []string
	h := serviceHost{
		goos: goos, home: home, exe: exe, uid: 501,
		getenv: func(k string) string { return env[k] },
		environ: func() []string {
			var out []string
			for k, v := range env {
				out = append(out, k+"="+v)
			}
			return out
		},
		run: func(_ context.Context, name string, args ...string) (string, error) {
			ran = append(ran, strings.Join(append([]string{name}, args...), " "))
			return "", fail
		},
	}
	return h, &ran
}

func TestServiceInstallSystemd(t *testing.T) {
	h, ran := testServiceHost(t, "linux", nil)
	var out bytes.Buffer
	// % is a systemd specifier everywhere; $ a variable in command lines
	// only: Environment= takes it as it is.
	dataDir := filepath.Join(h.home, "data 100% $x")
	if err := h.main(context.Background(), []string{"install", "--data-dir", dataDir, "--port", "7300"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.home, ".config", "systemd", "user", "subagents.service")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"\nExecStart=" + h.exe + ` dev --data-dir "` + filepath.Join(h.home, "data 100%% $$x") + `" --ip 127.0.0.1 --port 7300` + "\n",
		"\nExecStartPre=-" + h.exe + ` stop --data-dir "` + filepath.Join(h.home, "data 100%% $$x") + `"` + "\n",
		"\nWorkingDirectory=" + filepath.Join(h.home, "data 100%% $x") + "\n",
		`Environment="SUBAGENTS_DATA_DIR=` + filepath.Join(h.home, "data 100%% $x") + `"` + "\n",
		`Environment="PATH=/opt/node 22/bin:/usr/bin"`,
		"\nEnvironment=SUBAGENTS_TRUSTED_PROJECTS=/src/a:/src/$b\n",
		"EnvironmentFile=-" + filepath.Join(h.home, ".config", "subagents", "service.env"),
		"KillMode=mixed", "TimeoutStopSec=30", "Restart=on-failure", "RestartSec=10", "WantedBy=default.target",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q:\n%s", want, unit)
		}
	}
	if strings.Contains(unit, "secret") {
		t.Errorf("the unit holds a secret:\n%s", unit)
	}
	if len(*ran) != 0 {
		t.Errorf("install without --enable ran %v", *ran)
	}
	if !strings.Contains(out.String(), "systemctl --user enable --now subagents.service") {
		t.Errorf("install does not say how to turn it on:\n%s", out.String())
	}
	// systemd itself reads the unit, where it is installed (the test
	// binary stands for subagents; the user manager need not run).
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		if said, err := exec.Command(sa, "verify", path).CombinedOutput(); err != nil || strings.Contains(string(said), path) {
			t.Errorf("systemd-analyze verify: %v\n%s", err, said)
		}
	} else {
		t.Log("systemd-analyze not found: the unit was checked by its content only")
	}
	out.Reset()
	if err := h.main(context.Background(), []string{"status", "--data-dir", dataDir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "installed: "+path) || !strings.Contains(out.String(), "not running") {
		t.Errorf("status:\n%s", out.String())
	}
	out.Reset()
	if err := h.main(context.Background(), []string{"uninstall"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unit is still there: %v", err)
	}
	if !strings.Contains(strings.Join(*ran, "\n"), "systemctl --user disable --now subagents.service") {
		t.Errorf("uninstall ran %v", *ran)
	}
}

func TestServiceInstallEnable(t *testing.T) {
	h, ran := testServiceHost(t, "linux", nil)
	if err := h.main(context.Background(), []string{"install", "--enable"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*ran, "; "); got != "systemctl --user daemon-reload; systemctl --user enable --now subagents.service" {
		t.Fatalf("ran %q", got)
	}
	// A manager that does not answer (no session bus, as in a container):
	// the file is written, the error says what to do.
	h, _ = testServiceHost(t, "linux", errors.New("Failed to connect to bus"))
	err := h.main(context.Background(), []string{"install", "--enable"}, io.Discard, io.Discard)
	if !errcode.Is(err, errcode.ServiceUnavailable) || !strings.Contains(err.Error(), "the file is written") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.home, ".config", "systemd", "user", "subagents.service")); err != nil {
		t.Fatal(err)
	}
}

func TestServiceInstallLaunchd(t *testing.T) {
	h, ran := testServiceHost(t, "darwin", nil)
	var out bytes.Buffer
	if err := h.main(context.Background(), []string{"install", "--enable"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.home, "Library", "LaunchAgents", "dev.durable-pi.subagents.plist")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Well-formed XML whose program is the service.
	dec := xml.NewDecoder(bytes.NewReader(b))
	var strs []string
	inString := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the plist is no XML: %v\n%s", err, b)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			inString = v.Name.Local == "string"
		case xml.CharData:
			if inString {
				strs = append(strs, string(v))
			}
		case xml.EndElement:
			inString = false
		}
	}
	joined := strings.Join(strs, "|")
	for _, want := range []string{"dev.durable-pi.subagents", h.exe + "|dev|--data-dir|" + filepath.Join(h.home, ".pi", "subagents") + "|--ip|127.0.0.1|--port|7233", "/opt/node 22/bin:/usr/bin"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the plist lacks %q: %s", want, joined)
		}
	}
	if strings.Contains(string(b), "secret") {
		t.Errorf("the plist holds a secret")
	}
	if got := strings.Join(*ran, "; "); got != "launchctl bootstrap gui/501 "+path {
		t.Errorf("ran %q", got)
	}
}

func TestServiceUsage(t *testing.T) {
	h, _ := testServiceHost(t, "linux", nil)
	for _, args := range [][]string{{}, {"start"}, {"install", "extra"}, {"--port", "1"}} {
		if err := h.main(context.Background(), args, io.Discard, io.Discard); !errcode.Is(err, errcode.InvalidInput) {
			t.Errorf("service %v: %v, want INVALID_INPUT", args, err)
		}
	}
	h.goos = "plan9"
	if err := h.main(context.Background(), []string{"install"}, io.Discard, io.Discard); !errcode.Is(err, errcode.InvalidInput) {
		t.Errorf("install on plan9: %v", err)
	}
}

// TestServiceInstallRefusesControlCharacters (issue 39): a value the unit
// file holds with a line break in it would write a line of its own there
// (an ExecStartPre= that runs at every login); install refuses it, says
// which value, and writes no file.
func TestServiceInstallRefusesControlCharacters(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		where string
	}{
		{"data dir", []string{"--data-dir", "/x\nExecStartPre=/bin/touch /tmp/owned"}, nil, "--data-dir"},
		{"namespace", []string{"--namespace", "default\nExecStartPre=/bin/touch /tmp/owned"}, nil, "--namespace"},
		{"ip", []string{"--ip", "127.0.0.1\r"}, nil, "--ip"},
		{"a tab is a control character too", []string{"--namespace", "a\tb"}, nil, "--namespace"},
		{"the shell's PATH", nil, map[string]string{"PATH": "/usr/bin\nExecStartPre=/bin/sh"}, "$PATH"},
		{"a setting of the shell's", nil, map[string]string{"SUBAGENTS_TRUSTED_PROJECTS": "/src\n[Install]"}, "$SUBAGENTS_TRUSTED_PROJECTS"},
	}
	for _, goos := range []string{"linux", "darwin"} {
		for _, tt := range tests {
			t.Run(goos+"/"+tt.name, func(t *testing.T) {
				h, _ := testServiceHost(t, goos, nil)
				if tt.env != nil {
					getenv := h.getenv
					h.getenv = func(k string) string {
						if v, ok := tt.env[k]; ok {
							return v
						}
						return getenv(k)
					}
					environ := h.environ
					h.environ = func() []string {
						out := environ()
						for k, v := range tt.env {
							out = append(out, k+"="+v)
						}
						return out
					}
				}
				var out bytes.Buffer
				err := h.main(context.Background(), append([]string{"install"}, tt.args...), &out, io.Discard)
				if errcode.CodeOf(err) != errcode.InvalidInput || !strings.Contains(err.Error(), tt.where) || !strings.Contains(err.Error(), "control character") {
					t.Fatalf("install: %v (%s), want %s refused as INVALID_INPUT", err, errcode.CodeOf(err), tt.where)
				}
				path, perr := h.unitPath()
				if perr != nil {
					t.Fatal(perr)
				}
				if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
					t.Fatalf("a service file was written: %v", serr)
				}
			})
		}
	}
}

// TestServiceInstallTightensDataDir (issue 39): a data dir that already
// exists open to other users (0755) is made its owner's alone, and install
// says so; one that is already 0700 is left without a word.
func TestServiceInstallTightensDataDir(t *testing.T) {
	h, _ := testServiceHost(t, "linux", nil)
	dir := filepath.Join(h.home, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := h.main(context.Background(), []string{"install", "--data-dir", dir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("the data dir is %04o after install, want 0700", fi.Mode().Perm())
	}
	if !strings.Contains(out.String(), "made "+dir+" its owner's alone (0700, was 0755)") {
		t.Errorf("install does not say it tightened the data dir:\n%s", out.String())
	}
	out.Reset()
	if err := h.main(context.Background(), []string{"install", "--data-dir", dir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "its owner's alone") {
		t.Errorf("a second install speaks of a data dir already 0700:\n%s", out.String())
	}
}

// TestSecureDataDir: the data dir is made 0700 when missing, tightened
// (with a note) when open, and refused with PERMISSION_DENIED when another
// account owns it, by install as by dev: install only warned and carried on.
func TestSecureDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test plays a second local user by chown: run it as root, as CI does")
	}
	tests := []struct {
		name  string
		mode  os.FileMode // 0: missing
		owner int         // -1: the test's own user
		note  string
		code  errcode.Code
	}{
		{name: "missing: made 0700, no word", owner: -1},
		{name: "already 0700: no word", mode: 0o700, owner: -1},
		{name: "open: tightened, said", mode: 0o755, owner: -1, note: "(0700, was 0755)"},
		{name: "another account's, even 0700", mode: 0o700, owner: 65534, code: errcode.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if tt.mode != 0 {
				if err := os.Mkdir(dir, tt.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, tt.mode); err != nil {
					t.Fatal(err)
				}
			}
			if tt.owner >= 0 {
				if err := os.Chown(dir, tt.owner, tt.owner); err != nil {
					t.Fatal(err)
				}
			}
			note, err := SecureDataDir(dir)
			if tt.code != "" {
				if !errcode.Is(err, tt.code) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("SecureDataDir = %q, %v; want %s naming %s", note, err, tt.code, dir)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 || (tt.note == "") != (note == "") || !strings.Contains(note, tt.note) {
				t.Fatalf("data dir %04o, note %q, want 0700 and %q", fi.Mode().Perm(), note, tt.note)
			}
		})
	}
	// install refuses it too, and writes no service file.
	h, _ := testServiceHost(t, "linux", nil)
	dir := filepath.Join(h.home, "theirs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := h.main(context.Background(), []string{"install", "--data-dir", dir}, &out, io.Discard); !errcode.Is(err, errcode.PermissionDenied) {
		t.Fatalf("install with another account's data dir: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "wrote ") {
		t.Fatalf("install wrote a service file:\n%s", out.String())
	}
}
