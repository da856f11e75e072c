package sched

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	promserve "github.com/troupe-hpc/troupe/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// metrics are schedd's Prometheus metrics (schedd --metrics-addr). What
// describes the state (jobs, nodes, fair share, raft) is computed from a
// snapshot at scrape time by stateCollector; only events the state does
// not keep (a pass's duration, placements, a job's queue wait at start,
// the stages of its pipeline) are counted as they happen, on the leader.
type metrics struct {
	reg        *prometheus.Registry
	wait       *prometheus.HistogramVec
	pass       prometheus.Histogram
	placements prometheus.Counter
	entries    *prometheus.CounterVec
	stages     *stageClock // troupe_job_stage_seconds, troupe_job_slot_seconds
	refused    prometheus.Counter
	// exportErrors counts export passes to the accounting store that
	// failed (the next pass tries again).
	exportErrors prometheus.Counter
	// acctConflicts counts ended runs the accounting store refused
	// because it holds another job under their id and run.
	acctConflicts prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "troupe_schedd_queue_wait_seconds",
			Help: "Time from submission to RUNNING of the jobs this server started as leader, by partition.",
			// 1s … ~1.5 days
			Buckets: prometheus.ExponentialBuckets(1, 3, 12),
		}, []string{"partition"}),
		pass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "troupe_schedd_scheduling_pass_duration_seconds",
			Help:    "Duration of a scheduling pass (snapshot to plan, before it is committed).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100µs … ~26s
		}),
		placements: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "troupe_schedd_placements_total",
			Help: "Jobs placed on nodes by committed scheduling passes of this server.",
		}),
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_schedd_raft_entries_total",
			Help: "Raft entries this server committed as leader and the state applied, by command kind (one command each).",
		}, []string{"kind"}),
		stages: newStageClock(),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "troupe_schedd_streams_refused_total",
			Help: "Terminal and /apps streams this server refused past a cap on open streams (per job, per user, in all).",
		}),
		exportErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "troupe_schedd_accounting_export_errors_total",
			Help: "Passes exporting ended jobs to this server's accounting store that failed (each is retried).",
		}),
		acctConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "troupe_schedd_accounting_conflicts_total",
			Help: "Ended runs the accounting store did not take because it holds another job under the same id and run (each logged at ERROR).",
		}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "troupe_schedd_streams_open",
		Help: "Terminal and /apps streams open through this server.",
	}, func() float64 {
		_, _, n := s.streams.Open(-1, 0)
		return float64(n)
	})
	m.reg.MustRegister(m.wait, m.pass, m.placements, m.entries, m.stages.hist, m.stages.slot, m.refused, m.exportErrors, m.acctConflicts, open, stateCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observeStarts records the queue wait of the jobs a report started.
func (m *metrics) observeStarts(res any) {
	started, _ := res.([]state.Started)
	for _, st := range started {
		m.wait.WithLabelValues(st.Partition).Observe(max(st.Wait, 0).Seconds())
	}
}

// MetricsHandler serves the Prometheus metrics (the /metrics endpoint).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// ServeMetrics serves /metrics on addr (plain HTTP, apart from the API)
// until ctx ends; it fails only when addr cannot be listened on.
func (s *Server) ServeMetrics(ctx context.Context, addr string, log *slog.Logger) (net.Addr, error) {
	return promserve.Serve(ctx, addr, s.MetricsHandler(), log.Warn)
}

// stateCollector reports what the state holds at scrape time.
type stateCollector struct{ s *Server }

var (
	descJobs = prometheus.NewDesc("troupe_schedd_jobs",
		"Jobs in the state, by state and partition.", []string{"state", "partition"}, nil)
	descNodes = prometheus.NewDesc("troupe_schedd_nodes",
		"Registered nodes, by state.", []string{"state"}, nil)
	descNodeUp = prometheus.NewDesc("troupe_schedd_node_up",
		"1 when the node is UP, 0 when DOWN.", []string{"node"}, nil)
	descPendingAge = prometheus.NewDesc("troupe_schedd_pending_job_age_max_seconds",
		"Age (since submission) of the oldest PENDING job, by partition and the reason it waits (Priority, Resources, …).",
		[]string{"partition", "reason"}, nil)
	descNodeCPUAllocatable = prometheus.NewDesc("troupe_schedd_node_cpu_allocatable_cores",
		"CPU cores the node offers.", []string{"node"}, nil)
	descNodeCPUAllocated = prometheus.NewDesc("troupe_schedd_node_cpu_allocated_cores",
		"CPU cores held on the node by containers not ended.", []string{"node"}, nil)
	descNodeMemAllocatable = prometheus.NewDesc("troupe_schedd_node_memory_allocatable_bytes",
		"Memory the node offers.", []string{"node"}, nil)
	descNodeMemAllocated = prometheus.NewDesc("troupe_schedd_node_memory_allocated_bytes",
		"Memory held on the node by containers not ended.", []string{"node"}, nil)
	descNodeGPUAllocatable = prometheus.NewDesc("troupe_schedd_node_gpus_allocatable",
		"GPUs the node offers.", []string{"node"}, nil)
	descNodeGPUAllocated = prometheus.NewDesc("troupe_schedd_node_gpus_allocated",
		"GPUs held on the node by containers not ended, fractions summed.", []string{"node"}, nil)
	descFairShare = prometheus.NewDesc("troupe_schedd_fairshare_factor",
		"Fair-share factor (2^(-usage/shares), as badmin fairshare shows it) per account and account/user association.",
		[]string{"account", "user"}, nil)
	descRaftLeader = prometheus.NewDesc("troupe_schedd_raft_is_leader",
		"1 when this server leads the raft cluster (takes writes, schedules), else 0.", nil, nil)
	descRaftApplied = prometheus.NewDesc("troupe_schedd_raft_applied_index",
		"Last raft log index applied to this server's state.", nil, nil)
	descRaftPeers = prometheus.NewDesc("troupe_schedd_raft_peers",
		"Servers in the raft configuration, this one included.", nil, nil)
	descRaftUnreachable = prometheus.NewDesc("troupe_schedd_raft_peers_unreachable",
		"Peers this server, as leader, fails to reach with its heartbeats now (0 on a follower).", nil, nil)
	descExportLag = prometheus.NewDesc("troupe_schedd_accounting_export_lag_seconds",
		"How long ago the oldest ended job not yet written to this server's accounting store ended; 0 when none waits.", nil, nil)
	descDataAvail = prometheus.NewDesc("troupe_schedd_data_dir_avail_bytes",
		"Space available on the data directory's file system (raft log, snapshots, the SQLite accounting store).", nil, nil)
	descDataSize = prometheus.NewDesc("troupe_schedd_data_dir_size_bytes",
		"Size of the data directory's file system.", nil, nil)
	descRaftSchema = prometheus.NewDesc("troupe_schedd_raft_schema",
		"Schema version of the replicated state this server has applied: below the newest it reads while the cluster has peers of the previous release (a rolling upgrade), which the leader keeps writing for.", nil, nil)
)

// jobStates are the states reported per partition even when no job is in
// them, so that a queue emptying shows as 0 and not as a gap.
var jobStates = []api.JobState{api.JobPending, api.JobHeld, api.JobScheduled, api.JobPreparing, api.JobRunning}

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descNodes, descNodeUp, descPendingAge, descNodeCPUAllocatable, descNodeCPUAllocated,
		descNodeMemAllocatable, descNodeMemAllocated, descNodeGPUAllocatable, descNodeGPUAllocated,
		descFairShare, descRaftLeader, descRaftApplied, descRaftPeers, descRaftUnreachable, descExportLag, descDataAvail, descDataSize, descRaftSchema} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	v := s.st.Snapshot()
	gauge := func(d *prometheus.Desc, val float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, val, labels...)
	}
	type key struct{ state, partition string }
	jobs := map[key]int{}
	for _, p := range v.Config().PartitionNames() {
		for _, st := range jobStates {
			jobs[key{string(st), p}] = 0
		}
	}
	type pkey struct{ partition, reason string }
	oldest := map[pkey]time.Time{}
	for _, j := range v.Jobs() {
		if j.Array != nil { // an array's row: its elements count
			jobs[key{string(api.JobPending), j.Partition}] += j.Array.Unmade()
			continue
		}
		jobs[key{string(j.State), j.Partition}]++
		if j.State == api.JobPending {
			k := pkey{j.Partition, j.Reason}
			if t, ok := oldest[k]; !ok || j.Submitted.Before(t) {
				oldest[k] = j.Submitted
			}
		}
	}
	for k, n := range jobs {
		gauge(descJobs, float64(n), k.state, k.partition)
	}
	now := s.cfg.Clock()
	for k, t := range oldest {
		gauge(descPendingAge, max(now.Sub(t), 0).Seconds(), k.partition, k.reason)
	}
	nodes := map[api.NodeState]int{api.NodeUp: 0, api.NodeDown: 0}
	for _, n := range s.Nodes(v) {
		nodes[n.State]++
		up := 0.0
		if n.State == api.NodeUp {
			up = 1
		}
		gauge(descNodeUp, up, n.Name)
		gauge(descNodeCPUAllocatable, float64(n.Capacity.CPUMilli)/1000, n.Name)
		gauge(descNodeCPUAllocated, float64(n.Allocated.CPUMilli)/1000, n.Name)
		gauge(descNodeMemAllocatable, float64(n.Capacity.Memory), n.Name)
		gauge(descNodeMemAllocated, float64(n.Allocated.Memory), n.Name)
		gauge(descNodeGPUAllocatable, n.Capacity.GPU, n.Name)
		gauge(descNodeGPUAllocated, n.Allocated.GPU, n.Name)
	}
	for st, n := range nodes {
		gauge(descNodes, float64(n), string(st))
	}
	for _, r := range FairShare(v).Rows {
		if r.Account == "" && r.User == "" {
			continue // the root
		}
		gauge(descFairShare, r.FairShare, r.Account, r.User)
	}
	leader := 0.0
	if s.raft.IsLeader() {
		leader = 1
	}
	gauge(descRaftLeader, leader)
	gauge(descRaftApplied, float64(s.raft.AppliedIndex()))
	gauge(descRaftPeers, float64(s.raft.Peers()))
	gauge(descRaftUnreachable, float64(s.raft.Unreachable()))
	gauge(descExportLag, s.exp.lag(v, now).Seconds())
	if avail, size, err := promserve.DirSpace(s.cfg.DataDir); err == nil {
		gauge(descDataAvail, avail)
		gauge(descDataSize, size)
	}
	gauge(descRaftSchema, float64(v.Schema()))
}
