package sched

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/sched/fault"
	"github.com/troupe-hpc/troupe/sched/httpapi"

	"github.com/hashicorp/hcl/v2"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/catalog"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/partition"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// DefaultPartition is the partition every node belongs to until
// partitions.hcl says otherwise.
const DefaultPartition = partition.DefaultName

// DefaultChargeEvery is how often the leader charges usage.
const DefaultChargeEvery = time.Minute

// ErrInvalid marks a request that can never succeed as sent.
var ErrInvalid = fault.ErrInvalid

// ErrQueueFull marks a submission refused because its user, or all users
// together, have as many jobs waiting as schedd allows
// (max_queued_per_user, max_queued): it may succeed later, so the API
// answers 429 Too Many Requests (which clients do not retry on their
// own), not 400; the message still reads as an invalid request's.
var ErrQueueFull = fault.ErrQueueFull

// Config sets up a Server.
type Config struct {
	DataDir string // raft log and snapshots
	Logger  *slog.Logger
	// Clock is the controller's time source; tests may fix it. The core
	// never reads it: the loop passes now in.
	Clock func() time.Time
	// PartitionsFile is the partitions.hcl schedd reads at start and on
	// reconfig; "" runs the built-in one-partition configuration.
	PartitionsFile string
	// Images is the cluster's image catalog: a job naming an image by a
	// name it lacks is refused at submit, with the known names. nil lets
	// every name through (the nodes resolve it).
	Images *catalog.Catalog
	// ChargeEvery is how often the leader charges running jobs' usage
	// (default DefaultChargeEvery).
	ChargeEvery time.Duration
	// NodeTimeout is how long a node may stay silent (no heartbeat, no
	// assignments query) before the leader marks it DOWN (default
	// DefaultNodeTimeout).
	NodeTimeout time.Duration
	// QueuedDefer is the longest a change to queued jobs alone (a
	// submit, a hold or release) puts the scheduling pass off after a
	// pass that found the cluster full (loop.go; default
	// DefaultQueuedDefer). Negative: never; every change makes its pass
	// at once, as bsim passes at every event (the replays that compare
	// the two decision for decision).
	QueuedDefer time.Duration
	// JoinToken is the cluster's join token: a nodelet presenting it
	// over TCP may register and gets its own credential. "" refuses
	// registration over TCP except to admins.
	JoinToken string
	// Raft is the replication setup (zero: a lone server).
	Raft raftlog.Config
	// APIAddr is the address clients reach this server's API at (its
	// TCP listener, e.g. https://host:7946): recorded in the state when
	// it leads, so that followers can send clients to it.
	APIAddr string
	// MaxJobInput caps a job's text in bytes (jobspec.Job.InputSize:
	// commands, environment, mounts, paths); 0 is
	// jobspec.DefaultMaxInput. Submit refuses a job above it.
	MaxJobInput int
	// MaxQueuedPerUser caps the jobs one user may have waiting (PENDING
	// or HELD) in all partitions together; 0 is DefaultMaxQueuedPerUser,
	// a negative value unlimited. Submit refuses a job past it.
	MaxQueuedPerUser int
	// MaxQueued caps the jobs all users together may have waiting
	// (PENDING or HELD; a job array counts once); 0 is unlimited.
	// Submit refuses a job past it.
	MaxQueued int
	// MaxQueuedInputPerUser caps the bytes of job text (as MaxJobInput
	// counts it) one user's waiting jobs may hold together; 0 is
	// DefaultMaxQueuedInputPerUser, a negative value unlimited. Submit
	// refuses a job that would pass it.
	MaxQueuedInputPerUser int
	// KeepEnded is how long an ended job stays in the replicated state
	// before it leaves for the accounting store only (default
	// DefaultKeepEnded); an array's element leaves once the store holds
	// it.
	KeepEnded time.Duration
	// ExportEvery is how often ended jobs are exported (default
	// DefaultExportEach).
	ExportEvery time.Duration
	// AccountingDriver is the store's driver ("" or "sqlite", or
	// "postgres"); AccountingPath the SQLite file (default accounting.db
	// in DataDir), AccountingDSN PostgreSQL's data source.
	AccountingDriver string
	AccountingPath   string
	AccountingDSN    string
	// AccountingKeep is how long the store keeps a job after it ended;
	// 0 forever.
	AccountingKeep time.Duration
	// MaxStreamsPerJob and MaxStreamsPerUser cap the terminal (attach)
	// and /apps streams open at once for one job, and opened by one
	// user; 0 is connlimit.DefaultPerJob and DefaultPerUser, a negative
	// value unlimited. MaxStreams caps them for all users together; 0
	// derives it from the limit of open files: a quarter of what the
	// limit leaves beyond FDReserve (each stream holds two connections,
	// the caller's and the nodelet's). Past a cap a stream is refused
	// with 429 (fault.ErrTooMany).
	MaxStreamsPerJob, MaxStreamsPerUser, MaxStreams int
	// FDReserve is the open files kept for the nodes' traffic and
	// schedd's own files; 0 is connlimit.DefaultReserve of the limit.
	FDReserve int
}

