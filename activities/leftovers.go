package activities

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// killLeftovers ends what a dead attempt of a run left behind: its pi ran in
// a process group of its own (pgid, from the session's lock record), and the
// worker that would have killed the group died with it, so pi's tools (a
// build, a server, a sleep) may still run, writing into the folder the
// retry works in. Only a group that still holds a process of a child run
// (PI_SUBAGENT_CHILD=1 in its environment) is killed: a pgid reused by an
// unrelated program is left alone. It returns how many processes it found.
func killLeftovers(pgid int) int {
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		return 0
	}
	members := groupMembers(pgid)
	for _, pid := range members {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00PI_SUBAGENT_CHILD=1\x00")) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return len(members)
		}
	}
	return 0
}

// groupMembers lists the processes whose process group is pgid.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state, ppid, pgrp.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 2 && fields[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}
