package promtext

import (
	"os"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// clientSeries are the families the Go client's default Go and process
// collectors export here, by name.
func clientSeries(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	return byName
}

// leftOut are the client collectors' series WriteGo and WriteProcess do
// not write: the network namespace's byte counts, which the client
// reports as the process's.
var leftOut = map[string]bool{
	"process_network_receive_bytes_total":  true,
	"process_network_transmit_bytes_total": true,
}

// TestSeriesAsGoClient: WriteGo and WriteProcess write the Go client's
// go_* and process_* series, under the same names, types and labels, but
// for those named in leftOut; and nothing it does not.
func TestSeriesAsGoClient(t *testing.T) {
	var w Writer
	WriteGo(&w)
	WriteProcess(&w)
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	ours := parse(t, string(w.Bytes()))
	theirs := clientSeries(t)
	var missing []string
	for name, mf := range theirs {
		o, ok := ours[name]
		switch {
		case !ok && !leftOut[name]:
			missing = append(missing, name)
		case ok && o.GetType() != mf.GetType():
			t.Errorf("%s is a %v, the Go client's a %v", name, o.GetType(), mf.GetType())
		case ok && len(o.Metric) != len(mf.Metric):
			t.Errorf("%s has %d samples, the Go client's %d", name, len(o.Metric), len(mf.Metric))
		case ok:
			for i := range o.Metric {
				if a, b := labels(o.Metric[i]), labels(mf.Metric[i]); len(a) != len(b) || a["version"] != b["version"] {
					t.Errorf("%s labels %v, the Go client's %v", name, a, b)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("not written: %s", strings.Join(missing, " "))
	}
	for name := range ours {
		if theirs[name] == nil {
			t.Errorf("%s is not a series of the Go client", name)
		}
	}
}

func gauge(t *testing.T, mfs map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	mf := mfs[name]
	if mf == nil || len(mf.Metric) != 1 {
		t.Fatalf("no single sample of %s", name)
	}
	if mf.GetType() == dto.MetricType_COUNTER {
		return mf.Metric[0].GetCounter().GetValue()
	}
	return mf.Metric[0].GetGauge().GetValue()
}

// TestProcessValues: the process_* values are this process's, from
// /proc/self and its limits.
func TestProcessValues(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SKIP: process_* series come from Linux's /proc")
	}
	f, err := os.Open("/proc/self/stat") // one more open file, seen below
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Some CPU time, enough to show in /proc/self/stat's clock ticks
	// (10 ms) however loaded the machine: a wall-clock wait may get none.
	for start := time.Now(); cpuTime(t) < 30*time.Millisecond && time.Since(start) < 10*time.Second; {
	}
	var w Writer
	WriteProcess(&w)
	WriteGo(&w)
	mfs := parse(t, string(w.Bytes()))
	now := float64(time.Now().Unix())
	if st := gauge(t, mfs, "process_start_time_seconds"); st > now+1 || st < now-3600 {
		t.Errorf("process_start_time_seconds = %v, now %v: not this test's process", st, now)
	}
	if cpu := gauge(t, mfs, "process_cpu_seconds_total"); cpu <= 0 || cpu > 3600 {
		t.Errorf("process_cpu_seconds_total = %v", cpu)
	}
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, mfs, "process_max_fds"); got != float64(l.Cur) {
		t.Errorf("process_max_fds = %v, want %d", got, l.Cur)
	}
	if fds := gauge(t, mfs, "process_open_fds"); fds < 4 || fds > float64(l.Cur) {
		t.Errorf("process_open_fds = %v, want stdio and the file opened here at least", fds)
	}
	rss, vsz := gauge(t, mfs, "process_resident_memory_bytes"), gauge(t, mfs, "process_virtual_memory_bytes")
	if rss < 1<<20 || vsz < rss {
		t.Errorf("resident %v, virtual %v bytes", rss, vsz)
	}
	if g := gauge(t, mfs, "go_goroutines"); g < 1 {
		t.Errorf("go_goroutines = %v", g)
	}
	if th := gauge(t, mfs, "go_threads"); th < 1 {
		t.Errorf("go_threads = %v", th)
	}
	if h, s := gauge(t, mfs, "go_memstats_heap_alloc_bytes"), gauge(t, mfs, "go_memstats_sys_bytes"); h <= 0 || s < h {
		t.Errorf("heap_alloc %v, sys %v bytes", h, s)
	}
	if p := gauge(t, mfs, "go_sched_gomaxprocs_threads"); p != float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("go_sched_gomaxprocs_threads = %v, want %d", p, runtime.GOMAXPROCS(0))
	}
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
