package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// `subagents service install|uninstall|status` (docs/schedules.md): the
// local service (`subagents dev`) started at login by the user's service
// manager, so that schedules fire with no pi open: a systemd user unit on
// Linux, a launchd agent on macOS. install writes the file and says how to
// turn it on (--enable does it); uninstall turns it off and removes it;
// status says what is installed and whether the service answers.

// serviceName names the systemd unit; serviceLabel the launchd agent.
const (
	serviceName  = "subagents.service"
	serviceLabel = "dev.durable-pi.subagents"
)

// serviceCommandTimeout bounds one systemctl or launchctl call: they
// answer in milliseconds, or hang on a bus that is not there.
const serviceCommandTimeout = 10 * time.Second

// serviceOptions are the flags of `service ACTION`.
type serviceOptions struct {
	dataDir, ip, namespace string
	port                   int
	enable                 bool
}

func (o *serviceOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.dataDir, "data-dir", "", "the service's data `DIR` (default $SUBAGENTS_DATA_DIR or ~/.pi/subagents)")
	fs.StringVar(&o.ip, "ip", "127.0.0.1", "install: the `IP` the service's Temporal frontend listens on")
	fs.IntVar(&o.port, "port", 7233, "install: the `PORT` of its Temporal frontend (the extension's default address is 127.0.0.1:7233)")
	fs.StringVar(&o.namespace, "namespace", "", "install: the Temporal `NAMESPACE` (default: default)")
	fs.BoolVar(&o.enable, "enable", false, "install: also turn it on now and at every login (systemctl --user enable --now; launchctl bootstrap); uninstall always turns it off")
}

// serviceHost is the machine the service is installed on: what the
// commands read and run, so that tests can give their own.
type serviceHost struct {
	goos   string
	home   string
	getenv func(string) string
	// environ lists the environment (for its SUBAGENTS_* settings).
	environ func() []string
	// exe is the subagents binary the service runs.
	exe string
	// run runs a service manager's command, bounded.
	run func(ctx context.Context, name string, args ...string) (string, error)
	// uid is the user's ID (launchd's gui/UID domain).
	uid int
}

func defaultServiceHost() (serviceHost, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return serviceHost{}, errcode.Wrap(errcode.InvalidInput, err, "no home folder: "+err.Error())
	}
	exe, err := os.Executable()
	if err != nil {
		return serviceHost{}, errcode.Wrap(errcode.InvalidInput, err, "where is this subagents binary: "+err.Error())
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return serviceHost{goos: runtime.GOOS, home: home, getenv: os.Getenv, environ: os.Environ, exe: exe, run: runBounded, uid: os.Getuid()}, nil
}

func runBounded(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, serviceCommandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func serviceMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	h, err := defaultServiceHost()
	if err != nil {
		return err
	}
	return h.main(ctx, args, stdout, stderr)
}

func (h serviceHost) main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o serviceOptions
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		// Flags first: -h for the usage, anything else lacks its action.
		if _, err := ParseFlags("service", args, stderr, o.register); err != nil {
			return err
		}
		return errcode.New(errcode.InvalidInput, "subagents service install|uninstall|status [flags]")
	}
	action := args[0]
	fs, err := ParseFlags("service", args[1:], stderr, o.register)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errcode.Errorf(errcode.InvalidInput, "subagents service %s takes no arguments, got %q", action, fs.Args())
	}
	dir := o.dataDir
	if dir == "" {
		if dir = h.getenv("SUBAGENTS_DATA_DIR"); dir == "" {
			dir = filepath.Join(h.home, ".pi", "subagents")
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "--data-dir: "+err.Error())
	}
	o.dataDir = dir
	switch action {
	case "install":
		return h.install(ctx, o, stdout)
	case "uninstall":
		return h.uninstall(ctx, stdout)
	case "status":
		return h.status(ctx, o, stdout)
	}
	return errcode.Errorf(errcode.InvalidInput, "subagents service %s: the actions are install, uninstall and status", action)
}

// unitPath is where the service's file goes.
func (h serviceHost) unitPath() (string, error) {
	switch h.goos {
	case "linux":
		base := h.getenv("XDG_CONFIG_HOME")
		if base == "" {
			base = filepath.Join(h.home, ".config")
		}
		return filepath.Join(base, "systemd", "user", serviceName), nil
	case "darwin":
		return filepath.Join(h.home, "Library", "LaunchAgents", serviceLabel+".plist"), nil
	}
	return "", errcode.Errorf(errcode.InvalidInput, "subagents service knows systemd (Linux) and launchd (macOS), not %s: start `subagents dev` at login the way your system does", h.goos)
}

