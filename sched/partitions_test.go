package sched

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// fakeClock is a settable controller clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// partitioned is a real controller started with the partitions file src
// (written to a temporary file, whose path it returns), behind HTTP.
func partitioned(t *testing.T, src string, clock *fakeClock) (*Server, *client.Client, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "partitions.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{PartitionsFile: path, ChargeEvery: time.Hour,
		NodeTimeout: 1000 * time.Hour} // the tests move a fake clock by hours; nodes stay up
	if clock != nil {
		// A fixed clock never reaches the end of a pass put off behind
		// a full node: every change passes at once.
		cfg.Clock, cfg.QueuedDefer = clock.Now, -1
	}
	srv, c := clusterWith(t, cfg)
	return srv, c, path
}

const limitsFile = `
default_partition = "cpu"

partition "cpu" {
  nodes            = ["n[1-2]"]
  max_walltime     = "2h"
  default_walltime = "30m"
  max_cluster_size = 4
  allowed_modes    = ["single-node"]
  user_limits {
    max_jobs        = 1
    max_submit_jobs = 3
    max_cpu         = 3
  }
}

partition "gpu" {
  labels           = ["gpu"]
  allowed_accounts = ["vision"]
}

account "vision" {
  users = ["ada"]
}

account "ops" {
  users = ["bob"]
}
`

func submitAs(c *client.Client, user string, s jobspec.Job) (api.SubmitResponse, error) {
	return c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(s), User: user, UID: 1000, GID: 1000})
}

