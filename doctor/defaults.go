package doctor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/worker"
)

// Bounds of what the doctor waits for. Each thing it asks is local or one
// round trip; a bound keeps a hung thing from hanging the doctor, which is
// what a user runs when something hangs. Each check runs within its own
// bound and the doctor's deadline too (bounds.go).
const (
	// dialTimeout: a frontend that answers does within a second; five
	// allow a loaded machine.
	dialTimeout = 5 * time.Second
	// callTimeout bounds each later call to Temporal.
	callTimeout = 10 * time.Second
	// probeTimeout bounds a TCP connect to see whether anything listens:
	// local, well under a millisecond when it does.
	probeTimeout = 500 * time.Millisecond
	// frontendTimeout bounds asking what listens at the local address
	// whether it is a Temporal (askFrontend): a frontend answers its
	// health check from memory, in milliseconds; two seconds are a loaded
	// machine, and a frontend that takes longer is hung.
	frontendTimeout = 2 * time.Second
	// httpTimeout bounds the UI's health check: the UI answers it from
	// memory.
	httpTimeout = 5 * time.Second
	// commandTimeout bounds `node --version` and each git command: a cold
	// Node start takes about a second.
	commandTimeout = 20 * time.Second
)

// DefaultDeps are the real ways to look, for the connection conn, with
// the lock and the socket of the service left to the caller (cli knows
// them).
func DefaultDeps(conn connection.Settings) Deps {
	return Deps{
		FindPi:          worker.FindPi,
		PiLookup:        worker.DefaultPiLookup,
		ServicePiLookup: ServicePiLookup,
		NodeVersion:     nodeVersion,
		Answers:         askFrontend,
		ReadKey: func(dataDir string) error {
			_, err := connection.ReadKey(dataDir)
			return err
		},
		Dial: func(ctx context.Context) (Frontend, func(), error) {
			opts, err := conn.ClientOptions()
			if err != nil {
				return nil, nil, err
			}
			ctx, cancel := context.WithTimeout(ctx, dialTimeout)
			defer cancel()
			// The doctor's own output is its verdicts: the SDK's logs
			// would only get in their way.
			tc, err := conn.Dial(ctx, slog.New(slog.DiscardHandler))
			if err != nil {
				return nil, nil, err
			}
			ns := opts.Namespace
			if ns == "" {
				ns = "default"
			}
			return NewFrontend(tc, opts.HostPort, ns, ""), tc.Close, nil
		},
		HTTPGet: func(ctx context.Context, url string) (int, error) {
			ctx, cancel := context.WithTimeout(ctx, httpTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return 0, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode, nil
		},
		FreeSpace: func(path string) (uint64, error) {
			var st syscall.Statfs_t
			if err := syscall.Statfs(path, &st); err != nil {
				return 0, err
			}
			return st.Bavail * uint64(st.Bsize), nil
		},
		Git: func(ctx context.Context, dir string, args ...string) (string, error) {
			ctx, cancel := context.WithTimeout(ctx, commandTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil {
				return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
			}
			return out.String(), nil
		},
		StaleWorktrees:    activities.StaleWorktrees,
		StaleSessionLocks: activities.StaleSessionLocks,
	}
}

// askFrontend is Deps.Answers: a TCP connect (does anything listen?),
// then the gRPC health check Temporal's frontend answers with no key, as
// the SDK's own CheckHealth asks it. A connect alone took a port that
// takes connections and never answers for a running Temporal. Any answer
// counts, a refusal too (a frontend of another data dir refuses a caller
// without its key): only none, or one in no gRPC, is none. The doctor
// calls it only for a local address, which has no TLS (Config.Local).
func askFrontend(ctx context.Context, address string) error {
	c, err := net.DialTimeout("tcp", address, probeTimeout)
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrNoListener, err)
	}
	_ = c.Close()
	cc, err := grpc.NewClient("passthrough:///"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = cc.Close() }()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: frontendHealthService})
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.DeadlineExceeded, codes.Canceled:
		return fmt.Errorf("it did not answer within %s", durationText(frontendTimeout))
	case codes.Unavailable:
		return fmt.Errorf("it does not speak gRPC: %s", status.Convert(err).Message())
	}
	// Refused or unknown: it answered, as a gRPC server.
	return nil
}

// frontendHealthService is the service Temporal's frontend reports its
// health for.
const frontendHealthService = "temporal.api.workflowservice.v1.WorkflowService"

// nodeVersion finds node as pi's `#!/usr/bin/env node` does when the
// worker spawns it (prefix first on PATH) and runs `node --version`.
func nodeVersion(ctx context.Context, prefix string) (string, string, error) {
	path := ""
	if prefix != "" {
		if p := filepath.Join(prefix, "node"); isExecutable(p) {
			path = p
		}
	}
	if path == "" {
		p, err := exec.LookPath("node")
		if err != nil {
			return "", "", fmt.Errorf("node is neither beside pi nor on PATH")
		}
		path = p
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return path, "", fmt.Errorf("%s --version: %v", path, err)
	}
	return path, strings.TrimSpace(string(out)), nil
}

func isExecutable(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir() && info.Mode().Perm()&0o111 != 0
}
