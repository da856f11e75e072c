package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// DefaultPartition is the partition every node belongs to until
// partitions.hcl says otherwise.
const DefaultPartition = "default"

// ErrInvalid marks a request that can never succeed as sent.
var ErrInvalid = errors.New("invalid request")

// Config sets up a Server.
type Config struct {
	DataDir string // raft log and snapshots
	Logger  *slog.Logger
	// Clock is the controller's time source; tests may fix it. The core
	// never reads it: the loop passes now in.
	Clock func() time.Time
}

// Server is a running controller: state, raft log and scheduler loop.
type Server struct {
	cfg   Config
	log   *slog.Logger
	st    *state.Store
	raft  *raftlog.Log
	mu    sync.Mutex
	seen  map[string]time.Time // node heartbeats: leader-local, not replicated
	kick  chan struct{}
	close sync.Once
}

// Open restores state from the log in cfg.DataDir and starts leading.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	st := state.New()
	rl, err := raftlog.Open(ctx, raftlog.Config{Dir: cfg.DataDir}, st)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, log: cfg.Logger, st: st, raft: rl,
		seen: map[string]time.Time{}, kick: make(chan struct{}, 1)}, nil
}

// Close stops raft. Call after Run has returned.
func (s *Server) Close() error {
	var err error
	s.close.Do(func() { err = s.raft.Close() })
	return err
}

// Store exposes the state for read-only use (tests, metrics).
func (s *Server) Store() *state.Store { return s.st }

func (s *Server) apply(ctx context.Context, c state.Command) (any, error) {
	c.Time = s.cfg.Clock().UTC()
	return s.raft.Apply(ctx, c)
}

// Submit validates a submission, fills in what schedd decides (partition,
// session and kernel ids) and commits it.
func (s *Server) Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	j, err := s.newJob(req)
	if err != nil {
		return api.SubmitResponse{}, err
	}
	v, err := s.apply(ctx, state.Command{Kind: state.CmdSubmit, Submit: j})
	if err != nil {
		return api.SubmitResponse{}, err
	}
	s.wake()
	return api.SubmitResponse{JobID: v.(uint64), Partition: j.Partition}, nil
}

func (s *Server) newJob(req api.SubmitRequest) (*api.Job, error) {
	spec := req.Spec
	if diags := spec.Validate(); diags.HasErrors() {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.ReplaceAll(strings.TrimSpace(jobspec.FormatDiagnostics(diags)), "\n", "; "))
	}
	part := spec.Partition
	if part == "" {
		part = DefaultPartition
	}
	if part != DefaultPartition {
		return nil, fmt.Errorf("%w: partition %q does not exist; known partitions: %s", ErrInvalid, part, DefaultPartition)
	}
	cs := spec.Containers()
	if len(cs) == 0 {
		return nil, fmt.Errorf("%w: the job has no containers", ErrInvalid)
	}
	j := &api.Job{
		Name: spec.Name, User: req.User, UID: req.UID, GID: req.GID, Cwd: req.Cwd,
		Partition: part, Spec: spec, State: api.JobPending, Reason: api.ReasonPriority,
	}
	for _, c := range cs {
		j.Containers = append(j.Containers, api.Container{Container: c, KernelID: uuid.NewString(), State: api.ContainerPending})
	}
	j.SessionID = j.Containers[0].KernelID
	nodes := s.coreNodes(s.st.Snapshot())
	if len(nodes) > 0 && !core.CanEverFit(nodes, coreJob(j)) {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, neverFits(j, nodes))
	}
	return j, nil
}

func neverFits(j *api.Job, nodes []core.Node) string {
	var big core.Node
	for _, n := range nodes {
		if n.Capacity.CPUMilli > big.Capacity.CPUMilli {
			big = n
		}
	}
	r := j.Spec.Resources
	return fmt.Sprintf("job can never run in partition %s: %d × (cpu %g, memory %s) %s does not fit; the largest node, %s, has cpu %g and memory %s",
		j.Partition, len(j.Containers), r.CPU, humanBytes(r.Memory), j.Spec.Cluster.Mode,
		big.Name, float64(big.Capacity.CPUMilli)/1000, humanBytes(big.Capacity.Memory))
}

