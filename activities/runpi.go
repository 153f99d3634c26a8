// Package activities holds the Temporal activities that run child pi
// processes: spawn, event stream parsing, and what a run produced.
package activities

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/internal/errcode"
)

// Config is what every child run needs from the worker.
type Config struct {
	// Pi is the pi executable.
	Pi string
	// PathPrefix goes first on the child's PATH: the folder holding the
	// Node 22 that pi needs.
	PathPrefix string
	// DataDir holds session files and artifacts.
	DataDir string
	// Env is added to the child's environment after the worker's own
	// (tests point PI_CODING_AGENT_DIR at a scripted model this way).
	Env []string
}

// Activities are the worker's activities; their dependencies live here.
type Activities struct {
	cfg Config
}

// New returns the activities for cfg.
func New(cfg Config) *Activities { return &Activities{cfg: cfg} }

// RunPiInput is one turn of a child pi run.
type RunPiInput struct {
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent"`
	Prompt    string `json:"prompt"`
	Cwd       string `json:"cwd"`
	// Model is provider/id; empty uses pi's default.
	Model string `json:"model,omitempty"`
}

// ErrorInfo is a coded error in a result.
type ErrorInfo struct {
	Code     errcode.Code     `json:"code"`
	Message  string           `json:"message"`
	Category errcode.Category `json:"category"`
}

// RunPiResult is what one child run produced.
type RunPiResult struct {
	ExitCode    int        `json:"exitCode"`
	Output      string     `json:"output"`
	StopReason  string     `json:"stopReason,omitempty"`
	Usage       Usage      `json:"usage"`
	ToolRows    []ToolRow  `json:"toolRows,omitempty"`
	Finalize    *Finalize  `json:"finalize"`
	SessionFile string     `json:"sessionFile"`
	Error       *ErrorInfo `json:"error,omitempty"`
	Attempt     int32      `json:"attempt"`
}

// killGrace is how long pi gets to exit after SIGTERM before SIGKILL:
// pi stops its tools and flushes its session file well within it (seed 002
// uses the same 5 s).
const killGrace = 5 * time.Second

// stderrTailBytes keeps the end of pi's stderr for error messages; pi writes
// its diagnostics there and the last lines say what went wrong.
const stderrTailBytes = 8 << 10

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// SessionFile is where a session's pi transcript lives: seed 000's layout,
// <data dir>/sessions/<cwd-hash>/<agent>_<sessionId>.jsonl.
func SessionFile(dataDir, cwd, agent, sessionID string) string {
	sum := sha256.Sum256([]byte(cwd))
	return filepath.Join(dataDir, "sessions", hex.EncodeToString(sum[:8]), agent+"_"+sessionID+".jsonl")
}

// ValidateCwd checks a task's working directory with seed 002's messages.
func ValidateCwd(cwd string) error {
	if !filepath.IsAbs(cwd) {
		return errcode.New(errcode.InvalidInput, "cwd must be an absolute path")
	}
	for _, seg := range strings.Split(filepath.ToSlash(cwd), "/") {
		if seg == ".." {
			return errcode.New(errcode.InvalidInput, "cwd must not contain '..' path segments")
		}
	}
	return nil
}

