package activities

import (
	"os"
	"os/exec"
	"syscall"
)

// ReapedProcess is a process the worker's reaper started for an activity
// other than a child run (a plan step's gate, package gates): as every
// child pi, it and whatever it starts stay in the reaper's tree, so they
// die with the worker, even on its SIGKILL, instead of running on beside
// the retry that runs the command again.
type ReapedProcess struct {
	child *child
	// Pid is its pid, and its process group's: it runs in a group of its
	// own.
	Pid int
	// Mark is its ProcMarkEnv value, inherited by everything it starts:
	// what KillMarked finds of it.
	Mark string
}

// StartReaped starts cmd's program (its Path, Args, Dir and Env) through
// the worker's reaper, with files as its stdin, stdout and stderr, a mark
// in its environment and a process group of its own. The caller closes its
// copies of files once it returns.
func (a *Activities) StartReaped(cmd *exec.Cmd, files [3]*os.File) (*ReapedProcess, error) {
	mark := a.reaper.mark()
	cmd.Env = append(cmd.Environ(), ProcMarkEnv+"="+mark)
	c, err := a.reaper.spawn(cmd, mark, files)
	if err != nil {
		return nil, err
	}
	return &ReapedProcess{child: c, Pid: c.pid, Mark: mark}, nil
}

// Wait waits for the process to exit and returns how it ended; the reaper
// then ends what it left running below itself (a job it put in the
// background), as it does after a child pi's tools.
func (p *ReapedProcess) Wait() (syscall.WaitStatus, error) { return p.child.wait(true) }

// KillMarked SIGKILLs every process of this user that carries mark in its
// environment, wherever it runs, and returns how many it found: what a
// retry ends of an attempt whose worker and reaper could not.
func KillMarked(mark string) int {
	if mark == "" {
		return 0
	}
	return killMarked(markEntry(mark))
}
