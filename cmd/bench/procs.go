package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durable-pi/subagents/activities"
)

// sampled runs fn and samples the resident memory of every descendant of
// this process while it runs, every 10 ms.
func sampled(fn func() error) (time.Duration, int64, error) {
	d, peak, _, err := sampledTree(nil, fn)
	return d, peak, err
}

// sampledTree is sampled that also keeps the peak below the process whose
// pid root reports (0 until it runs), from the same reading of /proc: one
// scan per tick for both, so that a run with two figures loads the machine
// no more than a run with one.
func sampledTree(root func() int, fn func() error) (time.Duration, int64, int64, error) {
	stop := make(chan struct{})
	type peaks struct{ all, below int64 }
	peakC := make(chan peaks, 1)
	go func() {
		var p peaks
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			ps := readProcs()
			p.all = max(p.all, ps.below(os.Getpid()))
			if root != nil {
				if pid := root(); pid > 0 {
					p.below = max(p.below, ps.below(pid))
				}
			}
			select {
			case <-stop:
				peakC <- p
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	err := fn()
	d := time.Since(start)
	close(stop)
	p := <-peakC
	return d, p.all, p.below, err
}

// procs is one reading of /proc: each process's children and resident set.
type procs struct {
	children map[int][]int
	rss      map[int]int64
	// cpu is the CPU time each process used, in clock ticks.
	cpu map[int]int64
}

// isReaper is whether process pid is a worker's reaper (a re-exec of
// /proc/self/exe, so named "exe" in its stat).
func isReaper(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
	return err == nil && strings.TrimRight(string(b), "\x00") == activities.ReaperName
}

// selfComm is this process's name as /proc/PID/stat gives it.
var selfComm = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return "\x00"
	}
	s := string(b)
	return s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
})

func readProcs() procs {
	ps := procs{children: map[int][]int{}, rss: map[int]int64{}, cpu: map[int]int64{}}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which may hold spaces: state ppid
		// ..., utime and stime are the 14th and 15th fields overall, rss
		// (in pages) the 24th.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 22 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		comm := s[:strings.LastIndexByte(s, ')')]
		// A reaper of this process's own workers: its own memory and CPU
		// left out, as the services' are, but not the children it starts
		// for the workers (every child pi and its tools are below it).
		if strings.HasSuffix(comm, "(exe") && isReaper(d.Name()) {
			ps.children[ppid] = append(ps.children[ppid], p)
			continue
		}
		// A child of this process between its fork and its exec still has
		// this process's name and counts this process's memory as its own
		// (170 MiB read as a pi's when a scan fell there): it is not a run's.
		if p != os.Getpid() && strings.HasSuffix(comm, "("+selfComm()) {
			continue
		}
		pages, _ := strconv.ParseInt(f[21], 10, 64)
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ps.children[ppid] = append(ps.children[ppid], p)
		ps.rss[p] = pages * int64(os.Getpagesize())
		ps.cpu[p] = utime + stime
	}
	// A scan takes milliseconds: a run that ended while it went on and the
	// next one, started meanwhile, are both in it. Only what still runs at
	// its end counts as resident, or one process's memory after another's
	// reads as both at once.
	for p := range ps.rss {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(p))); err != nil {
			delete(ps.rss, p)
		}
	}
	return ps
}