// DefaultMaxQueuedPerUser is how many jobs one user may have PENDING or
// HELD at once unless schedd's max_queued_per_user says otherwise.
const DefaultMaxQueuedPerUser = 10000

// DefaultMaxQueuedInputPerUser is how many bytes of job text one user's
// PENDING and HELD jobs may hold together unless schedd's
// max_queued_input_per_user says otherwise: the text of 10,000 jobs of
// 6.5 KiB (a script job holds its script), or of 1,000 at the largest
// max_job_input allows by default. schedd's heap grows by about a job's
// text for each waiting job (more while raft's log and snapshots hold
// copies), so that one user's queue costs it some 64 to 150 MB, not the
// 1.5 GB that 10,000 jobs at max_job_input took.
const DefaultMaxQueuedInputPerUser = 64 << 20

// MaxJobInputLimit is the highest max_job_input schedd takes: a quarter
// of the API's body limit, so that a job at the cap still fits a request.
const MaxJobInputLimit = httpapi.MaxBody / 4

// Server is a running controller: a replica of the state and the roles
// that work on it (roles.go), wired by Open. The roles' methods are the
// Server's: it serves httpapi.Controller through them.
type Server struct {
	*replica
	*lifecycle
	*fleet
	*scheduler
	*ledger
	*sessions
	*access
	*calendar
	close  sync.Once
	config *partition.Config // the partitions config read at start
}

