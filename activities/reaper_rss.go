package activities

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dropBinaryPages lets go of the pages of this binary that the package
// initialisation read (the embedded server's packages in the dev binary: 100
// MiB and more of its resident set) and the reaper no longer needs: it
// advises the kernel that the executable's read-only mappings are not
// needed, and the pages it does need come back from the page cache as it
// touches them. Only mappings that hold no page of their own (Anonymous: 0,
// nothing written, as a relocated section would be) are dropped: for those
// the file's pages are what the mapping holds, so dropping them changes
// nothing but the resident set.
func dropBinaryPages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	defer f.Close()
	type region struct{ start, end uintptr }
	var drop []region
	var cur *region
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4 {
			// A mapping's header: range perms offset dev inode [path].
			cur = nil
			lo, hi, _ := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil && len(fields) == 6 && fields[5] == exe && !strings.Contains(fields[1], "w") {
				cur = &region{uintptr(start), uintptr(end)}
			}
			continue
		}
		if cur != nil && len(fields) >= 2 && fields[0] == "Anonymous:" {
			if fields[1] == "0" {
				drop = append(drop, *cur)
			}
			cur = nil
		}
	}
	for _, r := range drop {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, unix.MADV_DONTNEED)
	}
}
