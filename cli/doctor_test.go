package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/doctor"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/worker"
)

// TestServiceLockState: what the doctor reads of a data dir's lock: no
// file, a stopped service's note, a running holder it names, and the pid
// of a killed service that nobody holds the lock for.
func TestServiceLockState(t *testing.T) {
	dev := []string{"/opt/bin/subagents-dev", "dev"}
	tests := []struct {
		name      string
		setup     func(t *testing.T, dir string) int // the pid the file should name
		exists    bool
		held      bool
		pidAlive  bool
		wantNamed bool
	}{
		{name: "no file"},
		{name: "a stopped service's note", setup: func(t *testing.T, dir string) int {
			writeFile(t, ServiceLockPath(dir), StoppedNote(12345, time.Now()))
			return 0
		}, exists: true},
		{name: "a running service", setup: func(t *testing.T, dir string) int {
			return holdLock(t, dir, dev, true).Process.Pid
		}, exists: true, held: true, pidAlive: true, wantNamed: true},
		{name: "a killed service's pid", setup: func(t *testing.T, dir string) int {
			cmd := exec.Command("true")
			if err := cmd.Run(); err != nil {
				t.Fatal(err)
			}
			writeFile(t, ServiceLockPath(dir), strconv.Itoa(cmd.Process.Pid)+"\n")
			return cmd.Process.Pid
		}, exists: true, wantNamed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			pid := 0
			if tt.setup != nil {
				pid = tt.setup(t, dir)
			}
			l := serviceLockState(dir)
			if l.Path != ServiceLockPath(dir) || l.Exists != tt.exists || l.Held != tt.held || l.PidAlive != tt.pidAlive || l.Err != nil {
				t.Fatalf("%+v", l)
			}
			if tt.wantNamed && l.Pid != pid || !tt.wantNamed && l.Pid != 0 {
				t.Fatalf("pid %d, want %d", l.Pid, pid)
			}
		})
	}
}