func TestSubmitLimits(t *testing.T) {
	_, c, _ := partitioned(t, limitsFile, nil)
	register(t, c, "n1", 4)
	register(t, c, "n2", 4)
	with := func(f func(*jobspec.Job)) jobspec.Job {
		s := spec(1, jobspec.ModeSingleNode, 1)
		f(&s)
		return s
	}
	tests := []struct {
		name, user string
		spec       jobspec.Job
		want       string
	}{
		{"cluster size", "ada", with(func(s *jobspec.Job) { s.Cluster.Size = 6 }), "cluster size 6 exceeds partition cpu's limit of 4 (max_cluster_size)"},
		{"walltime", "ada", with(func(s *jobspec.Job) { s.Walltime = 3 * time.Hour }), "walltime 3h exceeds partition cpu's limit of 2h (max_walltime)"},
		{"mode", "ada", with(func(s *jobspec.Job) { s.Cluster.Mode = jobspec.ModeMultiNode; s.Cluster.Size = 2 }), "cluster mode multi-node is not allowed in partition cpu; allowed modes: single-node"},
		{"account not allowed", "bob", with(func(s *jobspec.Job) { s.Partition = "gpu" }), "partition gpu does not take jobs of account ops; allowed accounts: vision"},
		{"not a member", "bob", with(func(s *jobspec.Job) { s.Account = "vision" }), `user "bob" is not a member of account "vision"; the user's accounts: ops`},
		{"no account", "eve", with(func(*jobspec.Job) {}), `user "eve" is a member of no account`},
		{"user cpu cap", "ada", with(func(s *jobspec.Job) { s.Resources.CPU = 4 }), "the job needs 4 cpus; partition cpu lets one user hold 3 (user_limits.max_cpu)"},
		{"never fits", "ada", with(func(s *jobspec.Job) { s.Resources.Memory = 20 << 30 }), "can never run in partition cpu"},
		{"unknown partition", "ada", with(func(s *jobspec.Job) { s.Partition = "nope" }), `partition "nope" does not exist; known partitions: cpu, gpu`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := submitAs(c, tt.user, tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("submit: %v\nwant %q", err, tt.want)
			}
		})
	}
	if l, _ := c.Jobs(context.Background(), 0, 0); len(l.Jobs) != 0 {
		t.Fatalf("refused submissions left %d jobs", len(l.Jobs))
	}

	// Accepted: the default partition, the user's default account, the
	// partition's default walltime.
	res, err := submitAs(c, "ada", spec(1, jobspec.ModeSingleNode, 1))
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j.Partition != "cpu" || j.Account != "vision" || j.Walltime != 30*time.Minute {
		t.Fatalf("accepted job: partition %q account %q walltime %v", j.Partition, j.Account, j.Walltime)
	}
	// max_jobs = 1: the next waits with AccountLimit though nodes are free.
	res2, err := submitAs(c, "ada", spec(1, jobspec.ModeSingleNode, 1))
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res2.JobID, func(j api.Job) bool { return j.State == api.JobPending && j.Reason == api.ReasonAccountLimit })
	// Another user is not held back by ada's limit.
	res3, err := submitAs(c, "bob", spec(1, jobspec.ModeSingleNode, 1))
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res3.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	// max_submit_jobs = 3: ada has 2; a third is fine, a fourth refused.
	if _, err := submitAs(c, "ada", spec(1, jobspec.ModeSingleNode, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := submitAs(c, "ada", spec(1, jobspec.ModeSingleNode, 1)); err == nil || !strings.Contains(err.Error(), "already has 3 jobs queued or running in partition cpu, its limit (user_limits.max_submit_jobs 3)") {
		t.Fatalf("fourth submission: %v", err)
	}
}

func TestReconfig(t *testing.T) {
	srv, c, path := partitioned(t, limitsFile, nil)
	ctx := context.Background()
	register(t, c, "n1", 4)
	res, err := submitAs(c, "ada", spec(1, jobspec.ModeSingleNode, 1))
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })

	// A broken edit is refused with file:line:col; the running config stays.
	broken := strings.Replace(limitsFile, `max_cluster_size = 4`, `max_cluster_size = "four"`, 1)
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = c.Reconfig(ctx)
	line := 1 + strings.Count(broken[:strings.Index(broken, `"four"`)], "\n")
	if want := path + ":" + strconv.Itoa(line) + ":22: Incorrect attribute value type"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("broken reconfig: %v\nwant %q", err, want)
	}
	if p := srv.Store().Snapshot().Config().Partition("cpu"); p == nil || p.MaxClusterSize != 4 {
		t.Fatalf("a refused file changed the config: %+v", p)
	}

	// A good edit takes effect at once: a new partition, a lower limit.
	good := strings.Replace(limitsFile, `max_cluster_size = 4`, `max_cluster_size = 2`, 1) + `
partition "debug" {
  nodes = ["n1"]
}
`
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	rr, err := c.Reconfig(ctx)
	if err != nil || strings.Join(rr.Partitions, ",") != "cpu,gpu,debug" {
		t.Fatalf("reconfig: %+v, %v", rr, err)
	}
	if _, err := submitAs(c, "ada", spec(3, jobspec.ModeSingleNode, 1)); err == nil || !strings.Contains(err.Error(), "limit of 2") {
		t.Fatalf("new limit not in force: %v", err)
	}
	pl, err := c.Partitions(ctx)
	if err != nil || len(pl.Partitions) != 3 || pl.Partitions[2].Name != "debug" || strings.Join(pl.Partitions[2].Nodes, ",") != "n1" || !pl.Partitions[0].Default {
		t.Fatalf("partitions: %+v, %v", pl, err)
	}

	// A queued job that the new config no longer takes waits with
	// PartitionLimit (ada's first job holds her one running slot, so this
	// one queues; then the walltime limit drops below it).
	s := spec(1, jobspec.ModeSingleNode, 1)
	s.Walltime = 90 * time.Minute
	res2, err := submitAs(c, "ada", s)
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res2.JobID, func(j api.Job) bool { return j.Reason == api.ReasonAccountLimit })
	if err := os.WriteFile(path, []byte(strings.Replace(good, `max_walltime     = "2h"`, `max_walltime     = "1h"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconfig(ctx); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res2.JobID, func(j api.Job) bool { return j.Reason == api.ReasonPartitionLimit })
}

// TestFairShareOrder: two accounts with equal shares; heavy has used the
// cluster for an hour, light nothing. With one slot free, light's job
// goes first although heavy's was queued earlier.
func TestFairShareOrder(t *testing.T) {
	_, c, run, first, second := fairShareScene(t)
	ctx := context.Background()
	waitJob(t, c, second.JobID, func(j api.Job) bool { return j.State == api.JobPending && j.Reason == api.ReasonResources })

	fs, err := c.FairShare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := map[string]float64{}
	for _, r := range fs.Rows {
		if r.User != "" {
			f[r.User] = r.FairShare
		}
	}
	if !(f["light"] == 1 && f["heavy"] < 0.5) {
		t.Fatalf("fair-share factors %v; rows %+v", f, fs.Rows)
	}

	if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: run.JobID, Host: "main1", State: api.ContainerExited}}}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, second.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j, _, _ := c.Job(ctx, first.JobID, 0, 0); j.State != api.JobPending {
		t.Fatalf("heavy's job is %s; light's should have gone first", j.State)
	}
}

// TestGPUShares: fractional GPU requests get device shares, kept in the
// state for the nodelet; two 0.5s share a device, a 1.0 takes the other.
func TestGPUShares(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	if _, err := c.Register(ctx, api.NodeRegister{Name: "g1", Addr: "127.0.0.1", Runtime: "process",
		Capacity: api.Resources{CPUMilli: 8000, Memory: 16 << 30, GPU: 2}, Labels: []string{"a100"}}); err != nil {
		t.Fatal(err)
	}
	var devs []api.GPUShare
	for _, g := range []float64{0.5, 0.5, 1} {
		s := spec(1, jobspec.ModeSingleNode, 1)
		s.Resources.GPU = g
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(s)})
		if err != nil {
			t.Fatal(err)
		}
		j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
		if len(j.Containers[0].GPUs) != 1 || j.Containers[0].GPUs[0].Share != g {
			t.Fatalf("job of gpu %g got %+v", g, j.Containers[0].GPUs)
		}
		devs = append(devs, j.Containers[0].GPUs[0])
	}
	if devs[0].Device != devs[1].Device || devs[2].Device == devs[0].Device {
		t.Fatalf("device choice %+v: the halves should share one device, the whole one take the other", devs)
	}
	s := spec(1, jobspec.ModeSingleNode, 1)
	s.Resources.GPU = 3
	if _, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(s)}); err == nil || !strings.Contains(err.Error(), "has cpu 8, memory 16GiB and 2 gpus") {
		t.Fatalf("a 3-gpu job on a 2-gpu node: %v", err)
	}
}

// TestEstimatedStart: the job blocked behind a running one holds the
// reservation and shows when it should start (bqueue --start).
func TestEstimatedStart(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	_, c, _ := partitioned(t, `partition "all" {
  nodes = ["*"]
}`, clock)
	ctx := context.Background()
	register(t, c, "n1", 2)
	long := spec(1, jobspec.ModeSingleNode, 2)
	long.Walltime = time.Hour
	a, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(long)})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, a.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: a.JobID, Host: "main1", State: api.ContainerRunning}}}); err != nil {
		t.Fatal(err)
	}
	b, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(long)})
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, c, b.JobID, func(j api.Job) bool { return !j.EstimatedStart.IsZero() && j.Reason == api.ReasonResources })
	if want := clock.Now().Add(time.Hour); !j.EstimatedStart.Equal(want) || j.Reason != api.ReasonResources {
		t.Fatalf("estimated start %v reason %s, want %v Resources", j.EstimatedStart, j.Reason, want)
	}
}

// TestPriorityAndPosition: the pending jobs of two users come back with
// their priority factors and queue positions from the last pass (never
// from the raft log): light, with the better fair share, is first
// although heavy queued earlier.
func TestPriorityAndPosition(t *testing.T) {
	srv, c, run, heavy, light := fairShareScene(t)
	ctx := context.Background()

	// Poll: a pass that ranks both jobs may commit nothing new.
	var (
		h, l api.Job
		err  error
	)
	eventually.NoError(t, 10*time.Second, "queue positions for both jobs", func() error {
		h, _, err = c.Job(ctx, heavy.JobID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, _, err = c.Job(ctx, light.JobID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if h.QueuePosition > 0 && l.QueuePosition > 0 && h.QueueLength == 2 {
			return nil
		}
		return fmt.Errorf("heavy %d of %d, light %d of %d", h.QueuePosition, h.QueueLength, l.QueuePosition, l.QueueLength)
	})
	if l.QueuePosition != 1 || h.QueuePosition != 2 || l.QueueLength != 2 {
		t.Fatalf("positions: light %d of %d, heavy %d of %d; light should be first", l.QueuePosition, l.QueueLength, h.QueuePosition, h.QueueLength)
	}
	for _, j := range []api.Job{h, l} {
		f := j.PriorityFactors
		if f == nil {
			t.Fatalf("job %d has no priority factors", j.ID)
		}
		if sum := f.Age + f.FairShare + f.JobSize + f.Partition + f.Nice; math.Abs(sum-f.Total) > 1e-6 || f.Total != j.Priority {
			t.Fatalf("job %d: factors %+v sum to %v; priority %v", j.ID, *f, sum, j.Priority)
		}
	}
	if !(l.PriorityFactors.FairShare > h.PriorityFactors.FairShare && l.Priority > h.Priority) {
		t.Fatalf("light %+v should outrank heavy %+v on fair share", *l.PriorityFactors, *h.PriorityFactors)
	}
	if h.PriorityFactors.Age <= l.PriorityFactors.Age {
		t.Fatalf("heavy queued first but has age %v ≤ light's %v", h.PriorityFactors.Age, l.PriorityFactors.Age)
	}
	// A running job carries none of it; the replicated state never does.
	if r, _, _ := c.Job(ctx, run.JobID, 0, 0); r.PriorityFactors != nil || r.QueuePosition != 0 || r.Priority != 0 {
		t.Fatalf("running job has priority fields: %+v", r)
	}
	// The row has no such fields (state.Job); its encoding, as raft and
	// snapshots carry it, has none of the view's leader-only names.
	row, err := json.Marshal(srv.st.Snapshot().Job(light.JobID))
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(row, &keys); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"priority", "priority_factors", "queue_position", "queue_length", "estimated_start"} {
		if _, ok := keys[name]; ok {
			t.Fatalf("the replicated row carries %q: %s", name, row)
		}
	}
	// Nor does a snapshot of the whole state, taken while the view shows them.
	dump, err := json.Marshal(srv.st.Snapshot().Dump())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"priority_factors", "queue_position", "queue_length", "estimated_start"} {
		if strings.Contains(string(dump), `"`+name+`"`) {
			t.Fatalf("the snapshot carries %q", name)
		}
	}
}

// fairShareScene is two accounts of equal shares on one 1-cpu node:
// heavy has run a job for an hour (charged; the job still holds the
// node, as run), then heavy queued a job (heavy) and, a second later,
// light did (light).
func fairShareScene(t *testing.T) (srv *Server, c *client.Client, run, heavy, light api.SubmitResponse) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	srv, c, _ = partitioned(t, `
partition "all" {
  nodes            = ["*"]
  default_walltime = "1h"
}
account "a" {
  users = ["heavy"]
}
account "b" {
  users = ["light"]
}
`, clock)
	ctx := context.Background()
	register(t, c, "n1", 1)
	var err error
	if run, err = submitAs(c, "heavy", spec(1, jobspec.ModeSingleNode, 1)); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, run.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: run.JobID, Host: "main1", State: api.ContainerRunning}}}); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	if err := srv.ChargeUsage(ctx); err != nil {
		t.Fatal(err)
	}
	// Both wait for a held gate job, so that they become eligible in one
	// pass: otherwise a pass between the two submits makes heavy's job the
	// head, and the head keeps its reservation (core.Policy.KeepReservations).
	gate, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), User: "heavy", UID: 1000, GID: 1000, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	after := func(user string) (api.SubmitResponse, error) {
		return c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), User: user, UID: 1000, GID: 1000,
			DependsOn: &api.Dependency{Conditions: []api.Condition{{Kind: api.DepEnded, JobID: gate.JobID}}}})
	}
	if heavy, err = after("heavy"); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Second)
	if light, err = after("light"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kill(ctx, gate.JobID); err != nil {
		t.Fatal(err)
	}
	return srv, c, run, heavy, light
}

// TestWalltimeDecidedAtSubmit: a job's walltime is the one in force when
// it was submitted, which its row carries; the scheduler plans with that
// and nothing else. A default_walltime added later gives the job that
// runs without a limit none: backfill does not expect it to end then,
// just as the walltime's enforcement never ends it then.
func TestWalltimeDecidedAtSubmit(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	srv, c, path := partitioned(t, "partition \"all\" {\n  nodes = [\"*\"]\n}\n", clock)
	ctx := context.Background()
	register(t, c, "n1", 2)
	a, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 2))})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, a.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: a.JobID, Host: "main1", State: api.ContainerRunning}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("partition \"all\" {\n  nodes = [\"*\"]\n  default_walltime = \"1h\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconfig(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 2))})
	if err != nil {
		t.Fatal(err)
	}
	if w := srv.Store().Snapshot().Job(a.JobID).Walltime; w != 0 {
		t.Fatalf("job %d, submitted without a default, has walltime %s", a.JobID, w)
	}
	if w := srv.Store().Snapshot().Job(b.JobID).Walltime; w != time.Hour {
		t.Fatalf("job %d, submitted under default_walltime 1h, has walltime %s", b.JobID, w)
	}
	j := waitJob(t, c, b.JobID, func(j api.Job) bool { return !j.EstimatedStart.IsZero() && j.Reason == api.ReasonResources })
	if soon := clock.Now().Add(30 * 24 * time.Hour); j.EstimatedStart.Before(soon) {
		t.Fatalf("job %d behind one without a walltime is expected to start at %v (now %v): the scheduler took a default the running job never had",
			b.JobID, j.EstimatedStart, clock.Now())
	}
}
