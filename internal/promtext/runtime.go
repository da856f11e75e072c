package promtext

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// goSeries are the go_* series WriteGo writes from runtime/metrics, under
// the names of the Go client's collector (its go_memstats_* set): each
// value is the sum of the runtime metrics named.
var goSeries = []struct {
	name string
	typ  Type
	help string
	sum  []string
}{
	{"go_gc_gogc_percent", GaugeType, "The GOGC setting: the heap's growth, in percent, that starts a collection.", []string{"/gc/gogc:percent"}},
	{"go_gc_gomemlimit_bytes", GaugeType, "The GOMEMLIMIT setting: the soft limit on the Go runtime's memory.", []string{"/gc/gomemlimit:bytes"}},
	{"go_memstats_alloc_bytes", GaugeType, "Bytes of heap objects allocated and not yet freed.", []string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_alloc_bytes_total", CounterType, "Bytes allocated on the heap since the start, freed or not.", []string{"/gc/heap/allocs:bytes"}},
	{"go_memstats_buck_hash_sys_bytes", GaugeType, "Bytes of the profiling bucket hash table.", []string{"/memory/classes/profiling/buckets:bytes"}},
	{"go_memstats_frees_total", CounterType, "Heap objects freed since the start.", []string{"/gc/heap/frees:objects", "/gc/heap/tiny/allocs:objects"}},
	{"go_memstats_gc_sys_bytes", GaugeType, "Bytes of the garbage collector's metadata.", []string{"/memory/classes/metadata/other:bytes"}},
	{"go_memstats_heap_alloc_bytes", GaugeType, "Bytes of heap objects allocated and not yet freed, as go_memstats_alloc_bytes.", []string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_heap_idle_bytes", GaugeType, "Heap bytes holding no object: free or released to the system.", []string{"/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{"go_memstats_heap_inuse_bytes", GaugeType, "Heap bytes in spans that hold objects.", []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}},
	{"go_memstats_heap_objects", GaugeType, "Heap objects allocated and not yet freed.", []string{"/gc/heap/objects:objects"}},
	{"go_memstats_heap_released_bytes", GaugeType, "Heap bytes released to the system.", []string{"/memory/classes/heap/released:bytes"}},
	{"go_memstats_heap_sys_bytes", GaugeType, "Heap bytes obtained from the system.", []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{"go_memstats_mallocs_total", CounterType, "Heap objects allocated since the start.", []string{"/gc/heap/allocs:objects", "/gc/heap/tiny/allocs:objects"}},
	{"go_memstats_mcache_inuse_bytes", GaugeType, "Bytes of mcache structures in use.", []string{"/memory/classes/metadata/mcache/inuse:bytes"}},
	{"go_memstats_mcache_sys_bytes", GaugeType, "Bytes of mcache structures obtained from the system.", []string{"/memory/classes/metadata/mcache/inuse:bytes", "/memory/classes/metadata/mcache/free:bytes"}},
	{"go_memstats_mspan_inuse_bytes", GaugeType, "Bytes of mspan structures in use.", []string{"/memory/classes/metadata/mspan/inuse:bytes"}},
	{"go_memstats_mspan_sys_bytes", GaugeType, "Bytes of mspan structures obtained from the system.", []string{"/memory/classes/metadata/mspan/inuse:bytes", "/memory/classes/metadata/mspan/free:bytes"}},
	{"go_memstats_next_gc_bytes", GaugeType, "Heap size at which the next collection starts.", []string{"/gc/heap/goal:bytes"}},
	{"go_memstats_other_sys_bytes", GaugeType, "Bytes of other runtime allocations.", []string{"/memory/classes/other:bytes"}},
	{"go_memstats_stack_inuse_bytes", GaugeType, "Bytes of goroutine stacks in use.", []string{"/memory/classes/heap/stacks:bytes"}},
	{"go_memstats_stack_sys_bytes", GaugeType, "Bytes of stacks obtained from the system, goroutines' and the system threads'.", []string{"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes"}},
	{"go_memstats_sys_bytes", GaugeType, "Bytes the Go runtime obtained from the system.", []string{"/memory/classes/total:bytes"}},
	{"go_sched_gomaxprocs_threads", GaugeType, "The GOMAXPROCS setting: threads that may run Go code at once.", []string{"/sched/gomaxprocs:threads"}},
}

// WriteGo writes the Go runtime's series: goroutines, threads, the
// version (go_info), garbage collection pauses (go_gc_duration_seconds,
// a summary) and the go_memstats_* memory figures, read without stopping
// the world except for the pauses' quantiles.
func WriteGo(w *Writer) {
	w.Gauge("go_goroutines", "Goroutines that exist now.", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	w.Gauge("go_threads", "Operating system threads created.", float64(threads))
	w.Family("go_info", GaugeType, "The Go version the binary was built with.")
	w.Sample(1, Label{"version", runtime.Version()})

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	w.Family("go_gc_duration_seconds", SummaryType, "Stop-the-world pauses of garbage collections, in seconds (quantiles of the last 256).")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		w.Sample(gc.PauseQuantiles[i].Seconds(), Label{"quantile", q})
	}
	w.SuffixSample("_sum", gc.PauseTotal.Seconds())
	w.SuffixSample("_count", float64(gc.NumGC))
	last := 0.0
	if !gc.LastGC.IsZero() {
		last = float64(gc.LastGC.UnixNano()) / 1e9
	}
	w.Gauge("go_memstats_last_gc_time_seconds", "Time of the last garbage collection, in seconds since 1970.", last)

	index := map[string]int{}
	var samples []metrics.Sample
	for _, s := range goSeries {
		for _, n := range s.sum {
			if _, ok := index[n]; !ok {
				index[n] = len(samples)
				samples = append(samples, metrics.Sample{Name: n})
			}
		}
	}
	metrics.Read(samples)
	for _, s := range goSeries {
		v, ok := 0.0, true
		for _, n := range s.sum {
			switch x := samples[index[n]].Value; x.Kind() {
			case metrics.KindUint64:
				v += float64(x.Uint64())
			case metrics.KindFloat64:
				v += x.Float64()
			default: // not in this Go version
				ok = false
			}
		}
		if ok {
			w.Family(s.name, s.typ, s.help)
			w.Sample(v)
		}
	}
}
