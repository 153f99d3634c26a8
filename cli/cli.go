// Package command is the subagents command's dispatch, shared by its two
// builds: bin/subagents, light (the client verbs, serve and the worker), and
// bin/subagents-dev, which also links the embedded Temporal server and UI
// for `dev` and `demo`. A client verb then starts in milliseconds and a few
// MiB instead of paying for the server's initialisation, and the light
// build hands `dev` and `demo` to the full one.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/durable-pi/subagents/internal/errcode"
)

const Usage = `usage: subagents <command> [flags]

commands:
  dev         run an embedded Temporal (SQLite file), its UI and a worker
  worker      run a worker against an external Temporal (TEMPORAL_* settings)
  setup       create the namespace and register the search attributes on an external Temporal
  stop        stop the local service (subagents dev) of the data dir
  service     start the local service at login: service install|uninstall|status
  doctor      check what subagents needs here, each with a verdict and its fix (--json)
  ui          the link that logs a browser into the local service's Temporal UI
  demo        the whole stack with a scripted model: a delegation survives a worker kill
  run         start tasks and wait, with live progress: run [--agent NAME] PROMPT, or run --plan FILE|NAME
  start       start tasks and return their task IDs at once (--input - reads JSON)
  status      where tasks, sessions or delegations stand: status ID...
  wait        wait until they end: wait [--timeout 30s] ID...
  send        a follow-up prompt for a session: send ID PROMPT
  cancel      stop running work; finished tasks keep their results: cancel ID...
  resume      run a failed or cancelled plan again; its finished steps are kept: resume PLAN_ID
  apply       apply a worktree task's change to its checkout (or --discard it): apply ID...
  reply       answer a child's question: reply ID ANSWER
  questions   the children's questions that wait for an answer (--cwd --parent-session)
  list        delegations and sessions (--status --agent --parent-session --cwd --kind --open --limit)
  output      a session's final text (--full for all of it): output ID
  transcript  a session's whole conversation: transcript ID
  ack         a parent received a delegation's results: ack ID
  schedule    delegations and plans on a timer: schedule create|list|describe|pause|resume|trigger|update|delete
  profiles    the agent profiles and saved plans a task can use (--cwd DIR)
  serve       answer many of these calls over one connection: JSON lines on stdin and stdout (the pi extension's way)
  version     the release of this build (--json: {"version": ...})

Every client command takes --json: one envelope on stdout (contract_version
subagents.v1). Exit codes: 0 done, 1 a task failed, 2 bad input or not found,
3 Temporal unavailable, 4 a wait ended before the work did.

Run "subagents <command> -h" for a command's flags.
`

// Main is a command's body: its arguments, stdout and stderr.
type Main func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// ServerBinary is the build that links the embedded server, beside the
// light one.
const ServerBinary = "subagents-dev"

// Run dispatches args; server holds `dev` and `demo`, the commands that
// need the embedded server.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, server map[string]Main) error {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, Usage)
		return errcode.New(errcode.InvalidInput, "no command given")
	}
	if m, ok := server[args[0]]; ok {
		return m(ctx, args[1:], stdout, stderr)
	}
	switch args[0] {
	case "worker":
		return workerMain(ctx, args[1:], stdout, stderr)
	case "setup":
		return setupMain(ctx, args[1:], stdout, stderr)
	case "ui":
		return uiMain(ctx, args[1:], stdout, stderr)
	case "stop":
		return stopMain(ctx, args[1:], stdout, stderr)
	case "service":
		return serviceMain(ctx, args[1:], stdout, stderr)
	case "doctor":
		return doctorMain(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		_, _ = fmt.Fprint(stdout, Usage)
		return nil
	case "version", "--version":
		return versionMain(args[1:], stdout)
	default:
		// The client answers an unknown verb asked for --json with a coded
		// envelope; a person gets the usage.
		if slices.Contains(Verbs, args[0]) || WantsJSON(args[1:]) {
			return clientMain(ctx, args, IO{In: os.Stdin, Out: stdout, Err: stderr})
		}
		// One line, as for a mistyped flag: the whole usage would bury it.
		return unknownCommand(args[0])
	}
}

// ExecServer is the light build's `dev` and `demo`: it replaces this
// process with ServerBinary running the same command, found beside this
// executable, else on PATH. The process keeps its pid, so whoever started
// `subagents dev` (a pi extension, a service manager) holds the service.
func ExecServer(verb string) Main {
	return func(_ context.Context, args []string, _, _ io.Writer) error {
		path, err := serverPath()
		if err != nil {
			return err
		}
		argv := append([]string{path, verb}, args...)
		if err := syscall.Exec(path, argv, os.Environ()); err != nil {
			return errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("run %s: %v", path, err))
		}
		return nil
	}
}

func serverPath() (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), ServerBinary)
		if info, err := os.Stat(beside); err == nil && !info.IsDir() {
			return beside, nil
		}
	}
	if p, err := exec.LookPath(ServerBinary); err == nil {
		return p, nil
	}
	return "", errcode.Errorf(errcode.InvalidInput,
		"`subagents dev` and `demo` run %s, which is neither beside this subagents nor on PATH: `pi install npm:@durable-pi/subagents` brings both, "+
			"`make build` writes both into bin/, `go install github.com/durable-pi/subagents/cmd/subagents-dev@latest` installs it", ServerBinary)
}

// Report prints err as one line and returns the exit code for it.
func Report(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, flag.ErrHelp) {
		return errcode.ExitOK
	}
	_, _ = fmt.Fprintf(stderr, "subagents: %v\n", err)
	return errcode.ExitCode(err)
}
