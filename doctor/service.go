package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// startFix is how the local service is started, now and at every login.
const startFix = "start it: `subagents dev` (or `make run` in the source tree); pi starts it at its first delegation, and `subagents service install` starts it at every login"

// restartFix is how a service that runs but answers wrongly is renewed.
const restartFix = "restart the service: `subagents stop`, then `subagents dev` (running children continue after the restart)"

// serviceState is what the service check found, for the checks after it.
type serviceState int

const (
	// serviceRuns: a subagents dev holds the data dir's lock.
	serviceRuns serviceState = iota
	// serviceOther: no subagents dev, but another Temporal answers at the
	// address (`temporal server start-dev` with `subagents worker`).
	serviceOther
	// serviceDown: nothing runs.
	serviceDown
	// serviceHung: no subagents dev, and what takes connections at the
	// address does not answer as Temporal: nothing can be asked there.
	serviceHung
)

// ErrNoListener is Deps.Answers' error when nothing takes connections at
// the address.
var ErrNoListener = errors.New("nothing takes connections there")

// checkService: the local service of the data dir runs (it holds the
// lock), or at least a Temporal answers at the address (answered is what
// Deps.Answers said: nil, it does).
func checkService(lock ServiceLock, answered error, address, dataDir string) (Result, serviceState) {
	switch {
	case lock.Held:
		v := fmt.Sprintf("subagents dev runs for data dir %s", dataDir)
		if lock.Pid > 0 {
			v += fmt.Sprintf(" (pid %d)", lock.Pid)
		}
		return ok(CheckService, v).with("pid", lock.Pid).with("lock", lock.Path), serviceRuns
	case answered == nil:
		return ok(CheckService, fmt.Sprintf("no subagents dev for data dir %s, but a Temporal answers at %s: the commands and pi use it as it is", dataDir, address)), serviceOther
	case !errors.Is(answered, ErrNoListener):
		_, port, _ := net.SplitHostPort(address)
		r := fail(CheckService, fmt.Sprintf("no subagents dev runs for data dir %s, and something takes connections at %s but does not answer as Temporal: %s", dataDir, address, oneLine(answered.Error())),
			fmt.Sprintf("see what holds the port (`ss -ltnp 'sport = :%s'`), and restart it if it is a Temporal, or stop it; or start the local service on a free port (`subagents dev --port N`) and set TEMPORAL_ADDRESS or the extension's \"address\" to it", port))
		r.unavailable = true
		return r, serviceHung
	}
	v := fmt.Sprintf("no subagents service runs for data dir %s, and nothing answers at %s", dataDir, address)
	if lock.Err != nil {
		v += fmt.Sprintf(" (its lock %s: %v)", lock.Path, lock.Err)
	}
	r := fail(CheckService, v, startFix)
	r.unavailable = true
	return r, serviceDown
}

// checkSocket: the running service answers on its socket, for the same
// Temporal, namespace and task queue as this folder's delegations use.
func checkSocket(ctx context.Context, ask func(context.Context, string) (SocketInfo, error), path string, want SocketInfo) Result {
	info, err := ask(ctx, path)
	if err != nil {
		r := fail(CheckSocket, fmt.Sprintf("the service runs but nothing answers on its socket %s: %s", path, oneLine(err.Error())), restartFix+"; it makes the socket again")
		r.unavailable = true
		return r
	}
	r := ok(CheckSocket, fmt.Sprintf("the service (pid %d) answers on %s for %s, namespace %s, task queue %s", info.PID, path, info.Address, info.Namespace, info.TaskQueue)).
		with("pid", info.PID).with("address", info.Address).with("namespace", info.Namespace).with("task_queue", info.TaskQueue).with("protocol", info.Protocol)
	if info.UIURL != "" {
		r = r.with("ui_url", info.UIURL)
	}
	var differs []string
	if !sameLoopback(info.Address, want.Address) {
		differs = append(differs, fmt.Sprintf("address %s, not %s", info.Address, want.Address))
	}
	if info.Namespace != want.Namespace {
		differs = append(differs, fmt.Sprintf("namespace %s, not %s", info.Namespace, want.Namespace))
	}
	if info.TaskQueue != want.TaskQueue {
		differs = append(differs, fmt.Sprintf("task queue %s, not %s", info.TaskQueue, want.TaskQueue))
	}
	switch {
	case len(differs) > 0:
		r.Status = Warn
		r.Verdict = fmt.Sprintf("the service on %s serves %s: commands for this folder dial Temporal themselves", path, joinAnd(differs))
		r.Fix = "run the service with this folder's settings (`subagents dev --namespace`, `--task-queue`, `--port`), or change the settings (SUBAGENTS_TASK_QUEUE, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, the extension's subagents.json)"
	case info.Protocol < minProtocol:
		r.Status = Warn
		r.Verdict = fmt.Sprintf("the service on %s speaks protocol %d, older than this command's %d: commands dial Temporal themselves", path, info.Protocol, minProtocol)
		r.Fix = restartFix
	}
	return r
}

// minProtocol is the client protocol a command hands its calls to (cli's
// ProtocolVersion).
const minProtocol = 2

// keyMode says what the API key check expects.
type keyMode int

const (
	keyNeeded   keyMode = iota // a subagents dev runs: it has a key
	keyOptional                // another Temporal: it may need none
	keyLater                   // nothing runs: the first start makes it
)

// checkAPIKey: the local service's API key is there and readable by this
// user only (docs/security.md): every command and pi presents it.
func checkAPIKey(read func(string) error, dataDir string, mode keyMode) Result {
	path := connection.KeyPath(dataDir)
	err := read(dataDir)
	switch {
	case err == nil:
		return ok(CheckAPIKey, fmt.Sprintf("the frontend's API key %s is readable, by this user only", path)).with("path", path)
	case errors.Is(err, fs.ErrNotExist) && mode == keyOptional:
		return ok(CheckAPIKey, fmt.Sprintf("no API key in %s: the Temporal at the address is not a subagents dev and needs none", dataDir))
	case errors.Is(err, fs.ErrNotExist) && mode == keyLater:
		return skip(CheckAPIKey, fmt.Sprintf("no API key in %s yet: the service makes it at its first start (see service)", dataDir))
	case errors.Is(err, fs.ErrNotExist):
		return fail(CheckAPIKey, fmt.Sprintf("the service runs but its API key %s is missing: no command or pi can call it", path), restartFix+"; it makes a new key")
	}
	fix := fmt.Sprintf("`chmod 600 %s` if it is yours; else remove it and restart the service (`subagents stop`, `subagents dev`), which makes a new one", path)
	if errcode.Is(err, errcode.PermissionDenied) {
		return fail(CheckAPIKey, oneLine(err.Error()), fix).with("path", path)
	}
	return fail(CheckAPIKey, fmt.Sprintf("the API key %s cannot be read: %s", path, oneLine(err.Error())), fix).with("path", path)
}

// sameLoopback is whether two addresses name the same port on this
// machine, every loopback name counting as one, or are equal.
func sameLoopback(a, b string) bool {
	if a == b {
		return true
	}
	_, pa, errA := net.SplitHostPort(a)
	_, pb, errB := net.SplitHostPort(b)
	return errA == nil && errB == nil && pa == pb && connection.IsLoopback(a) && connection.IsLoopback(b)
}

// joinAnd joins a list in words.
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	s := ""
	for i, it := range items {
		switch {
		case i == 0:
			s = it
		case i == len(items)-1:
			s += " and " + it
		default:
			s += ", " + it
		}
	}
	return s
}