func humanBytes(b int64) string {
	const gib, mib = 1 << 30, 1 << 20
	if b%gib == 0 {
		return fmt.Sprintf("%dGiB", b/gib)
	}
	return fmt.Sprintf("%dMiB", b/mib)
}

// Kill cancels a job: a pending one at once, a placed one once its
// nodelets have stopped its containers.
func (s *Server) Kill(ctx context.Context, id uint64) (*api.Job, error) {
	v, err := s.apply(ctx, state.Command{Kind: state.CmdKill, Kill: id})
	if err != nil {
		return nil, err
	}
	s.wake()
	return v.(*api.Job), nil
}

// Register records a nodelet and its capacity.
func (s *Server) Register(ctx context.Context, reg api.NodeRegister) (*api.Node, error) {
	if reg.Name == "" || reg.Capacity.CPUMilli <= 0 || reg.Capacity.Memory <= 0 {
		return nil, fmt.Errorf("%w: a node needs a name, cpu and memory", ErrInvalid)
	}
	n := &api.Node{Name: reg.Name, Addr: reg.Addr, Runtime: reg.Runtime, Capacity: reg.Capacity}
	if _, err := s.apply(ctx, state.Command{Kind: state.CmdRegister, Register: n}); err != nil {
		return nil, err
	}
	s.Heartbeat(reg.Name)
	s.wake()
	return s.st.Snapshot().Node(reg.Name), nil
}

// Heartbeat notes that a node is alive.
func (s *Server) Heartbeat(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[node] = s.cfg.Clock()
	return true
}

// Report commits a nodelet's container updates.
func (s *Server) Report(ctx context.Context, node string, rep api.ContainerReport) error {
	if len(rep.Updates) == 0 {
		return nil
	}
	_, err := s.apply(ctx, state.Command{Kind: state.CmdReport, Report: &state.Report{Node: node, Updates: rep.Updates}})
	s.wake()
	return err
}

// Nodes lists nodes with their derived allocation and last heartbeat.
func (s *Server) Nodes(v *state.Snapshot) []api.Node {
	alloc := v.Allocated()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []api.Node
	for _, n := range v.Nodes() {
		c := *n
		c.Allocated = alloc[n.Name]
		if t, ok := s.seen[n.Name]; ok {
			c.LastHeartbeat = t
		}
		out = append(out, c)
	}
	return out
}

// Assignments lists the jobs with containers on node that are not ended.
func Assignments(v *state.Snapshot, node string) []api.Assignment {
	out := []api.Assignment{}
	for _, j := range v.Jobs() {
		if j.State.Terminal() || j.State == api.JobPending || j.State == api.JobHeld {
			continue
		}
		var hosts []string
		for _, c := range j.Containers {
			if c.Node == node {
				hosts = append(hosts, c.Host)
			}
		}
		if len(hosts) > 0 {
			out = append(out, api.Assignment{Job: *j, Hosts: hosts})
		}
	}
	return out
}

func (s *Server) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// coreNodes is the core's view of the nodes that take work.
func (s *Server) coreNodes(v *state.Snapshot) []core.Node {
	alloc := v.Allocated()
	var out []core.Node
	for _, n := range v.Nodes() {
		if n.State != api.NodeUp {
			continue
		}
		c := toCore(n.Capacity)
		out = append(out, core.Node{Name: n.Name, Capacity: c, Free: c.Sub(toCore(alloc[n.Name]))})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

func toCore(r api.Resources) core.Res {
	return core.Res{CPUMilli: r.CPUMilli, Memory: r.Memory, GPU: r.GPU}
}

func coreJob(j *api.Job) core.Job {
	cj := core.Job{ID: j.ID, Mode: j.Spec.Cluster.Mode, Reason: j.Reason}
	if cj.Mode == "" {
		cj.Mode = jobspec.ModeSingleNode
	}
	for _, c := range j.Containers {
		cj.Containers = append(cj.Containers, toCore(state.ContainerResources(c.Resources.CPU, c.Resources.Memory, c.Resources.GPU)))
	}
	return cj
}