func TestByteSizeString(t *testing.T) {
	for n, want := range map[uint64]string{512 << 20: "512MiB", 1 << 30: "1GiB", 3 << 29: "1536MiB", 1000 << 50: "1000PiB", 1000: "1000", 0: "0"} {
		b := byteSize(n)
		if got := b.String(); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]uint64{"512": 512, "512MiB": 512 << 20, "2GiB": 2 << 30, "1.5g": 3 << 29, "1 TB": 1 << 40, "3PiB": 3 << 50} {
		var b byteSize
		if err := b.Set(in); err != nil || uint64(b) != want {
			t.Errorf("%q: %d %v, want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "lots", "5 parsecs", "-1GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("%q was taken as %d", in, b)
		}
	}
}

// TestDoctorConfig: the doctor looks where pi sends delegations: a flag
// over the extension's settings in pi's config dir, those over the
// variables.
func TestDoctorConfig(t *testing.T) {
	agent := t.TempDir()
	writeFile(t, filepath.Join(agent, "subagents.json"),
		`{"extension": {"address": "127.0.0.1:7300", "namespace": "team", "taskQueue": "theirs", "dataDir": "`+filepath.Join(agent, "data")+`"}}`)
	t.Setenv("PI_CODING_AGENT_DIR", agent)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:7299")
	env := map[string]string{"SUBAGENTS_TASK_QUEUE": "env-queue", "SUBAGENTS_HOST": "box"}
	getenv := func(k string) string { return env[k] }

	var o doctorOptions
	if _, err := ParseFlags("doctor", []string{"--cwd", agent}, &bytes.Buffer{}, o.register); err != nil {
		t.Fatal(err)
	}
	cfg, conn, err := o.config(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Address != "127.0.0.1:7300" || cfg.Namespace != "team" || cfg.TaskQueue != "theirs" || cfg.Host != "box" ||
		cfg.DataDir != filepath.Join(agent, "data") || conn.DataDir != cfg.DataDir || !cfg.Local || cfg.UIURL != "" || cfg.GuessUIURL != "http://127.0.0.1:8300" ||
		cfg.MinFree != doctor.DefaultMinFree || cfg.StaleAfter != doctor.DefaultStaleAfter || cfg.Cwd != agent || cfg.Pi != "" || cfg.Timeout != doctor.DefaultTimeout {
		t.Fatalf("from the extension's settings: %+v", cfg)
	}

	o = doctorOptions{}
	if _, err := ParseFlags("doctor", []string{"--cwd", agent, "--address", "10.1.2.3:7233", "--namespace", "mine", "--task-queue", "q",
		"--data-dir", "/srv/d", "--host", "other", "--min-free", "1GiB", "--stale-after", "48h", "--pi", "/opt/pi", "--timeout", "12"}, &bytes.Buffer{}, o.register); err != nil {
		t.Fatal(err)
	}
	if cfg, _, err = o.config(getenv); err != nil {
		t.Fatal(err)
	}
	if cfg.Address != "10.1.2.3:7233" || cfg.Namespace != "mine" || cfg.TaskQueue != "q" || cfg.DataDir != "/srv/d" || cfg.Host != "other" ||
		cfg.Local || cfg.UIURL != "" || cfg.GuessUIURL != "" || cfg.MinFree != 1<<30 || cfg.StaleAfter != 48*time.Hour || cfg.Pi != "/opt/pi" || cfg.Timeout != 12*time.Second {
		t.Fatalf("from the flags: %+v", cfg)
	}

	if _, _, err := (&doctorOptions{cwd: filepath.Join(agent, "none")}).config(getenv); !errcode.Is(err, errcode.InvalidInput) {
		t.Fatalf("a --cwd that does not exist: %v", err)
	}
}

// TestDoctorServiceDown: with nothing running, the doctor says so with the
// fix, skips what needs the service, exits 3 (unavailable) and starts
// nothing: the data dir is not even made.
func TestDoctorServiceDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := ln.Addr().String()
	_ = ln.Close()
	home, data := doctorHome(t, address)
	var out, errOut bytes.Buffer
	err = doctorMain(context.Background(), []string{"--json", "--cwd", home}, &out, &errOut)
	if errcode.ExitCode(err) != errcode.ExitUnavailable || !strings.Contains(err.Error(), "1 check failed (service)") {
		t.Fatalf("err %v (exit %d)\n%s", err, errcode.ExitCode(err), out.String())
	}
	var r doctor.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := map[string]doctor.Result{}
	for _, c := range r.Checks {
		got[c.Name] = c
	}
	if c := got[doctor.CheckService]; c.Status != doctor.Fail || !strings.Contains(c.Verdict, "no subagents service runs for data dir "+data) || !strings.Contains(c.Fix, "subagents dev") {
		t.Fatalf("service: %+v", c)
	}
	for _, name := range []string{doctor.CheckSocket, doctor.CheckNamespace, doctor.CheckWorkers, doctor.CheckUI, doctor.CheckUnacknowledged} {
		if got[name].Status != doctor.Skip {
			t.Errorf("%s: %+v, want a skip", name, got[name])
		}
	}
	for _, name := range []string{doctor.CheckPi, doctor.CheckNode, doctor.CheckProfiles, doctor.CheckSettings, doctor.CheckModelKeys, doctor.CheckDisk} {
		if got[name].Status != doctor.OK {
			t.Errorf("%s: %+v, want ok", name, got[name])
		}
	}
	if r.ExitCode != errcode.ExitUnavailable || r.Context.Address != address || !r.Context.Local {
		t.Fatalf("report: exit %d context %+v", r.ExitCode, r.Context)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the doctor made the data dir: %v", err)
	}

	out.Reset()
	err = doctorMain(context.Background(), []string{"--cwd", home}, &out, &errOut)
	if errcode.ExitCode(err) != errcode.ExitUnavailable || !strings.Contains(out.String(), "FAIL  service") || !strings.Contains(out.String(), "fix: start it") {
		t.Fatalf("text: %v\n%s", err, out.String())
	}
}

// doctorHome is a HOME for a doctor run against address with nothing
// wrong on this side: pi and Node that answer, a model with its key, a
// data dir not made yet; the variables point there.
func doctorHome(t *testing.T, address string) (home, data string) {
	t.Helper()
	home = t.TempDir()
	bin := filepath.Join(home, "bin")
	agent := filepath.Join(home, "agent")
	for _, d := range []string{bin, agent} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(bin, "pi"), "#!/bin/sh\necho "+doctor.PinnedPi+"\n")
	writeFile(t, filepath.Join(bin, "node"), "#!/bin/sh\necho v22.23.3\n")
	for _, f := range []string{"pi", "node"} {
		if err := os.Chmod(filepath.Join(bin, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(agent, "models.json"), `{"providers": {"scripted": {"apiKey": "k"}}}`)
	writeFile(t, filepath.Join(agent, "settings.json"), `{"defaultProvider": "scripted"}`)
	data = filepath.Join(home, "data")
	for k, v := range map[string]string{"HOME": home, "PI_CODING_AGENT_DIR": agent, "SUBAGENTS_PI": filepath.Join(bin, "pi"), "SUBAGENTS_DATA_DIR": data,
		"TEMPORAL_ADDRESS": address, "SUBAGENTS_TASK_QUEUE": "", "SUBAGENTS_HOST": "", "SUBAGENTS_UI_URL": "", "TEMPORAL_NAMESPACE": ""} {
		t.Setenv(k, v)
	}
	return home, data
}

// TestDoctorHungFrontend (issue 42): at the address, something takes
// connections and never answers, as a hung Temporal does. The service
// check asks it, within its bound, as Temporal is asked (a gRPC health
// check), and fails saying so, instead of taking a connect for a Temporal;
// what needs Temporal is skipped, naming the service; the doctor exits 3
// (unavailable), soon.
func TestDoctorHungFrontend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for {
			select {
			case c := <-held:
				_ = c.Close()
			default:
				return
			}
		}
	})
	address := ln.Addr().String()
	home, _ := doctorHome(t, address)
	var out, errOut bytes.Buffer
	start := time.Now()
	err = doctorMain(context.Background(), []string{"--json", "--cwd", home}, &out, &errOut)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the doctor took %s", took)
	}
	var r doctor.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := map[string]doctor.Result{}
	for _, c := range r.Checks {
		got[c.Name] = c
	}
	c := got[doctor.CheckService]
	if c.Status != doctor.Fail || !strings.Contains(c.Verdict, "takes connections at "+address+" but does not answer as Temporal") ||
		!strings.Contains(c.Verdict, "did not answer within 2s") || !strings.Contains(c.Fix, "subagents dev --port") {
		t.Fatalf("service: %+v", c)
	}
	for _, name := range []string{doctor.CheckSocket, doctor.CheckNamespace, doctor.CheckSearchAttributes, doctor.CheckWorkers, doctor.CheckUnacknowledged, doctor.CheckUI} {
		if c := got[name]; c.Status != doctor.Skip || !strings.Contains(c.Verdict, "service") {
			t.Errorf("%s: %+v, want a skip that names the service", name, c)
		}
	}
	if errcode.ExitCode(err) != errcode.ExitUnavailable || r.ExitCode != errcode.ExitUnavailable {
		t.Fatalf("err %v (exit %d), report exit %d", err, errcode.ExitCode(err), r.ExitCode)
	}
}