// Open restores state from the log in cfg.DataDir and starts leading.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.ChargeEvery <= 0 {
		cfg.ChargeEvery = DefaultChargeEvery
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = DefaultNodeTimeout
	}
	if cfg.QueuedDefer == 0 {
		cfg.QueuedDefer = DefaultQueuedDefer
	}
	if cfg.MaxJobInput <= 0 {
		cfg.MaxJobInput = jobspec.DefaultMaxInput
	}
	if cfg.MaxJobInput > MaxJobInputLimit {
		return nil, fmt.Errorf("%w: max_job_input %d is above %d bytes, a quarter of the API's request limit", ErrInvalid, cfg.MaxJobInput, MaxJobInputLimit)
	}
	if cfg.MaxQueuedPerUser == 0 {
		cfg.MaxQueuedPerUser = DefaultMaxQueuedPerUser
	}
	if cfg.MaxQueuedInputPerUser == 0 {
		cfg.MaxQueuedInputPerUser = DefaultMaxQueuedInputPerUser
	}
	if cfg.KeepEnded <= 0 {
		cfg.KeepEnded = DefaultKeepEnded
	}
	if cfg.ExportEvery <= 0 {
		cfg.ExportEvery = DefaultExportEach
	}
	if cfg.AccountingPath == "" {
		cfg.AccountingPath = filepath.Join(cfg.DataDir, accounting.FileName)
	}
	pc := partition.Default()
	if cfg.PartitionsFile != "" {
		c, diags := partition.ParseFile(cfg.PartitionsFile)
		if diags.HasErrors() {
			return nil, &ConfigError{Diags: diags}
		}
		pc = c
	}
	st := state.New()
	rcfg := cfg.Raft
	rcfg.Dir = cfg.DataDir
	if rcfg.API == "" {
		rcfg.API = cfg.APIAddr
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	acct, err := openAccounting(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rl, err := raftlog.Open(ctx, rcfg, st)
	if err != nil {
		acct.Close()
		return nil, err
	}
	s := newServer(cfg, st, rl, acct)
	s.config = pc
	if rl.Multi() {
		return s, nil // the leader puts its config in force when it takes office
	}
	if err := s.putConfig(ctx, pc); err != nil {
		rl.Close()
		acct.Close()
		return nil, err
	}
	return s, nil
}

// newServer wires a Server's roles around the state st, its raft log rl
// and the accounting store acct.
func newServer(cfg Config, st *state.Store, rl *raftlog.Log, acct *accounting.Store) *Server {
	r := &replica{cfg: cfg, log: cfg.Logger, st: st, raft: rl, kick: make(chan struct{}, 1)}
	tokens := &access{replica: r}
	nodes := &fleet{replica: r, access: tokens, seen: map[string]time.Time{}, leadSince: cfg.Clock()}
	loop := &scheduler{replica: r, fleet: nodes, starts: map[uint64]time.Time{}}
	books := &ledger{replica: r, acct: acct, exp: exporter{done: map[accounting.Key]bool{}, conflict: map[accounting.Key]bool{}}}
	jobs := &lifecycle{replica: r, loop: loop, ledger: books}
	jobs.reports = groupCommit[state.Report, []state.Started]{commit: jobs.commitReports,
		maxItems: maxReportBatch, maxWeight: maxReportUpdates, weight: func(r state.Report) int { return len(r.Updates) }}
	jobs.submits = groupCommit[*state.Job, state.Submitted]{commit: jobs.commitSubmits, maxItems: maxSubmitGroup}
	s := &Server{replica: r, lifecycle: jobs, fleet: nodes, scheduler: loop, access: tokens,
		ledger:   books,
		sessions: &sessions{replica: r, streams: newStreams(cfg)},
		calendar: &calendar{replica: r}}
	r.metrics = newMetrics(s)
	return s
}

// ConfigError is a partitions file that does not parse or validate.
type ConfigError struct {
	Diags hcl.Diagnostics
}

func (e *ConfigError) Error() string {
	return "partitions file refused: " + strings.TrimSpace(partition.FormatDiagnostics(e.Diags))
}

// Unwrap makes a ConfigError an ErrInvalid for the API.
func (e *ConfigError) Unwrap() error { return ErrInvalid }

// putConfig commits c unless the state already holds the same one.
func (s *Server) putConfig(ctx context.Context, c *partition.Config) error {
	cur := s.st.Snapshot().Config()
	a, err1 := json.Marshal(cur)
	b, err2 := json.Marshal(c)
	if err1 == nil && err2 == nil && bytes.Equal(a, b) {
		return nil
	}
	if _, err := s.apply(ctx, state.Command{Act: state.Configure{Config: c}}); err != nil {
		return fmt.Errorf("committing the partitions config: %w", err)
	}
	s.wake()
	return nil
}

// Reconfig re-reads the partitions file schedd was started with and puts
// it in force on every replica (through raft). A file with errors is
// refused with its diagnostics and the running config stays.
func (s *Server) Reconfig(ctx context.Context) (api.ReconfigResponse, error) {
	if s.cfg.PartitionsFile == "" {
		return api.ReconfigResponse{}, fmt.Errorf("%w: schedd was started without --partitions; there is no file to re-read", ErrInvalid)
	}
	c, diags := partition.ParseFile(s.cfg.PartitionsFile)
	if diags.HasErrors() {
		return api.ReconfigResponse{}, &ConfigError{Diags: diags}
	}
	if err := s.putConfig(ctx, c); err != nil {
		return api.ReconfigResponse{}, err
	}
	res := api.ReconfigResponse{Source: s.cfg.PartitionsFile, Partitions: c.PartitionNames()}
	for _, d := range diags {
		res.Warnings = append(res.Warnings, jobspec.FormatDiagnostic(d))
	}
	res.Warnings = append(res.Warnings, licenseWarnings(s.st.Snapshot(), c)...)
	s.log.Info("partitions reconfigured", "file", s.cfg.PartitionsFile, "partitions", res.Partitions)
	return res, nil
}

// ChargeUsage charges running jobs' usage up to now (the loop calls it
// every ChargeEvery on the leader).
func (s *scheduler) ChargeUsage(ctx context.Context) error {
	_, err := s.apply(ctx, state.Command{Act: state.Charge{}})
	return err
}

// Close stops raft. Call after Run has returned.
func (s *Server) Close() error {
	var err error
	s.close.Do(func() {
		err = s.raft.Close()
		if cerr := s.acct.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Failed is closed when the raft log met an entry it cannot decode (Err
// says which): the state stops before it, and schedd must stop.
func (s *Server) Failed() <-chan struct{} { return s.raft.Failed() }

// Err is why the raft log failed (nil while it has not).
func (s *Server) Err() error { return s.raft.Err() }

// Store exposes the state for read-only use (tests, metrics).
func (s *Server) Store() *state.Store { return s.st }

func (s *replica) apply(ctx context.Context, c state.Command) (any, error) {
	c.Time = s.cfg.Clock().UTC()
	var by string
	if id, ok := caller(ctx); ok {
		by = id.User // a request id is its sender's own (state.Request.By)
	}
	c.Act = state.WithRequest(c.Act, state.Request{ID: httpapi.RequestID(ctx), By: by}) // see httpapi.WithRequestID
	s.restoreMu.RLock()
	v, err := s.raft.Apply(ctx, c)
	s.restoreMu.RUnlock()
	if err == nil {
		s.metrics.entries.WithLabelValues(c.Kind()).Inc()
	}
	if errors.Is(err, raftlog.ErrNotLeader) {
		if api := s.leaderAPI(); api != "" {
			err = fmt.Errorf("%w; the leader serves at %s", err, api)
		}
	}
	return v, err
}

// Submit validates a submission, fills in what schedd decides (partition,
// session and kernel ids) and commits it.
func (s *lifecycle) Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	j, _, err := s.newJob(req, nil)
	if err != nil {
		return api.SubmitResponse{}, err
	}
	out, err := s.submits.do(j)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		return api.SubmitResponse{}, err
	}
	idx, _ := s.st.Snapshot().Index() // the job's entry is applied: idx is at or past it
	return api.SubmitResponse{JobID: out.ID, Partition: j.Partition, Index: idx}, nil
}

// maxSubmitGroup bounds the single submits that share one raft entry
// (a job is a few KB in the log).
const maxSubmitGroup = 128

// commitSubmits commits jobs, single submits that arrived together, as
// one entry (one alone as a CmdSubmit): each is stored or refused on its
// own, as if submitted alone, in the order they arrived.
func (s *lifecycle) commitSubmits(jobs []*state.Job) ([]state.Submitted, error) {
	defer s.wake()
	ctx := context.Background() // raft's own apply timeout bounds it
	if len(jobs) == 1 {
		v, err := s.apply(ctx, state.Command{Act: state.Submit{Jobs: []*state.Job{jobs[0]}}})
		if err != nil {
			return []state.Submitted{{Err: err}}, nil
		}
		return []state.Submitted{{ID: v.([]uint64)[0]}}, nil
	}
	v, err := s.apply(ctx, state.Command{Act: state.Submit{Jobs: jobs, Each: true}})
	if err != nil {
		return nil, err
	}
	out, ok := v.([]state.Submitted)
	if !ok || len(out) != len(jobs) {
		return nil, fmt.Errorf("submits entry answered %T for %d jobs", v, len(jobs))
	}
	return out, nil
}

// SubmitBatch checks each of reqs as Submit does, the jobs ahead of it in
// the batch counted against the queue limits, and commits them all in one
// raft entry (api.SubmitBatch). A refusal names the job by its place.
func (s *lifecycle) SubmitBatch(ctx context.Context, reqs []api.SubmitRequest) ([]api.SubmitResponse, error) {
	switch {
	case len(reqs) == 0:
		return nil, fmt.Errorf("%w: a batch submit needs at least one job", ErrInvalid)
	case len(reqs) > api.MaxSubmitBatch:
		return nil, fmt.Errorf("%w: a batch submit holds at most %d jobs, not %d; send them in several", ErrInvalid, api.MaxSubmitBatch, len(reqs))
	}
	base := httpapi.RequestID(ctx)
	jobs := make([]*state.Job, 0, len(reqs))
	admitted := make([]*admission.Job, 0, len(reqs))
	for i, req := range reqs {
		if req.RequestID == "" && base != "" {
			req.RequestID = fmt.Sprintf("%s/%d", base, i+1)
		}
		j, a, err := s.newJob(req, admitted)
		if err != nil {
			return nil, fmt.Errorf("job %d of %d (%s): %w", i+1, len(reqs), batchName(req), err)
		}
		jobs, admitted = append(jobs, j), append(admitted, a)
	}
	v, err := s.apply(ctx, state.Command{Act: state.Submit{Jobs: jobs}})
	if err != nil {
		return nil, err
	}
	s.wake()
	idx, _ := s.st.Snapshot().Index() // the entry is applied: idx is at or past it
	ids := v.([]uint64)
	out := make([]api.SubmitResponse, len(jobs))
	for i, j := range jobs {
		out[i] = api.SubmitResponse{JobID: ids[i], Partition: j.Partition, Index: idx}
	}
	return out, nil
}

// batchName names a batch's job in a refusal: its source, else its name.
func batchName(req api.SubmitRequest) string {
	if req.Source != "" {
		return req.Source
	}
	if req.Spec.Name != "" {
		return req.Spec.Name
	}
	return "unnamed"
}

// Kill cancels a job: a pending one at once, a placed one once its
// nodelets have stopped its containers.
func (s *lifecycle) Kill(ctx context.Context, id uint64) (*state.Job, error) {
	v, err := s.apply(ctx, state.Command{Act: state.Kill{Job: state.JobRef{ID: id}}})
	if err != nil {
		return nil, err
	}
	s.wake()
	return v.(*state.Job), nil
}

// Register records a nodelet and its capacity.
func (s *fleet) Register(ctx context.Context, reg api.NodeRegister) (*state.Node, error) {
	if err := checkRegister(reg); err != nil {
		return nil, err
	}
	if err := s.checkInstance(s.st.Snapshot(), reg.Name, reg.Instance, "registration"); err != nil {
		return nil, err
	}
	n := &state.Node{Name: reg.Name, Addr: reg.Addr, Runtime: reg.Runtime, OCIRuntime: reg.OCIRuntime, Capacity: state.Resources(reg.Capacity), Labels: reg.Labels,
		Instance: reg.Instance}
	if _, err := s.apply(ctx, state.Command{Act: state.Register{Node: n}}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.seen[reg.Name] = s.cfg.Clock()
	s.mu.Unlock()
	s.wake()
	return s.st.Snapshot().Node(reg.Name), nil
}

// Nodes lists nodes with their derived allocation and last heartbeat.
func (s *fleet) Nodes(v *state.Snapshot) []api.Node {
	alloc, devs := v.Allocated(), v.DeviceUse()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []api.Node
	for _, n := range v.Nodes() {
		c := nodeView(n)
		c.Allocated = resourcesView(alloc[n.Name])
		c.GPUs = nodeGPUs(n.Capacity.GPU, devs[n.Name])
		if t, ok := s.seen[n.Name]; ok {
			c.LastHeartbeat = t
		}
		out = append(out, c)
	}
	return out
}

// nodeGPUs lists a node's whole devices (as placement counts them) with
// the shares held on each; nil without any.
func nodeGPUs(capacity float64, use map[int]*state.DeviceUse) []api.NodeGPU {
	var out []api.NodeGPU
	for d := 0; d < int(math.Floor(capacity+1e-9)); d++ {
		g := api.NodeGPU{Device: d}
		if u := use[d]; u != nil {
			g.Allocated, g.Jobs = math.Min(1, u.Allocated), u.Jobs
		}
		out = append(out, g)
	}
	return out
}

// Assignments lists the jobs with containers on node that are not ended.
func Assignments(v *state.Snapshot, node string) []api.Assignment {
	return AssignmentsAt(v, node, time.Now())
}

// AssignmentsAt is Assignments at now: while the adoption window after
// a restore is open (state.Snapshot.AdoptUntil), a queued job some of
// whose containers the state adopted on node keeps them assigned there,
// so that they run on while its other nodes announce theirs; once it has
// closed, a job still adopting is ended (CmdAdoptEnd).
func AssignmentsAt(v *state.Snapshot, node string, now time.Time) []api.Assignment {
	out := []api.Assignment{}
	cfg := v.Config()
	adopting := now.Before(v.AdoptUntil())
	byUID := map[int][]string{}          // peers, once per user
	for _, j := range v.NodeJobs(node) { // by the node index: this node's live jobs alone
		if (j.State == api.JobPending || j.State == api.JobHeld) && !(adopting && j.Adopting()) {
			continue
		}
		var hosts []string
		for _, c := range j.Containers {
			if c.Node == node {
				hosts = append(hosts, c.Host)
			}
		}
		if len(hosts) > 0 {
			p := cfg.Partition(j.Partition)
			ps, ok := byUID[j.UID]
			if !ok {
				ps = peers(v, j.UID, node)
				byUID[j.UID] = ps
			}
			asg := api.Assignment{Job: assignedJob(j), Hosts: hosts, MaxOutput: p.OutputLimit(), NoEgress: !p.EgressAllowed(),
				Peers: ps}
			if j.Stopping() != 0 && p != nil {
				asg.StopGrace = p.GraceTime
			}
			out = append(out, asg)
		}
	}
	return out
}

// peers are the routed default addresses of user uid's containers on
// other nodes than node (api.Assignment.Peers), sorted.
func peers(v *state.Snapshot, uid int, node string) []string {
	var out []string
	for _, j := range v.ReachJobsOfUID(uid) {
		for _, c := range j.Containers {
			if c.Node != node && c.Reach != "" && !c.State.Ended() {
				out = append(out, c.Reach)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (s *replica) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// maxNodeGPUs bounds the GPUs one node may offer.
const maxNodeGPUs = 64

// checkRegister refuses a registration schedd cannot keep: a node needs
// a name usable in a URL path and a hostname, positive cpu and memory,
// and a GPU count in [0, maxNodeGPUs].
func checkRegister(reg api.NodeRegister) error {
	switch {
	case reg.Name == "" || reg.Capacity.CPUMilli <= 0 || reg.Capacity.Memory <= 0:
		return fmt.Errorf("%w: a node needs a name, cpu and memory", ErrInvalid)
	case len(reg.Name) > 253 || strings.ContainsFunc(reg.Name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_')
	}):
		return fmt.Errorf("%w: node name %q: use letters, digits, '-', '.' and '_' (at most 253)", ErrInvalid, reg.Name)
	case len(reg.OCIRuntime) > 100:
		return fmt.Errorf("%w: node %s: oci_runtime longer than 100 bytes", ErrInvalid, reg.Name)
	case !(reg.Capacity.GPU >= 0 && reg.Capacity.GPU <= maxNodeGPUs):
		return fmt.Errorf("%w: node %s offers %g gpus; a node offers 0 to %d", ErrInvalid, reg.Name, reg.Capacity.GPU, maxNodeGPUs)
	}
	return nil
}
