package nodelet

import (
	"context"
	"net"
	"strconv"

	promserve "github.com/troupe-hpc/troupe/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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

// metrics are the nodelet's Prometheus metrics (nodelet --metrics-addr).
type metrics struct {
	reg      *prometheus.Registry
	starts   prometheus.Counter
	failures *prometheus.CounterVec
	running  prometheus.Gauge
}

func newMetrics(a *agent) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "troupe_nodelet_container_starts_total",
			Help: "Containers this nodelet started.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_nodelet_container_failures_total",
			Help: "Containers that failed, by reason: start (could not be started), oom (out of memory), exit (non-zero exit code).",
		}, []string{"reason"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "troupe_nodelet_containers_running",
			Help: "Containers running on this node (started or re-attached, not yet ended).",
		}),
	}
	for _, r := range []string{failStart, failOOM, failExit} {
		m.failures.WithLabelValues(r)
	}
	m.reg.MustRegister(m.starts, m.failures, m.running, nodeCollector{a},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// serve serves /metrics on addr until ctx ends; it fails only when addr
// cannot be listened on.
func (m *metrics) serve(ctx context.Context, addr string, log interface{ Warn(string, ...any) }) (net.Addr, error) {
	return promserve.Serve(ctx, addr, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}), log.Warn)
}

// nodeCollector reports what the node offers and what its assignments
// hold, and its GPUs, at scrape time.
type nodeCollector struct{ a *agent }

var (
	descCPUAllocatable = prometheus.NewDesc("troupe_nodelet_cpu_allocatable_cores",
		"CPU cores this node offers to containers.", nil, nil)
	descCPUAllocated = prometheus.NewDesc("troupe_nodelet_cpu_allocated_cores",
		"CPU cores held by the containers schedd assigns to this node.", nil, nil)
	descMemAllocatable = prometheus.NewDesc("troupe_nodelet_memory_allocatable_bytes",
		"Memory this node offers to containers.", nil, nil)
	descMemAllocated = prometheus.NewDesc("troupe_nodelet_memory_allocated_bytes",
		"Memory held by the containers schedd assigns to this node.", nil, nil)
	descGPUAllocatable = prometheus.NewDesc("troupe_nodelet_gpus_allocatable",
		"GPU devices this node offers.", nil, nil)
	descGPUAllocated = prometheus.NewDesc("troupe_nodelet_gpus_allocated",
		"GPUs held by the containers schedd assigns to this node, fractions summed.", nil, nil)
	descGPUInfo = prometheus.NewDesc("troupe_nodelet_gpu_info",
		"One per GPU device of the node, with its identity.", []string{"gpu", "uuid", "name"}, nil)
	descGPUMemory = prometheus.NewDesc("troupe_nodelet_gpu_memory_bytes",
		"Memory of the GPU device.", []string{"gpu"}, nil)
	descGPUShare = prometheus.NewDesc("troupe_nodelet_gpu_allocated_ratio",
		"Share of the GPU device held by assigned containers (1 is the whole device).", []string{"gpu"}, nil)
	descGPUUtil = prometheus.NewDesc("troupe_nodelet_gpu_utilization_ratio",
		"GPU utilization over NVML's last sample period (NVML only).", []string{"gpu"}, nil)
	descGPUMemUsed = prometheus.NewDesc("troupe_nodelet_gpu_memory_used_bytes",
		"GPU memory in use (NVML only).", []string{"gpu"}, nil)
)

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCPUAllocatable, descCPUAllocated, descMemAllocatable, descMemAllocated,
		descGPUAllocatable, descGPUAllocated, descGPUInfo, descGPUMemory, descGPUShare, descGPUUtil, descGPUMemUsed} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	a.mu.Lock()
	alloc := allocated(a.last, len(a.gpus))
	a.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descCPUAllocatable, a.cfg.CPU)
	gauge(descCPUAllocated, alloc.cpu)
	gauge(descMemAllocatable, float64(a.cfg.Memory))
	gauge(descMemAllocated, float64(alloc.memory))
	gauge(descGPUAllocatable, float64(len(a.gpus)))
	gauge(descGPUAllocated, alloc.gpus)
	var use map[int]gpu.Use
	if a.cfg.FakeGPUs == 0 && len(a.gpus) > 0 {
		use = gpu.Usage()
	}
	for i, d := range a.gpus {
		idx := strconv.Itoa(d.Index)
		gauge(descGPUInfo, 1, idx, d.UUID, d.Name)
		gauge(descGPUMemory, float64(d.Memory), idx)
		gauge(descGPUShare, alloc.shares[i], idx)
		if u, ok := use[d.Index]; ok {
			gauge(descGPUUtil, u.Utilization, idx)
			gauge(descGPUMemUsed, float64(u.MemoryUsed), idx)
		}
	}
}

// allocation is what a node's assigned containers hold.
type allocation struct {
	cpu    float64
	memory int64
	gpus   float64
	shares []float64 // per device index
}

// allocated sums the resources of the containers in as that have not
// ended.
func allocated(as api.Assignments, devices int) allocation {
	al := allocation{shares: make([]float64, devices)}
	for _, asg := range as.Assignments {
		for _, h := range asg.Hosts {
			c, err := session.Container(asg.Job, h)
			if err != nil || c.State.Ended() {
				continue
			}
			al.cpu += c.Resources.CPU
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