// RunPi runs one child pi turn to its end and reports what it produced. A
// provider error inside the run is a result with an error, not an activity
// failure; bad input fails without retry.
func (a *Activities) RunPi(ctx context.Context, in RunPiInput) (RunPiResult, error) {
	if err := a.validate(in); err != nil {
		return RunPiResult{}, temporal.NewNonRetryableApplicationError(err.Error(), string(errcode.CodeOf(err)), err)
	}
	res := RunPiResult{
		SessionFile: SessionFile(a.cfg.DataDir, in.Cwd, agentName(in.Agent), in.SessionID),
		Attempt:     activity.GetInfo(ctx).Attempt,
	}
	if err := os.MkdirAll(filepath.Dir(res.SessionFile), 0o700); err != nil {
		return res, fmt.Errorf("session folder: %w", err)
	}

	args := []string{"--mode", "json", "--session", res.SessionFile}
	if in.Model != "" {
		args = append(args, "--model", in.Model)
	}
	args = append(args, in.Prompt)
	cmd := exec.Command(a.cfg.Pi, args...)
	cmd.Dir = in.Cwd
	cmd.Env = a.childEnv()
	// pi hangs on an open stdin; /dev/null makes it run its prompt and exit.
	cmd.Stdin = nil
	// Its own process group, so that a kill reaches the tools pi started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	var stderr tailBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		res.Error = errorInfo(errcode.Failed, "Failed to spawn sub-agent process: "+err.Error())
		res.ExitCode = -1
		return res, nil
	}

	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			terminate(cmd.Process.Pid, done)
		case <-done:
		}
	}()

	var st Stream
	readErr := readLines(stdout, st.Apply)
	waitErr := cmd.Wait()
	close(done)

	res.Output = st.FinalText
	res.StopReason = st.StopReason
	res.Usage = st.Usage
	res.ToolRows = st.ToolRows
	res.Finalize = st.Finalize
	res.ExitCode = cmd.ProcessState.ExitCode()

	switch {
	case ctx.Err() != nil:
		return res, ctx.Err()
	case readErr != nil:
		res.Error = errorInfo(errcode.Failed, "reading pi's output: "+readErr.Error())
	case waitErr != nil:
		msg := fmt.Sprintf("pi exited with code %d", res.ExitCode)
		if tail := lastLine(stderr.String()); tail != "" {
			msg += ": " + tail
		}
		res.Error = errorInfo(errcode.Failed, msg)
	case st.Failed():
		msg := st.ErrorMessage
		if msg == "" {
			msg = "the model's response ended with stop reason " + st.StopReason
		}
		res.Error = errorInfo(errcode.Failed, msg)
	}
	return res, nil
}

func (a *Activities) validate(in RunPiInput) error {
	if !sessionIDPattern.MatchString(in.SessionID) {
		return errcode.Errorf(errcode.InvalidInput, "session ID %q is not valid", in.SessionID)
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return errcode.New(errcode.InvalidInput, "prompt must not be empty")
	}
	if in.Agent != "" && !sessionIDPattern.MatchString(in.Agent) {
		return errcode.Errorf(errcode.InvalidInput, "agent name %q is not valid", in.Agent)
	}
	return ValidateCwd(in.Cwd)
}

func agentName(agent string) string {
	if agent == "" {
		return "default"
	}
	return agent
}

// childEnv is the worker's environment, the configured additions, the marker
// that tells our extension it runs in a child, and Node 22 first on PATH.
func (a *Activities) childEnv() []string {
	env := append(os.Environ(), a.cfg.Env...)
	env = append(env, "PI_SUBAGENT_CHILD=1")
	if a.cfg.PathPrefix != "" {
		path := os.Getenv("PATH")
		for _, kv := range a.cfg.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
			}
		}
		env = append(env, "PATH="+a.cfg.PathPrefix+string(os.PathListSeparator)+path)
	}
	return env
}

// terminate sends SIGTERM to pi's process group, then SIGKILL after
// killGrace unless pi exited (done closed) first.
func terminate(pid int, done <-chan struct{}) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(killGrace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// readLines calls fn for every LF-terminated record of r, however long. It
// always reads r to its end, because pi stalls (or crashes) when its stdout is
// not drained.
func readLines(r io.Reader, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			fn(line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, r)
			return err
		}
	}
}

func errorInfo(code errcode.Code, msg string) *ErrorInfo {
	return &ErrorInfo{Code: code, Message: msg, Category: code.Category()}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tailBuffer keeps the last stderrTailBytes written to it.
type tailBuffer struct{ buf bytes.Buffer }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - stderrTailBytes; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.buf.String() }
