package activities

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// member is a process proven to be below the reaper (see descendants), held
// by a pidfd so that a signal reaches it and never a process that reused its
// pid.
type member struct {
	pid, ppid int
	// fd is its pidfd; -1 on kernels without pidfd_open (before 5.3),
	// where signals go by pid, a reuse between the proof and the kill
	// not excluded.
	fd int
	// top is the reaper's child it descends from (itself, for one).
	top int
}

func (m member) signal(sig syscall.Signal) bool {
	if m.fd < 0 {
		return syscall.Kill(m.pid, sig) == nil
	}
	return unix.PidfdSendSignal(m.fd, sig, nil, 0) == nil
}

func (m member) close() {
	if m.fd >= 0 {
		_ = syscall.Close(m.fd)
	}
}

// alive is whether the process is still there (a zombie counts: its pid is
// still its own).
func (m member) alive() bool { return m.signal(0) }

// descendants lists the processes below root, parents before children,
// each proven: its pidfd was opened, then its stat read named a parent
// already proven, and afterwards both were still alive through their pidfds,
// so neither pid was reused in between and the parent read is the one
// proven. Zombies are left out (nothing to kill, nobody below), but not a
// process whose first thread alone ended (zombie). The caller
// closes the members.
func descendants(root int) []member {
	// Each proven process's children from the kernel's lists, or, where it
	// keeps none, from one scan of every process.
	var scanned map[int][]int
	kidsOf := func(pid int) []int {
		if kids, ok := childrenListed(pid); ok {
			return kids
		}
		if scanned == nil {
			scanned = scanChildren()
		}
		return scanned[pid]
	}
	var out []member
	queue := []member{{pid: root, fd: -1}}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, pid := range kidsOf(parent.pid) {
			if m, ok := prove(pid, parent, root); ok {
				out = append(out, m)
				queue = append(queue, m)
			}
		}
	}
	return out
}

// prove opens pid's pidfd and checks that it is a live child of parent.
func prove(pid int, parent member, root int) (member, bool) {
	m := member{pid: pid, ppid: parent.pid, fd: -1, top: parent.top}
	if parent.pid == root {
		m.top = pid
	}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		m.fd = fd
	case errors.Is(err, syscall.ENOSYS):
	default:
		return m, false // gone
	}
	f := statFields("/proc/" + strconv.Itoa(pid))
	ok := len(f) > 1 && !zombie(pid, f) && f[1] == strconv.Itoa(parent.pid) &&
		m.alive() && (parent.pid == root || parent.alive())
	if !ok {
		m.close()
	}
	return m, ok
}

// zombie reports whether the process whose stat fields are f has ended,
// every thread of it. Its stat says Z as soon as its first thread has
// ended, and a process may end that thread alone (a raw exit of the main
// thread) while its other threads run on and start what they like: such a
// process is no zombie, and neither a sweep nor the reaper's last kill may
// pass it by.
func zombie(pid int, f []string) bool {
	if len(f) == 0 || f[0] != "Z" {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true // reaped meanwhile
	}
	for _, t := range tasks {
		if g := statFields(dir + "/" + t.Name()); len(g) > 0 && g[0] != "Z" && g[0] != "X" {
			return false
		}
	}
	return true
}

// childrenOf lists the processes whose parent is pid (zombies included):
// from the kernel's lists (childrenListed), or from one reading of /proc.
func childrenOf(pid int) []int {
	if kids, ok := childrenListed(pid); ok {
		return kids
	}
	return scanChildren()[pid]
}

// scanChildren reads every process's parent from /proc: the children of
// each, zombies included.
func scanChildren() map[int][]int {
	kids := map[int][]int{}
	eachProc(func(pid int, dir string) {
		if f := statFields(dir); len(f) > 1 {
			if ppid, err := strconv.Atoi(f[1]); err == nil {
				kids[ppid] = append(kids[ppid], pid)
			}
		}
	})
	return kids
}

