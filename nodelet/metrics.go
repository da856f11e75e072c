package nodelet

import (
	"context"
	"net"
	"strconv"

	promserve "github.com/troupe-hpc/troupe/internal/metrics"
	"github.com/troupe-hpc/troupe/internal/promtext"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/gpu"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// Failure reasons of troupe_nodelet_container_failures_total.
const (
	failStart = "start" // preparing or starting failed
	failOOM   = "oom"   // the OOM killer ended it
	failExit  = "exit"  // it exited with a non-zero code
)

// metrics are the nodelet's Prometheus metrics (nodelet --metrics-addr),
// written in the text format by internal/promtext: Prometheus' client
// library would run its package initialisers at every start of this
// binary, which is every container's init too.
type metrics struct {
	a        *agent
	starts   promtext.Counter
	failures struct{ start, oom, exit promtext.Counter }
	running  promtext.Gauge
	// fenceKills counts containers the node's fence killed while this
	// nodelet ran (their exit came after the lease ran out).
	fenceKills promtext.Counter
}

func newMetrics(a *agent) *metrics { return &metrics{a: a} }

// failed counts a failure for reason (failStart, failOOM, failExit).
func (m *metrics) failed(reason string) {
	switch reason {
	case failStart:
		m.failures.start.Inc()
	case failOOM:
		m.failures.oom.Inc()
	case failExit:
		m.failures.exit.Inc()
	default:
		panic("nodelet: unknown failure reason " + reason)
	}
}

// serve serves /metrics on addr until ctx ends; it fails only when addr
// cannot be listened on.
func (m *metrics) serve(ctx context.Context, addr string, log interface{ Warn(string, ...any) }) (net.Addr, error) {
	return promserve.Serve(ctx, addr, promtext.Handler(m.write), log.Warn)
}

// write writes the nodelet's metrics: its counters, what the node offers
// and what its assignments hold, its GPUs at scrape time, and the Go
// runtime's and the process's series.
func (m *metrics) write(w *promtext.Writer) {
	w.Counter("troupe_nodelet_container_starts_total", "Containers this nodelet started.", m.starts.Value())
	w.Family("troupe_nodelet_container_failures_total", promtext.CounterType,
		"Containers that failed, by reason: start (could not be started), oom (out of memory), exit (non-zero exit code).")
	w.Sample(m.failures.exit.Value(), promtext.Label{Name: "reason", Value: failExit})
	w.Sample(m.failures.oom.Value(), promtext.Label{Name: "reason", Value: failOOM})
	w.Sample(m.failures.start.Value(), promtext.Label{Name: "reason", Value: failStart})
	w.Gauge("troupe_nodelet_containers_running", "Containers running on this node (started or re-attached, not yet ended).", m.running.Value())

	a := m.a
	w.Counter("troupe_nodelet_fence_kills_total",
		"Containers the node's fence killed because the lease from schedd ran out, as this nodelet saw their end.", m.fenceKills.Value())
	if a.fence != nil {
		left, fenced, lapses := a.fence.status()
		w.Counter("troupe_nodelet_lease_lapses_total",
			"Times the node's lease from schedd ran out (no answer to heartbeats within it): the fence kills the node's containers.", float64(lapses))
		if fenced {
			w.Gauge("troupe_nodelet_lease_remaining_seconds",
				"Time left to the node's lease from schedd; negative once it has run out.", left.Seconds())
		}
	}
	if avail, size, err := promserve.DirSpace(a.cfg.StateDir); err == nil {
		w.Gauge("troupe_nodelet_state_dir_avail_bytes", "Space available to the nodelet on the state directory's file system.", avail)
		w.Gauge("troupe_nodelet_state_dir_size_bytes", "Size of the state directory's file system.", size)
	}
	a.mu.Lock()
	alloc := allocated(a.last, len(a.gpus), a.reports.endedHere)
	a.mu.Unlock()
	w.Gauge("troupe_nodelet_cpu_allocatable_cores", "CPU cores this node offers to containers.", a.cfg.CPU)
	w.Gauge("troupe_nodelet_cpu_allocated_cores", "CPU cores held by the containers schedd assigns to this node.", float64(alloc.milli)/1000)
	w.Gauge("troupe_nodelet_memory_allocatable_bytes", "Memory this node offers to containers.", float64(a.cfg.Memory))
	w.Gauge("troupe_nodelet_memory_allocated_bytes", "Memory held by the containers schedd assigns to this node.", float64(alloc.memory))
	w.Gauge("troupe_nodelet_gpus_allocatable", "GPU devices this node offers.", float64(len(a.gpus)))
	w.Gauge("troupe_nodelet_gpus_allocated", "GPUs held by the containers schedd assigns to this node, fractions summed.", alloc.gpus)
	if len(a.gpus) > 0 {
		writeGPUs(w, a, alloc)
	}
	promtext.WriteGo(w)
	promtext.WriteProcess(w)
}

// writeGPUs writes the per-GPU families, each family's samples together
// as the format asks.
func writeGPUs(w *promtext.Writer, a *agent, alloc allocation) {
	var use map[int]gpu.Use
	if a.cfg.FakeGPUs == 0 {
		use = gpu.Usage()
	}
	idx := func(d gpu.Device) promtext.Label { return promtext.Label{Name: "gpu", Value: strconv.Itoa(d.Index)} }
	w.Family("troupe_nodelet_gpu_info", promtext.GaugeType, "One per GPU device of the node, with its identity.")
	for _, d := range a.gpus {
		w.Sample(1, idx(d), promtext.Label{Name: "name", Value: d.Name}, promtext.Label{Name: "uuid", Value: d.UUID})
	}
	w.Family("troupe_nodelet_gpu_memory_bytes", promtext.GaugeType, "Memory of the GPU device.")
	for _, d := range a.gpus {
		w.Sample(float64(d.Memory), idx(d))
	}
	w.Family("troupe_nodelet_gpu_allocated_ratio", promtext.GaugeType, "Share of the GPU device held by assigned containers (1 is the whole device).")
	for i, d := range a.gpus {
		w.Sample(alloc.shares[i], idx(d))
	}
	if len(use) == 0 {
		return
	}
	w.Family("troupe_nodelet_gpu_utilization_ratio", promtext.GaugeType, "GPU utilization over NVML's last sample period (NVML only).")
	for _, d := range a.gpus {
		if u, ok := use[d.Index]; ok {
			w.Sample(u.Utilization, idx(d))
		}
	}
	w.Family("troupe_nodelet_gpu_memory_used_bytes", promtext.GaugeType, "GPU memory in use (NVML only).")
	for _, d := range a.gpus {
		if u, ok := use[d.Index]; ok {
			w.Sample(float64(u.MemoryUsed), idx(d))
		}
	}
}

// allocation is what a node's assigned containers hold.
type allocation struct {
	milli  int64 // CPU, in millicores
	memory int64
	gpus   float64
	shares []float64 // per device index
}

// allocated sums the resources of the containers in as that have not
// ended, by as or by ended: schedd's answer does not come back with the
// end a node reported itself (state.ownEcho), so the assignments may
// still show a container this node has ended.
func allocated(as api.Assignments, devices int, ended func(key) bool) allocation {
	al := allocation{shares: make([]float64, devices)}
	for _, asg := range as.Assignments {
		for _, h := range asg.Hosts {
			c, err := session.Container(asg.Job, h)
			if err != nil || c.State.Ended() || ended(key{asg.Job.ID, h, asg.Job.Requeues}) {
				continue
			}
			al.milli += c.Milli()
			al.memory += c.Resources.Memory
			for _, s := range c.GPUs {
				al.gpus += s.Share
				if s.Device >= 0 && s.Device < devices {
					al.shares[s.Device] += s.Share
				}
			}
		}
	}
	return al
}