// envFile is where the user puts what the service needs and a login
// shell has (a provider's API key): the unit reads it if it is there.
func (h serviceHost) envFile() string {
	base := h.getenv("XDG_CONFIG_HOME")
	if base == "" {
		base = filepath.Join(h.home, ".config")
	}
	return filepath.Join(base, "subagents", "service.env")
}

// refuseControl refuses a value the service file would hold with a
// control character in it: a line break in a unit file starts a line of
// its own (--data-dir $'/x\nExecStartPre=...' would run a command of its
// own at every login), and neither quoting nor XML escapes it.
func (h serviceHost) refuseControl(o serviceOptions) error {
	values := [][2]string{{"--data-dir", o.dataDir}, {"--ip", o.ip}, {"--namespace", o.namespace},
		{"the subagents binary's path", h.exe}, {"the env file's path", h.envFile()}}
	for _, kv := range h.serviceEnv(o)[1:] {
		values = append(values, [2]string{"$" + kv[0], kv[1]})
	}
	for _, v := range values {
		if i := strings.IndexFunc(v[1], unicode.IsControl); i >= 0 {
			r, _ := utf8.DecodeRuneInString(v[1][i:])
			return errcode.Errorf(errcode.InvalidInput, "%s holds a control character (%U): the service file would read it as more than a value", v[0], r)
		}
	}
	return nil
}

// SecureDataDir makes the data dir (if missing) and keeps it its owner's
// alone: it holds the service's socket, database and keys, and MkdirAll
// leaves an existing folder's mode as it is. A folder another account
// owns is refused with PERMISSION_DENIED: they could read the keys or
// swap the socket whatever mode it has now. note says what it changed,
// "" when nothing.
func SecureDataDir(dir string) (note string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("data dir %s: %v", dir, err))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("data dir %s: %v", dir, err))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != uint32(os.Geteuid()) {
		return "", errcode.Errorf(errcode.PermissionDenied,
			"Permission denied: data dir %s is owned by uid %d, not by uid %d, who runs subagents: it would hold this service's socket, database and keys. Use a data dir of your own (--data-dir), or `chown` it if it is yours",
			dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return "", nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", errcode.Wrap(errcode.PermissionDenied, err, fmt.Sprintf("Permission denied: data dir %s is %04o, open to other users, and cannot be made its owner's alone: %v", dir, fi.Mode().Perm(), err))
	}
	return fmt.Sprintf("made %s its owner's alone (%04o, was %04o): it holds the service's socket and database", dir, 0o700, fi.Mode().Perm()), nil
}

// serviceArgs is the command the service manager runs.
func (h serviceHost) serviceArgs(o serviceOptions) []string {
	args := []string{h.exe, "dev", "--data-dir", o.dataDir, "--ip", o.ip, "--port", strconv.Itoa(o.port)}
	if o.namespace != "" {
		args = append(args, "--namespace", o.namespace)
	}
	return args
}

// serviceEnv is the environment the service gets from this shell: PATH
// (pi and its Node are found on it), pi's config dir, and the subagents
// settings, but no variable that looks like a secret: those go into the
// env file (systemd) by the user's hand, not into a file of the
// service manager's.
func (h serviceHost) serviceEnv(o serviceOptions) [][2]string {
	env := [][2]string{{"SUBAGENTS_DATA_DIR", o.dataDir}}
	for _, k := range []string{"PATH", "PI_CODING_AGENT_DIR"} {
		if v := h.getenv(k); v != "" {
			env = append(env, [2]string{k, v})
		}
	}
	for _, kv := range h.environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "SUBAGENTS_") || k == "SUBAGENTS_DATA_DIR" || secretName(k) {
			continue
		}
		if v := h.getenv(k); v != "" {
			env = append(env, [2]string{k, v})
		}
	}
	slices.SortFunc(env[1:], func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return env
}

