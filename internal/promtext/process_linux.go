package promtext

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"

	"github.com/troupe-hpc/troupe/internal/procfs"
)

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

// WriteProcess writes the process_* series of the calling process from
// /proc/self and its resource limits: CPU time, resident and virtual
// memory, open and maximum file descriptors, the virtual memory limit and
// the start time. A series whose source cannot be read is left out.
func WriteProcess(w *Writer) {
	if st, err := procfs.Self(); err == nil {
		w.Counter("process_cpu_seconds_total", "User and system CPU time the process spent, in seconds.", float64(st.UTime+st.STime)/userHZ)
		w.Gauge("process_resident_memory_bytes", "Resident memory of the process, in bytes.", float64(st.RSS*uint64(os.Getpagesize())))
		w.Gauge("process_virtual_memory_bytes", "Virtual memory of the process, in bytes.", float64(st.VSize))
		if boot, err := bootTime(); err == nil {
			w.Gauge("process_start_time_seconds", "Start time of the process, in seconds since 1970.", float64(boot)+float64(st.StartTime)/userHZ)
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
