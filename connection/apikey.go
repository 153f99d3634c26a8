package connection

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/durable-pi/subagents/internal/errcode"
)

// The local service's frontend refuses every call without its API key: the
// worker runs agents that execute code as the user who started it, so
// whoever can start a workflow there can run code as that user. The key is
// a file only that user can read, in the data dir beside the socket; this
// project's own callers (worker, command, extension, socket) find it there,
// and an operator passes it to Temporal's own CLI (docs/security.md).

// KeyName is the API key's file in the data dir.
const KeyName = "frontend.key"

// keyBytes of randomness: 256 bits, far beyond guessing over a socket.
const keyBytes = 32

// KeyPath is where the local service of dataDir keeps its API key.
func KeyPath(dataDir string) string { return filepath.Join(dataDir, KeyName) }

// DefaultDataDir is $SUBAGENTS_DATA_DIR, else ~/.pi/subagents: beside pi's
// own ~/.pi/agent, so a user finds both in one place.
func DefaultDataDir() (string, error) {
	if d := os.Getenv("SUBAGENTS_DATA_DIR"); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, "no home folder for the data dir; set SUBAGENTS_DATA_DIR or --data-dir")
	}
	return filepath.Join(home, ".pi", "subagents"), nil
}

// EnsureKey returns the API key of dataDir's service, making it on the
// first start: a 0600 file in the 0700 data dir. A key file that another
// user owns or could read is refused, not used: it would let that user in.
func EnsureKey(dataDir string) (string, error) { return ensureSecret(dataDir, KeyName, "the API key") }

// ReadKey reads the API key of dataDir's service. A missing file is
// fs.ErrNotExist (no local service has started there); a file another user
// owns, or that group or others may read or write, is PERMISSION_DENIED.
func ReadKey(dataDir string) (string, error) { return readSecret(dataDir, KeyName, "the API key") }

// ensureSecret returns the secret in dataDir's file name (what says which
// secret, for errors), making it when there is none.
func ensureSecret(dataDir, name, what string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("create the data dir %s: %v", dataDir, err))
	}
	key, err := readSecret(dataDir, name, what)
	if err == nil {
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, keyBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", errcode.Wrap(errcode.ServiceUnavailable, err, "make "+what+": "+err.Error())
	}
	key = hex.EncodeToString(raw)
	path := filepath.Join(dataDir, name)
	fail := func(err error) (string, error) {
		return "", errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("write %s %s: %v", what, path, err))
	}
	// Written whole under a temporary name, then linked to its own: a
	// process killed half way leaves no empty key behind, and no reader
	// ever sees a key before it is on disk. os.Link, unlike a rename, never
	// replaces a key that is there: of two services starting on one data
	// dir at once (the lock is taken after this), one makes the key and the
	// other reads it.
	tmp, err := os.CreateTemp(dataDir, "."+name+".tmp-*")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, werr := tmp.WriteString(key + "\n")
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fail(werr)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readSecret(dataDir, name, what)
	} else if err != nil {
		return fail(err)
	}
	return key, nil
}

// readSecret reads the secret in dataDir's file name, refusing one that
// another user owns or could read or write.
func readSecret(dataDir, name, what string) (string, error) {
	path := filepath.Join(dataDir, name)
	info, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", errcode.Wrap(errcode.PermissionDenied, err, fmt.Sprintf("read %s %s: %v", what, path, err))
	}
	if !info.Mode().IsRegular() {
		return "", errcode.Errorf(errcode.PermissionDenied, "%s %s is not a regular file: refusing to use it", what, path)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return "", errcode.Errorf(errcode.PermissionDenied, "%s %s belongs to user %d, not to this user (%d): refusing to use it", what, path, st.Uid, os.Getuid())
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", errcode.Errorf(errcode.PermissionDenied,
			"%s %s may be read or written by other users (mode %04o): refusing to use it; remove it and start the service again for a new one", what, path, info.Mode().Perm())
	}
	// An empty file is one an older version of this service was still
	// writing (it created the file, then wrote it): read it again for a
	// while before calling it broken.
	for deadline := time.Now().Add(emptySecretWait); ; {
		raw, err := os.ReadFile(path)
		if err != nil {
			return "", errcode.Wrap(errcode.PermissionDenied, err, fmt.Sprintf("read %s %s: %v", what, path, err))
		}
		if key := strings.TrimSpace(string(raw)); key != "" {
			return key, nil
		}
		if time.Now().After(deadline) {
			return "", errcode.Errorf(errcode.PermissionDenied, "%s %s is empty; remove it and start the service again for a new one", what, path)
		}
		time.Sleep(emptySecretWait / 20)
	}
}

// emptySecretWait is how long an empty secret file is read again: a writer
// fills it within milliseconds of making it, so a file still empty after a
// second was left by a writer that died between the two.
const emptySecretWait = time.Second

// withLocalKey gives opts the local service's API key when they carry no
// credentials of their own and name a loopback frontend: the address of a
// `subagents dev` on this machine. The key travels without TLS, as the
// frontend serves it on loopback only.
func withLocalKey(opts *sdkclient.Options, dataDir string) error {
	if opts.Credentials != nil || opts.ConnectionOptions.TLS != nil || !IsLoopback(opts.HostPort) {
		return nil
	}
	if dataDir == "" {
		d, err := DefaultDataDir()
		if err != nil {
			return nil
		}
		dataDir = d
	}
	key, err := ReadKey(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		// No local service made a key: a Temporal of another kind (the
		// Temporal CLI's dev server) that needs none.
		return nil
	}
	if err != nil {
		return err
	}
	// Checked before the dial, for a clear refusal, and again on every
	// connection gRPC makes (ownedDialer), as a reconnect after the
	// service restarts may find a stranger on its port.
	if uid, found := listenerOwner(opts.HostPort); found && uid != os.Getuid() {
		return strangerError(opts.HostPort, uid)
	}
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithContextDialer(ownedDialer))
	opts.Credentials = sdkclient.NewAPIKeyStaticCredentials(key)
	opts.ConnectionOptions.TLSDisabled = true
	return nil
}

// IsLoopback is whether hostPort names this machine by a loopback address
// or "localhost".
func IsLoopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
