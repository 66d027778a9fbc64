package procmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReleaseExecutablePages reclaims the resident pages of the executable's read-only
// mappings (its code and read-only data) with madvise(MADV_PAGEOUT). The kernel
// skips the pages another process maps too (a CLI command of the same binary
// running meanwhile), and a page the process needs again is read back on its next
// use: the cost is a page fault, once. Kernels before 5.4 know no MADV_PAGEOUT:
// the error says so and nothing changes.
func ReleaseExecutablePages() (Released, error) {
	var r Released
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return r, fmt.Errorf("procmem: the executable: %w", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return r, fmt.Errorf("procmem: %w", err)
	}
	if r.Before, err = residentFile(); err != nil {
		return r, err
	}
	for _, m := range executableMappings(maps, st.Ino) {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_PAGEOUT); errno != 0 {
			return r, fmt.Errorf("procmem: madvise(MADV_PAGEOUT) of the executable's pages %#x-%#x: %w", m.start, m.end, errno)
		}
		r.Mappings++
	}
	r.After, err = residentFile()
	return r, err
}

type mapping struct{ start, end uintptr }

// executableMappings reads /proc/self/maps for the mappings of the file with inode
// ino that the process does not write (address perms offset dev inode path).
func executableMappings(maps []byte, ino uint64) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.Contains(f[1], "w") {
			continue
		}
		if n, err := strconv.ParseUint(f[4], 10, 64); err != nil || n != ino {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out
}

// residentFile is RssFile of /proc/self/status, in bytes.
func residentFile() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("procmem: %w", err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("procmem: RssFile %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("procmem: /proc/self/status has no RssFile")
}