// TestDoctorUsage: `doctor -h` names each flag's value by its kind, as
// every verb's does, and exits as help.
func TestDoctorUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"doctor", "-h"}, &stdout, &stderr, nil)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if n := checkPlaceholders(t, "doctor", stderr.String()); n < 10 {
		t.Fatalf("%d flags in the usage:\n%s", n, stderr.String())
	}
	// Each default is said once, as a person writes it; the pi the verdict
	// of a missing pi tells to pass is a flag here too.
	usage := stderr.String()
	for _, want := range []string{"(default 512MiB)\n", "(default 24h)\n", "(default 30s)\n", "  -pi string\n", "  -timeout value\n"} {
		if !strings.Contains(usage, want) {
			t.Errorf("the usage lacks %q:\n%s", want, usage)
		}
	}
	for line := range strings.Lines(usage) {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("a default said twice: %q", line)
		}
	}
	if err := Run(context.Background(), []string{"doctor", "extra"}, &stdout, &stderr, nil); !errcode.Is(err, errcode.InvalidInput) {
		t.Fatalf("an argument: %v", err)
	}
}

// TestSocketSaysTheUI (issue 42): the `service` answer on the socket says
// where the service serves the Temporal UI, or that it serves none, and
// the doctor reads both: it checks the UI there, whatever --ui-port the
// service was started with.
func TestSocketSaysTheUI(t *testing.T) {
	for _, tt := range []struct {
		name     string
		uiURL    string
		headless bool
	}{
		{"another --ui-port", "http://127.0.0.1:9123", false},
		{"headless", "", true},
		{"a worker's socket, which does not say", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "sock")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			c := &client.Client{Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "q", UIURL: tt.uiURL}
			stop, err := ServeSocket(t.Context(), c, worker.Config{DataDir: dir}, tt.headless)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			info, err := askDoctorService(t.Context(), connection.SocketPath(dir))
			if err != nil {
				t.Fatal(err)
			}
			if info.UIURL != tt.uiURL || info.Headless != tt.headless || info.Address != "127.0.0.1:7233" {
				t.Fatalf("%+v", info)
			}
		})
	}
}
