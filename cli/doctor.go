package cli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/doctor"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// doctorOptions are `subagents doctor`'s flags.
type doctorOptions struct {
	conn       connection.Settings
	asJSON     bool
	cwd        string
	dataDir    string
	taskQueue  string
	host       string
	uiURL      string
	minFree    byteSize
	staleAfter time.Duration
	pi         string
	timeout    time.Duration
}

func (o *doctorOptions) register(fs *flag.FlagSet) {
	o.conn.RegisterFlags(fs)
	o.minFree = doctor.DefaultMinFree
	o.staleAfter = doctor.DefaultStaleAfter
	fs.BoolVar(&o.asJSON, "json", false, "print the checks as one JSON document instead of text")
	fs.StringVar(&o.cwd, "cwd", "", "the folder whose profiles, plans, settings and routing are checked (default: the current one)")
	fs.StringVar(&o.dataDir, "data-dir", "", "the local service's data dir (default: the extension's \"dataDir\", $SUBAGENTS_DATA_DIR or ~/.pi/subagents)")
	fs.StringVar(&o.taskQueue, "task-queue", "", "the task queue delegations start on (default: the extension's \"taskQueue\", $SUBAGENTS_TASK_QUEUE or "+api.DefaultTaskQueue+")")
	fs.StringVar(&o.host, "host", "", "the host this folder's tasks are pinned to (\"auto\": this machine; default $SUBAGENTS_HOST, else any worker)")
	fs.StringVar(&o.uiURL, "ui-url", "", "the Temporal UI's address (env SUBAGENTS_UI_URL; default for the local service: where it says it serves it, else the frontend's port + 1000)")
	o.timeout = doctor.DefaultTimeout
	// Each default is said once, by the flag package, from the value's
	// own text.
	fs.Var(&o.minFree, "min-free", "the least free space the data dir's filesystem may have, e.g. 512MiB or 2GiB; a warning below 4 times it")
	fs.Var(shortDuration{&o.staleAfter}, "stale-after", "how old a session branch or a delegation waiting for its parent must be to be reported: seconds or a duration like 48h")
	fs.StringVar(&o.pi, "pi", "", "the pi to judge (default: the running local service's, else the one a service started now would find: $SUBAGENTS_PI, the source tree, PATH)")
	fs.Var(shortDuration{&o.timeout}, "timeout", "how long all the checks may take together: seconds or a duration; a check still running then says it did not answer")
}

// shortDuration is a flag of seconds or a duration, said as a person would
// ("24h", not "24h0m0s").
type shortDuration struct{ d *time.Duration }

func (s shortDuration) String() string {
	if s.d == nil || *s.d == 0 {
		return ""
	}
	t := s.d.String()
	for _, zero := range []string{"0s", "0m"} {
		if strings.HasSuffix(t, "m"+zero) || strings.HasSuffix(t, "h"+zero) {
			t = strings.TrimSuffix(t, zero)
		}
	}
	return t
}

func (s shortDuration) Set(v string) error { return seconds(s).Set(v) }

// doctorMain is `subagents doctor` (docs/doctor.md): it checks what
// delegations from a folder need, says of each thing whether it holds and
// how to fix it, and exits non-zero when something fails. It never starts
// the service: it must tell what is wrong while nothing runs.
func doctorMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o doctorOptions
	fs, err := ParseFlags("doctor", args, stderr, o.register)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errcode.Errorf(errcode.InvalidInput, "subagents doctor takes no arguments, got %q", fs.Args())
	}
	cfg, conn, err := o.config(os.Getenv)
	if err != nil {
		return err
	}
	deps := doctor.DefaultDeps(conn)
	deps.ServiceLock = serviceLockState
	deps.AskSocket = askDoctorService
	report := doctor.Run(ctx, cfg, deps)
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else if err := doctor.Print(stdout, report); err != nil {
		return err
	}
	return report.Err()
}

// extensionConnection is what the pi extension's settings in pi's config
// dir say about where delegations go (extension/src/settings.ts): the
// doctor looks where pi would send them.
type extensionConnection struct {
	Address   string `json:"address"`
	Namespace string `json:"namespace"`
	TaskQueue string `json:"taskQueue"`
	DataDir   string `json:"dataDir"`
}

func readExtensionConnection(agentDir string) extensionConnection {
	var f struct {
		Extension extensionConnection `json:"extension"`
	}
	if b, err := os.ReadFile(filepath.Join(agentDir, profiles.ConfigFile)); err == nil {
		_ = json.Unmarshal(b, &f)
	}
	return f.Extension
}

