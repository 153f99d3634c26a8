package activities

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// killLeftovers ends what a dead attempt of a run left behind: the worker
// that would have ended its pi's tools (a build, a server, a sleep) died
// with it, and they may still run, writing into the folder the retry works
// in. The record's mark finds them wherever they run; a record written
// before marks existed names pi's process group instead, which is killed
// only while it still holds a process of a child run (PI_SUBAGENT_CHILD=1 in
// its environment): a pgid reused by an unrelated program is left alone. It
// returns how many processes it found.
func killLeftovers(rec runRecord) int {
	if rec.Mark != "" {
		return killMarked(markEntry(rec.Mark))
	}
	pgid := rec.Pgid
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		return 0
	}
	members := groupMembers(pgid)
	for _, pid := range members {
		if environHas("/proc/"+strconv.Itoa(pid), []byte("\x00PI_SUBAGENT_CHILD=1\x00")) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return len(members)
		}
	}
	return 0
}

// groupMembers lists the processes whose process group is pgid.
func groupMembers(pgid int) []int {
	var out []int
	want := strconv.Itoa(pgid)
	eachProc(func(pid int, dir string) {
		if fields := statFields(dir); len(fields) > 2 && fields[2] == want {
			out = append(out, pid)
		}
	})
	return out
}

// statFields are the fields of the process at dir's stat after its
// command's closing parenthesis (the command may hold spaces): state,
// ppid, pgrp, ... Nil when it cannot be read.
func statFields(dir string) []string {
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}