// childrenListed lists pid's children (zombies included) from the lists
// the kernel keeps of each of its threads' children
// (/proc/PID/task/TID/children: a child is its forking thread's, an
// orphan its subreaper's, and a thread's children go to another thread of
// its process when it ends). A scan of /proc reads every process of the
// machine instead: the reaper looked at every child's end, three scans a
// run, 6–10 ms of CPU a run on this machine's 90 processes, a sixth of a
// stub task's (BENCHMARKS.md, "Levers tried"). ok is false where the
// kernel has no such lists (built without CONFIG_PROC_CHILDREN) or one
// could not be read: the caller scans. A process gone has no children.
//
// Like a scan's, the lists are read while processes come and go: the
// kernel may leave out a child whose sibling was reaped during the read,
// and a thread that ends between two reads moves its children to a list
// read before (left out) or after (listed twice: kept once). A child of
// the reaper is reaped by the reaper alone, between reads; a process
// deeper down that such a race hides is found by the next sweep pass (a
// pass that killed something is followed by more) or run's end.
func childrenListed(pid int) (kids []int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, true
	}
	if err != nil {
		return nil, false
	}
	seen := map[int]bool{}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/" + childrenFile)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			if _, serr := os.Stat(dir + "/" + t.Name()); serr == nil {
				return nil, false // the thread is there, its list is not
			}
			continue // the thread ended
		}
		if err != nil {
			return nil, false
		}
		for f := range bytes.FieldsSeq(b) {
			if kid, err := strconv.Atoi(string(f)); err == nil && !seen[kid] {
				seen[kid] = true
				kids = append(kids, kid)
			}
		}
	}
	return kids, true
}

// childrenFile is the name of a thread's list of children in /proc; the
// tests name one no kernel has, to take the scan's path.
var childrenFile = "children"

// killLoose kills the loose processes below root (its children that are
// not the worker's children, isChild) whose mark no running child claims
// (claimed), with everything below them, and returns how many it
// signalled.
func killLoose(root int, isChild func(pid int) bool, claimed func(mark string) bool) int {
	members := descendants(root)
	defer func() {
		for _, m := range members {
			m.close()
		}
	}()
	doomed := map[int]bool{}
	for _, m := range members {
		if m.ppid == root && !isChild(m.pid) {
			mark, ok := markOf(m)
			doomed[m.pid] = ok && !claimed(mark)
		}
	}
	n := 0
	for _, m := range members {
		if doomed[m.top] && m.signal(syscall.SIGKILL) {
			n++
		}
	}
	return n
}

// markOf reads m's ProcMarkEnv ("" without one); ok is false when m is gone
// (what was read may be another process's).
func markOf(m member) (string, bool) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(m.pid) + "/environ")
	if err != nil || !m.alive() {
		return "", false
	}
	for v := range bytes.SplitSeq(env, []byte{0}) {
		if mark, ok := bytes.CutPrefix(v, []byte(ProcMarkEnv+"=")); ok {
			return string(mark), true
		}
	}
	return "", true
}

// killMarked SIGKILLs every process whose environment holds entry (see
// markEntry) and returns how many it found: what a retry ends of a dead
// attempt whose reaper could not (see killLeftovers). Each is held by a
// pidfd before its environment is read, and signalled through it only if
// still alive after, so a pid reused meanwhile is spared. Only this user's
// processes are looked at: a worker run as root must not kill another
// user's process that carries a mark (an ordinary user cannot read them).
func killMarked(entry []byte) int {
	self, uid := os.Getpid(), os.Getuid()
	n := 0
	eachProc(func(pid int, dir string) {
		if pid == self || !ownedBy(dir, uid) {
			return
		}
		m := member{pid: pid, fd: -1}
		fd, err := unix.PidfdOpen(pid, 0)
		if err == nil {
			m.fd = fd
		} else if !errors.Is(err, syscall.ENOSYS) {
			return
		}
		defer m.close()
		if environHas(dir, entry) && m.alive() && m.signal(syscall.SIGKILL) {
			n++
		}
	})
	return n
}

// environHas is whether the environment of the process at dir holds entry
// (see killMarked); false when it cannot be read.
func environHas(dir string, entry []byte) bool {
	env, err := os.ReadFile(dir + "/environ")
	return err == nil && bytes.Contains(append(append([]byte{0}, env...), 0), entry)
}

// markEntry is what killMarked looks for to find one process's tree.
func markEntry(mark string) []byte {
	return []byte("\x00" + ProcMarkEnv + "=" + mark + "\x00")
}

// eachProc calls fn for every process in /proc.
func eachProc(fn func(pid int, dir string)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			fn(pid, "/proc/"+e.Name())
		}
	}
}

// ownedBy is whether the process of /proc folder dir runs as uid.
func ownedBy(dir string, uid int) bool {
	info, err := os.Stat(dir)
	if err != nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}
