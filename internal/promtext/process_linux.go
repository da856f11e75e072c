package promtext

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

// WriteProcess writes the process_* series of the calling process from
// /proc/self and its resource limits: CPU time, resident and virtual
// memory, open and maximum file descriptors, the virtual memory limit and
// the start time. A series whose source cannot be read is left out.
func WriteProcess(w *Writer) {
	if st, err := readStat(); err == nil {
		w.Counter("process_cpu_seconds_total", "User and system CPU time the process spent, in seconds.", float64(st.utime+st.stime)/userHZ)
		w.Gauge("process_resident_memory_bytes", "Resident memory of the process, in bytes.", float64(st.rss*uint64(os.Getpagesize())))
		w.Gauge("process_virtual_memory_bytes", "Virtual memory of the process, in bytes.", float64(st.vsize))
		if boot, err := bootTime(); err == nil {
			w.Gauge("process_start_time_seconds", "Start time of the process, in seconds since 1970.", float64(boot)+float64(st.starttime)/userHZ)
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		w.Gauge("process_open_fds", "Open file descriptors of the process.", float64(len(fds)))
	}
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil {
		w.Gauge("process_max_fds", "The process's limit on open file descriptors (RLIMIT_NOFILE).", float64(l.Cur))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &l) == nil {
		w.Gauge("process_virtual_memory_max_bytes", "The process's limit on virtual memory, in bytes (RLIMIT_AS).", float64(l.Cur))
	}
}

// stat is what WriteProcess uses of /proc/self/stat.
type stat struct {
	utime, stime, starttime, vsize, rss uint64
}

func readStat() (stat, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return stat{}, err
	}
	return parseStat(b)
}

// parseStat reads proc(5)'s /proc/pid/stat: the fields after the command
// name in parentheses (which may hold spaces and parentheses itself),
// the first of them field 3, state.
func parseStat(b []byte) (stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, errors.New("/proc/self/stat: no ')' after the command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 22 {
		return stat{}, fmt.Errorf("/proc/self/stat: %d fields, want at least 24", len(f)+2)
	}
	var s stat
	for _, x := range []struct {
		field int
		v     *uint64
	}{{14, &s.utime}, {15, &s.stime}, {22, &s.starttime}, {23, &s.vsize}, {24, &s.rss}} {
		n, err := strconv.ParseUint(string(f[x.field-3]), 10, 64)
		if err != nil {
			return stat{}, fmt.Errorf("/proc/self/stat: field %d: %w", x.field, err)
		}
		*x.v = n
	}
	return s, nil
}

// bootTime is the btime line of /proc/stat: the boot, in seconds since
// 1970.
func bootTime() (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, errors.New("/proc/stat: no btime line")
}