// config resolves what the doctor looks at as the command and the pi
// extension resolve it: the flags, then the extension's settings in pi's
// config dir, then the variables and temporal.toml, then the defaults.
func (o *doctorOptions) config(getenv func(string) string) (doctor.Config, connection.Settings, error) {
	agentDir := profiles.DefaultAgentDir()
	ext := readExtensionConnection(agentDir)
	conn := o.conn
	conn.Address = cmp.Or(conn.Address, ext.Address)
	conn.Namespace = cmp.Or(conn.Namespace, ext.Namespace)
	dataDir := cmp.Or(o.dataDir, ext.DataDir, getenv("SUBAGENTS_DATA_DIR"))
	if dataDir == "" {
		d, err := connection.DefaultDataDir()
		if err != nil {
			return doctor.Config{}, conn, err
		}
		dataDir = d
	}
	dataDir = absPath(dataDir)
	conn.DataDir = dataDir
	opts, err := conn.ClientOptions()
	if err != nil {
		return doctor.Config{}, conn, err
	}
	cwd := o.cwd
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return doctor.Config{}, conn, errcode.Wrap(errcode.InvalidInput, err, err.Error())
		}
	}
	cwd = absPath(cwd)
	if info, err := os.Stat(cwd); err != nil || !info.IsDir() {
		return doctor.Config{}, conn, errcode.Errorf(errcode.InvalidInput, "--cwd %s is not a folder", cwd)
	}
	host := cmp.Or(o.host, getenv("SUBAGENTS_HOST"))
	if host == "auto" {
		if host, err = os.Hostname(); err != nil {
			return doctor.Config{}, conn, errcode.Wrap(errcode.InvalidInput, err, "--host auto: "+err.Error())
		}
	}
	local := opts.ConnectionOptions.TLS == nil && opts.Credentials == nil && connection.IsLoopback(opts.HostPort)
	// A local service is asked where it serves its UI (doctor.Run); the
	// frontend's port + 1000 is only what to ask when it does not say.
	ui, guess := cmp.Or(o.uiURL, getenv("SUBAGENTS_UI_URL")), ""
	if ui == "" && local {
		guess = defaultUIURL(opts.HostPort)
	}
	return doctor.Config{
		Cwd: cwd, DataDir: dataDir, AgentDir: agentDir, PromptDirs: profiles.DefaultPromptDirs(),
		Address: opts.HostPort, Namespace: cmp.Or(opts.Namespace, "default"), Local: local,
		TaskQueue: cmp.Or(o.taskQueue, ext.TaskQueue, getenv("SUBAGENTS_TASK_QUEUE"), api.DefaultTaskQueue), Host: host,
		UIURL: ui, GuessUIURL: guess, MinFree: uint64(o.minFree), StaleAfter: o.staleAfter, Getenv: getenv, Now: time.Now(),
		Pi: o.pi, Timeout: o.timeout,
	}, conn, nil
}

// serviceLockState reads the lock of dataDir's service (servicelock.go):
// whether a process holds it, proven from /proc where it can be, and the
// process the file names.
func serviceLockState(dataDir string) doctor.ServiceLock {
	path := ServiceLockPath(dataDir)
	l := doctor.ServiceLock{Path: path}
	text, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l
	}
	if err != nil {
		l.Err = err
		return l
	}
	l.Exists, l.Text, l.Pid = true, strings.TrimSpace(string(text)), lockedPid(text)
	if l.Pid > 0 {
		c := checkHolder(l.Pid, path)
		l.Held = c.holds
		l.PidAlive = c.alive || !c.proc && syscall.Kill(l.Pid, 0) == nil
	}
	if !l.Held {
		// No pid yet (a service starting), or no /proc to prove it by.
		l.Held, l.Err = lockHeld(path)
	}
	return l
}

// askServiceTimeout bounds the connect to the socket and the service's
// answer about itself: both are local and take well under a millisecond,
// and a busy service still answers within a second.
const askServiceTimeout = 2 * time.Second

// askDoctorService asks the service on the socket at path what it serves, as a
// command does before it hands the service its call (local.go).
func askDoctorService(ctx context.Context, path string) (doctor.SocketInfo, error) {
	if err := ownedByMe(path); err != nil {
		return doctor.SocketInfo{}, err
	}
	d := net.Dialer{Timeout: askServiceTimeout}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return doctor.SocketInfo{}, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(askServiceTimeout))
	lc := &localConn{conn: conn, replies: bufio.NewReaderSize(conn, 64<<10)}
	var info ServiceInfo
	if err := lc.ask(ServeRequest{ID: 1, Args: []string{"service"}}, func(line string) { _ = json.Unmarshal([]byte(line), &info) }); err != nil {
		return doctor.SocketInfo{}, fmt.Errorf("no answer: %w", err)
	}
	if info.Address == "" {
		return doctor.SocketInfo{}, fmt.Errorf("the answer says nothing of what it serves (exit %d: %s)", lc.exit, lc.said)
	}
	return doctor.SocketInfo{Address: info.Address, Namespace: info.Namespace, TaskQueue: info.TaskQueue, PID: info.PID, Protocol: info.Protocol,
		UIURL: info.UIURL, Headless: info.Headless}, nil
}

// byteSize is a flag of a size in bytes: a number, with an optional unit
// (B, KiB, MiB, GiB, TiB, PiB; KB, MB, GB, TB, PB as the same binary units).
type byteSize uint64

// String says the size in the largest binary unit that holds it whole
// ("512MiB"), as -h shows the default.
func (b *byteSize) String() string {
	if b == nil || *b == 0 {
		return "0"
	}
	n := uint64(*b)
	for i, unit := range []string{"PiB", "TiB", "GiB", "MiB", "KiB"} {
		if size := uint64(1) << (10 * (5 - i)); n%size == 0 {
			return fmt.Sprintf("%d%s", n/size, unit)
		}
	}
	return fmt.Sprint(n)
}

func (b *byteSize) Set(v string) error {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
		"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40, "p": 1 << 50, "pb": 1 << 50, "pib": 1 << 50}[unit]
	var n float64
	if _, err := fmt.Sscanf(num, "%g", &n); err != nil || mult == 0 || n < 0 {
		return fmt.Errorf("%q is not a size like 512MiB or 2GiB", v)
	}
	*b = byteSize(n * mult)
	return nil
}
