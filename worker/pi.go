package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/durable-pi/subagents/internal/errcode"
)

// Pi is a pi installation the worker has checked.
type Pi struct {
	// Path is the pi executable.
	Path string
	// PathPrefix is the folder to put first on a child's PATH so that pi's
	// `#!/usr/bin/env node` finds the Node 22 installed beside it.
	PathPrefix string
	// Version is what `pi --version` printed.
	Version string
	// Source says how Path was found, for the start-up log.
	Source string
}

// PiLookup is where FindPi looks, in order.
type PiLookup struct {
	// Flag is --pi.
	Flag string
	// Env is $SUBAGENTS_PI.
	Env string
	// TreeRoots are folders that may hold this project's source tree; its
	// extension/node_modules/.bin/pi is used when present.
	TreeRoots []string
	// LookPath searches PATH; exec.LookPath when nil.
	LookPath func(string) (string, error)
}

// DefaultPiLookup looks in --pi, $SUBAGENTS_PI, the source tree around the
// running binary (bin/subagents → ../extension) and the current folder, then
// PATH.
func DefaultPiLookup(flag string) PiLookup {
	l := PiLookup{Flag: flag, Env: os.Getenv("SUBAGENTS_PI")}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		l.TreeRoots = append(l.TreeRoots, filepath.Dir(filepath.Dir(exe)))
	}
	if wd, err := os.Getwd(); err == nil {
		l.TreeRoots = append(l.TreeRoots, wd)
	}
	return l
}

// treePi is where `npm ci` in the source tree's extension/ puts pi.
var treePi = filepath.Join("extension", "node_modules", ".bin", "pi")

// versionTimeout bounds `pi --version`: a cold Node start takes about a
// second here; twenty covers a loaded CI machine without hanging start-up.
const versionTimeout = 20 * time.Second

// FindPi finds pi in the order docs/command.md ("Where pi comes from") gives and proves that it runs. The
// error says what is missing and how to install it.
func FindPi(ctx context.Context, l PiLookup) (Pi, error) {
	candidate, source := "", ""
	switch {
	case l.Flag != "":
		candidate, source = l.Flag, "--pi"
	case l.Env != "":
		candidate, source = l.Env, "$SUBAGENTS_PI"
	default:
		for _, root := range l.TreeRoots {
			p := filepath.Join(root, treePi)
			if _, err := os.Stat(p); err == nil {
				candidate, source = p, "source tree"
				break
			}
		}
		if candidate == "" {
			look := l.LookPath
			if look == nil {
				look = exec.LookPath
			}
			if p, err := look("pi"); err == nil {
				candidate, source = p, "PATH"
			}
		}
	}
	if candidate == "" {
		return Pi{}, errcode.New(errcode.InvalidInput,
			"pi not found: pass --pi PATH, set SUBAGENTS_PI, run `make` in the source tree (npm ci in extension/), or put pi on PATH")
	}
	abs, err := filepath.Abs(candidate)
	if err != nil {
		return Pi{}, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf("pi (%s): %v", source, err))
	}
	if info, err := os.Stat(abs); err != nil || info.IsDir() {
		return Pi{}, errcode.Errorf(errcode.InvalidInput, "pi (%s): %s does not exist or is not a file", source, abs)
	}
	pi := Pi{Path: abs, PathPrefix: filepath.Dir(abs), Source: source}

	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, abs, "--version")
	cmd.Env = append(os.Environ(), "PATH="+pi.PathPrefix+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		detail := strings.TrimSpace(errOut.String())
		if detail == "" {
			detail = err.Error()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			detail = fmt.Sprintf("no answer within %s", versionTimeout)
		}
		if i := strings.IndexByte(detail, '\n'); i >= 0 {
			detail = detail[:i]
		}
		return Pi{}, errcode.Wrap(errcode.InvalidInput, err, fmt.Sprintf(
			"pi at %s (%s) does not run: %s (pi needs Node >= 22.19 beside it or on PATH; `npm ci` in extension/ installs both)",
			abs, source, detail))
	}
	pi.Version = strings.TrimSpace(out.String())
	return pi, nil
}