// secretName reports a variable whose name says it holds a secret.
func secretName(k string) bool {
	for _, s := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// systemdUnit is the user unit that runs the service.
func (h serviceHost) systemdUnit(o serviceOptions) string {
	var b strings.Builder
	b.WriteString("# Written by `subagents service install`: the subagents service (Temporal, its UI\n")
	b.WriteString("# and a worker) runs while you are logged in, so that schedules fire with no pi open.\n")
	b.WriteString("[Unit]\nDescription=subagents: durable subagents for pi (subagents dev)\nAfter=network.target\n\n[Service]\nType=simple\n")
	// A service pi started before this one holds the data dir: stop it
	// first (its children continue under this one); none running is fine.
	fmt.Fprintf(&b, "ExecStartPre=-%s\n", systemdLine([]string{h.exe, "stop", "--data-dir", o.dataDir}))
	fmt.Fprintf(&b, "ExecStart=%s\n", systemdLine(h.serviceArgs(o)))
	// Paths are whole lines in a unit file: no quotes, only % doubled.
	fmt.Fprintf(&b, "WorkingDirectory=%s\n", systemdPath(o.dataDir))
	// An assignment is a word as a command line's are, but systemd
	// substitutes no variables in it: its $ stays single.
	for _, kv := range h.serviceEnv(o) {
		fmt.Fprintf(&b, "Environment=%s\n", systemdQuote(kv[0]+"="+kv[1]))
	}
	fmt.Fprintf(&b, "# Put what the service needs beyond these (a provider's API key) here, KEY=value per line:\nEnvironmentFile=-%s\n", systemdPath(h.envFile()))
	// SIGTERM to the service alone: it stops its children itself, and they
	// continue at its next start; whatever is left after the timeout is killed.
	b.WriteString("KillMode=mixed\n")
	// 30 s: the service stops its pi children (SIGTERM, SIGKILL after the
	// activities' 5 s kill grace) and then its Temporal within seconds;
	// the rest covers a loaded machine before systemd kills what is left.
	b.WriteString("TimeoutStopSec=30\n")
	// 10 s between restarts: a service that fails at once (its port taken,
	// its database held by a service pi started) is not restarted in a
	// tight loop, and one that crashed is back soon enough that the fires
	// it missed are within a catch-up window of a minute or more
	// (docs/schedules.md).
	b.WriteString("Restart=on-failure\nRestartSec=10\n")
	b.WriteString("\n[Install]\nWantedBy=default.target\n")
	return b.String()
}

// systemdLine is a command line as a unit file reads it: each word quoted
// where it must be, and $ doubled, since systemd substitutes variables
// ($NAME, ${NAME}) in a command line.
func systemdLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = systemdQuote(strings.ReplaceAll(a, "$", "$$"))
	}
	return strings.Join(q, " ")
}

// systemdQuote quotes a word of a unit file where it must be: spaces,
// quotes and backslashes in double quotes, % doubled (systemd's
// specifiers, expanded in command lines and assignments alike).
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// systemdPath is a path as a unit file's path settings read it.
func systemdPath(p string) string { return strings.ReplaceAll(p, "%", "%%") }

// launchdPlist is the launch agent that runs the service.
func (h serviceHost) launchdPlist(o serviceOptions) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by subagents service install: the subagents service runs while you are logged in, so that schedules fire with no pi open. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + serviceLabel + `</string>
	<key>ProgramArguments</key>
	<array>
`)
	for _, a := range h.serviceArgs(o) {
		fmt.Fprintf(&b, "\t\t<string>%s</string>\n", xmlText(a))
	}
	b.WriteString("\t</array>\n\t<key>EnvironmentVariables</key>\n\t<dict>\n")
	for _, kv := range h.serviceEnv(o) {
		fmt.Fprintf(&b, "\t\t<key>%s</key>\n\t\t<string>%s</string>\n", xmlText(kv[0]), xmlText(kv[1]))
	}
	log := xmlText(filepath.Join(o.dataDir, "service.log"))
	fmt.Fprintf(&b, "\t</dict>\n\t<key>WorkingDirectory</key>\n\t<string>%s</string>\n", xmlText(o.dataDir))
	b.WriteString("\t<key>RunAtLoad</key>\n\t<true/>\n\t<key>KeepAlive</key>\n\t<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>\n\t</dict>\n")
	fmt.Fprintf(&b, "\t<key>StandardOutPath</key>\n\t<string>%s</string>\n\t<key>StandardErrorPath</key>\n\t<string>%s</string>\n", log, log)
	b.WriteString("</dict>\n</plist>\n")
	return b.String()
}

func xmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

func (h serviceHost) install(ctx context.Context, o serviceOptions, out io.Writer) error {
	path, err := h.unitPath()
	if err != nil {
		return err
	}
	if err := h.refuseControl(o); err != nil {
		return err
	}
	text := h.systemdUnit(o)
	if h.goos == "darwin" {
		text = h.launchdPlist(o)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	note, err := SecureDataDir(o.dataDir)
	if err != nil {
		return err
	}
	if note != "" {
		_, _ = fmt.Fprintln(out, note)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	_, _ = fmt.Fprintf(out, "wrote %s: it runs %s\n", path, strings.Join(h.serviceArgs(o), " "))
	steps := h.enableSteps(path)
	if !o.enable {
		_, _ = fmt.Fprintln(out, "turn it on now and at every login with:")
		for _, s := range steps {
			_, _ = fmt.Fprintf(out, "  %s\n", strings.Join(s, " "))
		}
	} else {
		for _, s := range steps {
			if said, err := h.run(ctx, s[0], s[1:]...); err != nil {
				return errcode.Errorf(errcode.ServiceUnavailable, "%s: %v %s (the file is written: turn it on by hand once the service manager answers)", strings.Join(s, " "), err, said)
			}
		}
		_, _ = fmt.Fprintln(out, "turned on: it runs now and at every login")
	}
	if h.goos == "linux" {
		_, _ = fmt.Fprintf(out, "a provider's API key the service needs (unless pi's /login keeps it) goes into %s (KEY=value per line)\n", h.envFile())
		_, _ = fmt.Fprintln(out, "to keep it running after you log out: loginctl enable-linger")
	}
	return nil
}

// enableSteps are the service manager's commands that turn the service on.
func (h serviceHost) enableSteps(path string) [][]string {
	if h.goos == "darwin" {
		return [][]string{{"launchctl", "bootstrap", "gui/" + strconv.Itoa(h.uid), path}}
	}
	return [][]string{{"systemctl", "--user", "daemon-reload"}, {"systemctl", "--user", "enable", "--now", serviceName}}
}

func (h serviceHost) uninstall(ctx context.Context, out io.Writer) error {
	path, err := h.unitPath()
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		_, _ = fmt.Fprintf(out, "not installed (%s does not exist)\n", path)
		return nil
	}
	// Off first, best effort: a manager that does not answer (no session
	// bus) has nothing running of it either.
	off := [][]string{{"systemctl", "--user", "disable", "--now", serviceName}}
	if h.goos == "darwin" {
		off = [][]string{{"launchctl", "bootout", "gui/" + strconv.Itoa(h.uid) + "/" + serviceLabel}}
	}
	for _, s := range off {
		if said, err := h.run(ctx, s[0], s[1:]...); err != nil {
			_, _ = fmt.Fprintf(out, "%s: %v %s\n", strings.Join(s, " "), err, said)
		}
	}
	if err := os.Remove(path); err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, err.Error())
	}
	if h.goos == "linux" {
		_, _ = h.run(ctx, "systemctl", "--user", "daemon-reload")
	}
	_, _ = fmt.Fprintf(out, "removed %s: the service no longer starts at login (a running one stops with `subagents stop`)\n", path)
	return nil
}

func (h serviceHost) status(ctx context.Context, o serviceOptions, out io.Writer) error {
	path, err := h.unitPath()
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(path); err != nil {
		_, _ = fmt.Fprintf(out, "installed: no (%s does not exist; `subagents service install` writes it)\n", path)
	} else {
		runs := ""
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
				runs = ": runs " + strings.TrimSpace(v)
			}
		}
		_, _ = fmt.Fprintf(out, "installed: %s%s\n", path, runs)
		checks := [][]string{{"systemctl", "--user", "is-enabled", serviceName}, {"systemctl", "--user", "is-active", serviceName}}
		if h.goos == "darwin" {
			checks = [][]string{{"launchctl", "print", "gui/" + strconv.Itoa(h.uid) + "/" + serviceLabel}}
		}
		for _, c := range checks {
			said, err := h.run(ctx, c[0], c[1:]...)
			if h.goos == "darwin" && err == nil {
				said = "loaded"
			}
			first, _, _ := strings.Cut(said, "\n")
			_, _ = fmt.Fprintf(out, "%s: %s\n", strings.Join(c, " "), cmp.Or(first, fmt.Sprint(err)))
		}
	}
	answer := "not running"
	if conn, err := net.DialTimeout("unix", connection.SocketPath(o.dataDir), localProbeTimeout); err == nil {
		_ = conn.Close()
		answer = "running (its socket answers)"
	}
	_, _ = fmt.Fprintf(out, "service for %s: %s\n", o.dataDir, answer)
	return nil
}
