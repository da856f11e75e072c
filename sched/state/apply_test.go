package state

import (
	"errors"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/jobspec"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// session builds a valid job of n containers: main1, sub1…
func session(n int) *Job {
	j := &Job{Name: "t", Partition: "default", State: api.JobPending}
	for i := 0; i < n; i++ {
		c := jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1, Rank: i,
			Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}}
		if i > 0 {
			c.Host, c.Role, c.Idx = "sub"+string(rune('0'+i)), jobspec.RoleSub, i
		}
		j.Containers = append(j.Containers, newContainer(c, c.Host+"-k"))
	}
	j.SessionID = j.Containers[0].KernelID
	return j
}

type harness struct {
	t   *testing.T
	st  *Store
	idx uint64
}

func (h *harness) apply(c Command) any {
	h.t.Helper()
	h.idx++
	c.Time = t0.Add(time.Duration(h.idx) * time.Second)
	if c.Version == 0 {
		c.Version = SchemaVersion // as the raft log stamps every entry
	}
	v, err := h.st.Apply(h.idx, c)
	if err != nil {
		h.t.Fatalf("apply %s: %v", c.Kind(), err)
	}
	return v
}

func (h *harness) job(id uint64) *Job { return h.st.Snapshot().Job(id) }

func (h *harness) report(node string, id uint64, host string, s api.ContainerState, code int) {
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: node, Updates: []ContainerUpdate{{JobID: id, Host: host, State: s, ExitCode: code}}}}}})
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, st: New()}
	h.apply(Command{Act: Register{Node: &Node{Name: "n1", Addr: "10.0.0.1", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	return h
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name      string
		mainExit  int
		subFails  bool
		wantState api.JobState
		wantCode  int
	}{
		{"main exits 0", 0, false, api.JobCompleted, 0},
		{"main exits 3", 3, false, api.JobFailed, 3},
		{"sub fails to start", 0, true, api.JobFailed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			id := h.apply(Command{Act: Submit{Jobs: []*Job{session(2)}}}).([]uint64)[0]
			if id != 1 || h.job(1).State != api.JobPending {
				t.Fatalf("submitted id %d state %s", id, h.job(1).State)
			}
			h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1", "n1"}}}}}})
			j := h.job(1)
			if j.State != api.JobScheduled || j.Containers[1].NodeAddr != "10.0.0.1" {
				t.Fatalf("after plan: %s, addr %q", j.State, j.Containers[1].NodeAddr)
			}
			if a := h.st.Snapshot().Allocated()["n1"]; a.CPUMilli != 2000 {
				t.Fatalf("allocated %+v, want 2 cpus", a)
			}
			h.report("n1", 1, "main1", api.ContainerPreparing, 0)
			if s := h.job(1).State; s != api.JobPreparing {
				t.Fatalf("state %s, want PREPARING", s)
			}
			h.report("n1", 1, "main1", api.ContainerRunning, 0)
			if tt.subFails {
				h.report("n1", 1, "sub1", api.ContainerFailed, 0)
				if !h.job(1).KillWanted {
					t.Fatal("a failed container must end the session")
				}
				h.report("n1", 1, "main1", api.ContainerKilled, 0)
			} else {
				h.report("n1", 1, "sub1", api.ContainerRunning, 0)
				if j := h.job(1); j.State != api.JobRunning || j.Started.IsZero() {
					t.Fatalf("state %s started %v, want RUNNING", j.State, j.Started)
				}
				h.report("n1", 1, "main1", api.ContainerExited, tt.mainExit)
				if j := h.job(1); !j.KillWanted || j.State.Terminal() {
					t.Fatalf("main1 exit: kill wanted %v state %s", j.KillWanted, j.State)
				}
				h.report("n1", 1, "sub1", api.ContainerKilled, 0)
			}
			j = h.job(1)
			if j.State != tt.wantState || j.ExitCode != tt.wantCode || j.Ended.IsZero() {
				t.Fatalf("end: %s code %d ended %v; want %s code %d", j.State, j.ExitCode, j.Ended, tt.wantState, tt.wantCode)
			}
			if a := h.st.Snapshot().Allocated()["n1"]; a.CPUMilli != 0 {
				t.Fatalf("ended job still holds %+v", a)
			}
		})
	}
}

func TestKill(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})

	if j := h.apply(Command{Act: Kill{Job: JobRef{ID: 2}}}).(*Job); j.State != api.JobCancelled {
		t.Fatalf("pending job killed: %s, want CANCELLED at once", j.State)
	}
	j := h.apply(Command{Act: Kill{Job: JobRef{ID: 1}}}).(*Job)
	if j.State.Terminal() || !j.KillWanted {
		t.Fatalf("placed job killed: %s kill wanted %v; want it to wait for its nodelet", j.State, j.KillWanted)
	}
	h.report("n1", 1, "main1", api.ContainerKilled, 0)
	if s := h.job(1).State; s != api.JobCancelled {
		t.Fatalf("state %s, want CANCELLED", s)
	}
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Act: Kill{Job: JobRef{ID: 1}}}); !errors.Is(err, ErrEnded) {
		t.Fatalf("killing an ended job: %v, want ErrEnded", err)
	}
	if _, err := h.st.Apply(h.idx, Command{Act: Kill{Job: JobRef{ID: 9}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("killing a missing job: %v, want ErrNotFound", err)
	}
}

func TestReportsCannotRewriteHistory(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
	h.report("other-node", 1, "main1", api.ContainerRunning, 0)
	if s := h.job(1).Containers[0].State; s != api.ContainerAssigned {
		t.Fatalf("a node reported on a container it does not hold: %s", s)
	}
	h.report("n1", 1, "main1", api.ContainerExited, 0)
	h.report("n1", 1, "main1", api.ContainerRunning, 0)
	if j := h.job(1); j.State != api.JobCompleted || j.Containers[0].State != api.ContainerExited {
		t.Fatalf("late report revived an ended job: %s/%s", j.State, j.Containers[0].State)
	}
}

func TestDumpRestore(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(3)}}})
	d := h.st.Snapshot().Dump()
	st := New()
	if err := st.Restore(d); err != nil {
		t.Fatal(err)
	}
	v := st.Snapshot()
	idx, _ := v.Index()
	if len(v.Jobs()) != 1 || len(v.Nodes()) != 1 || idx != h.idx || v.LastJobID() != 1 {
		t.Fatalf("restored %d jobs %d nodes index %d", len(v.Jobs()), len(v.Nodes()), idx)
	}
}

func TestSessionNetworks(t *testing.T) {
	h := newHarness(t)
	seen := map[string]bool{}
	for i := 0; i < 300; i++ {
		id := h.apply(Command{Act: Submit{Jobs: []*Job{session(3)}}}).([]uint64)[0]
		j := h.job(id)
		if j.Network == nil || seen[j.Network.Subnet] {
			t.Fatalf("job %d: network %+v (reused or missing)", id, j.Network)
		}
		seen[j.Network.Subnet] = true
		if id == 1 && (j.Network.Subnet != "10.64.0.0/24" || j.Containers[0].Addr != "10.64.0.2" || j.Containers[2].Addr != "10.64.0.4") {
			t.Fatalf("job 1: %+v, addrs %s %s", j.Network, j.Containers[0].Addr, j.Containers[2].Addr)
		}
		if id == 300 && j.Network.Subnet != "10.65.43.0/24" {
			t.Fatalf("job 300: subnet %s", j.Network.Subnet)
		}
	}
}

func TestTimeoutAndOOM(t *testing.T) {
	h := newHarness(t)
	j := session(2)
	j.Walltime = time.Minute
	h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
	h.apply(Command{Act: Submit{Jobs: []*Job{session(2)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1", "n1"}}, {JobID: 2, Nodes: []string{"n1", "n1"}}}}}})
	for _, id := range []uint64{1, 2} {
		h.report("n1", id, "main1", api.ContainerRunning, 0)
		h.report("n1", id, "sub1", api.ContainerRunning, 0)
	}
	started := h.job(1).Started
	if late, next := h.st.Snapshot().Late(started.Add(59 * time.Second)); len(late) != 0 || !next.Equal(started.Add(time.Minute)) {
		t.Fatalf("before the walltime: late %v, next %v", late, next)
	}
	late, _ := h.st.Snapshot().Late(started.Add(time.Minute))
	if len(late) != 1 || late[0] != 1 {
		t.Fatalf("late %v, want [1] (job 2 has no walltime)", late)
	}
	h.apply(Command{Act: Timeout{Jobs: late}})
	if j := h.job(1); !j.KillWanted || !j.TimedOut || j.State.Terminal() {
		t.Fatalf("timed out job: %+v", j)
	}
	h.report("n1", 1, "main1", api.ContainerKilled, 143)
	h.report("n1", 1, "sub1", api.ContainerKilled, 143)
	if j := h.job(1); j.State != api.JobTimeout || j.Reason != "walltime 1m0s exceeded" {
		t.Fatalf("job 1 ended %s (%s), want TIMEOUT", j.State, j.Reason)
	}

	// The kernel kills sub1 of job 2 for memory: the session ends FAILED
	// with the reason.
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{{JobID: 2, Host: "sub1", State: api.ContainerOOM, ExitCode: 137, Message: "out of memory (limit 1GiB)"}}}}}})
	h.report("n1", 2, "main1", api.ContainerKilled, 143)
	if j := h.job(2); j.State != api.JobFailed || j.Reason != "sub1: out of memory (limit 1GiB)" {
		t.Fatalf("job 2 ended %s (%s), want FAILED with the OOM reason", j.State, j.Reason)
	}
}

// A report about an earlier run of a requeued job changes nothing.
func TestStaleRunReportsDropped(t *testing.T) {
	h := newHarness(t)
	j := session(1)
	j.Spec.Requeue = true
	h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
	h.report("n1", 1, "main1", api.ContainerRunning, 0) // run 0
	// n1 fails; the job asks for requeue, goes back to PENDING and is
	// placed again (on n1, back up): run 1.
	h.apply(Command{Act: NodesDown{Down: &NodeDown{Nodes: []string{"n1"}}}})
	if j := h.job(1); j.State != api.JobPending || j.Requeues != 1 {
		t.Fatalf("after the node failure: %s, requeues %d", j.State, j.Requeues)
	}
	h.apply(Command{Act: NodeUp{Node: "n1"}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
	// The old run's nodelet reports its container killed: dropped.
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{{JobID: 1, Host: "main1", Requeues: 0, State: api.ContainerKilled}}}}}})
	if c := h.job(1).Containers[0]; c.State != api.ContainerAssigned {
		t.Fatalf("an earlier run's report moved the new run's container to %s", c.State)
	}
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{{JobID: 1, Host: "main1", Requeues: 1, State: api.ContainerRunning}}}}}})
	if j := h.job(1); j.State != api.JobRunning {
		t.Fatalf("the new run's report: job %s", j.State)
	}
}

// TestStaleRunReportsKeepLiveRun: what a thawed nodelet says of the run
// it held before its node was declared down (its container killed by the
// fence) arrives while the requeued run is RUNNING, on another node or
// on the same one again: it changes nothing, and the live run still ends
// by its own report.
func TestStaleRunReportsKeepLiveRun(t *testing.T) {
	fenced := "killed by the node's fence: no answer from schedd within the lease (nodelet(8), FENCING)"
	for _, c := range []struct {
		name, again string // again: the node run 1 is placed on
		stale       ContainerUpdate
	}{
		{"fence failure, other node", "n2", ContainerUpdate{State: api.ContainerFailed, ExitCode: 137, Message: fenced}},
		{"fence failure, same node", "n1", ContainerUpdate{State: api.ContainerFailed, ExitCode: 137, Message: fenced}},
		{"exit 137, other node", "n2", ContainerUpdate{State: api.ContainerExited, ExitCode: 137}},
		{"exit 137, same node", "n1", ContainerUpdate{State: api.ContainerExited, ExitCode: 137}},
		{"killed, same node", "n1", ContainerUpdate{State: api.ContainerKilled, ExitCode: 143}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(Command{Act: Register{Node: &Node{Name: "n2", Addr: "10.0.0.2", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
			j := session(1)
			j.Spec.Requeue = true
			h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
			h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
			h.report("n1", 1, "main1", api.ContainerRunning, 0) // run 0
			h.apply(Command{Act: NodesDown{Down: &NodeDown{Nodes: []string{"n1"}}}})
			if c.again == "n1" {
				h.apply(Command{Act: NodeUp{Node: "n1"}})
			}
			h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{c.again}}}}}})
			run1 := func(s api.ContainerState, code int) {
				h.apply(Command{Act: Reports{Reports: []Report{Report{Node: c.again, Updates: []ContainerUpdate{{JobID: 1, Host: "main1", Requeues: 1, State: s, ExitCode: code}}}}}})
			}
			run1(api.ContainerRunning, 0)

			stale := c.stale
			stale.JobID, stale.Host, stale.Requeues = 1, "main1", 0
			h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{stale}}}}})
			j = h.job(1)
			if j.State != api.JobRunning || j.Requeues != 1 || j.Reason != "" || j.KillWanted || j.Containers[0].State != api.ContainerRunning {
				t.Fatalf("after run 0's report: job %s (run %d, reason %q, kill %v), container %s; want RUNNING in run 1",
					j.State, j.Requeues, j.Reason, j.KillWanted, j.Containers[0].State)
			}
			run1(api.ContainerExited, 0)
			if j := h.job(1); j.State != api.JobCompleted || j.ExitCode != 0 {
				t.Fatalf("run 1 exited 0: job %s, exit %d; want COMPLETED", j.State, j.ExitCode)
			}
		})
	}
}

func TestHoldRelease(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	held := session(1)
	held.State = api.JobHeld // bsub -H
	h.apply(Command{Act: Submit{Jobs: []*Job{held}}})
	if j := h.job(2); j.State != api.JobHeld || j.Reason != api.ReasonHeld {
		t.Fatalf("submitted held: %s (%s), want HELD (Held)", j.State, j.Reason)
	}

	j := h.apply(Command{Act: Hold{Job: JobRef{ID: 1}}}).(*Job)
	if j.State != api.JobHeld || j.Reason != api.ReasonHeld || h.job(1).State != api.JobHeld {
		t.Fatalf("held: %s (%s), want HELD (Held)", j.State, j.Reason)
	}
	// A plan made before the hold must not place it, nor change its reason.
	h.apply(Command{Act: Place{Plan: &Plan{
		Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}},
		Reasons:    []Reason{{JobID: 2, Reason: api.ReasonResources}},
	}}})
	if j := h.job(1); j.State != api.JobHeld || j.Containers[0].Node != "" {
		t.Fatalf("held job placed: %s on %q", j.State, j.Containers[0].Node)
	}
	if r := h.job(2).Reason; r != api.ReasonHeld {
		t.Fatalf("held job's reason %q, want Held", r)
	}

	refuse := func(c Command, want error, msg string) {
		t.Helper()
		h.idx++
		_, id, _ := requested(c.Act)
		before := h.job(id)
		_, err := h.st.Apply(h.idx, c)
		if !errors.Is(err, want) || (msg != "" && err.Error() != msg) {
			t.Fatalf("%s %d: %v, want %v %q", c.Kind(), id, err, want, msg)
		}
		if before != nil && h.job(before.ID).ModifyIndex != before.ModifyIndex {
			t.Fatalf("refused %s changed job %d", c.Kind(), before.ID)
		}
	}
	refuse(Command{Act: Hold{Job: JobRef{ID: 1}}}, ErrConflict, "job 1 is already held")

	j = h.apply(Command{Act: Release{Job: JobRef{ID: 1}}}).(*Job)
	if j.State != api.JobPending || j.Reason != api.ReasonPriority {
		t.Fatalf("released: %s (%s), want PENDING (Priority)", j.State, j.Reason)
	}
	refuse(Command{Act: Release{Job: JobRef{ID: 1}}}, ErrConflict, "job 1 is PENDING: only held jobs can be released")

	// A held job that also waits for another is released to waiting for
	// it (Dependency, as the pass would say), not to Priority.
	dep := session(1)
	dep.State, dep.DependsOn = api.JobHeld, &Dependency{Conditions: []Condition{{Kind: "done", JobID: 1}}}
	h.apply(Command{Act: Submit{Jobs: []*Job{dep}}})
	if j := h.apply(Command{Act: Release{Job: JobRef{ID: 3}}}).(*Job); j.State != api.JobPending || j.Reason != api.ReasonDependency {
		t.Fatalf("released with a dependency: %s (%s), want PENDING (Dependency)", j.State, j.Reason)
	}

	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
	if s := h.job(1).State; s != api.JobScheduled {
		t.Fatalf("released job not placed: %s", s)
	}
	h.report("n1", 1, "main1", api.ContainerRunning, 0)
	refuse(Command{Act: Hold{Job: JobRef{ID: 1}}}, ErrConflict, "job 1 is RUNNING: only pending jobs can be held")
	refuse(Command{Act: Release{Job: JobRef{ID: 1}}}, ErrConflict, "job 1 is RUNNING: only held jobs can be released")
	refuse(Command{Act: Hold{Job: JobRef{ID: 9}}}, ErrNotFound, "")
	refuse(Command{Act: Release{Job: JobRef{ID: 9}}}, ErrNotFound, "")

	h.apply(Command{Act: Kill{Job: JobRef{ID: 2}}}) // a held job can be killed
	if s := h.job(2).State; s != api.JobCancelled {
		t.Fatalf("killed held job: %s, want CANCELLED", s)
	}
	refuse(Command{Act: Hold{Job: JobRef{ID: 2}}}, ErrEnded, "")
	refuse(Command{Act: Release{Job: JobRef{ID: 2}}}, ErrEnded, "")
}

// A container's routed address (Reach) comes with its running report,
// stays through a report without one, and goes with a requeue: the next
// run's node gives it another.
func TestReachReportedAndRequeued(t *testing.T) {
	h := newHarness(t)
	j := session(1)
	j.Spec.Requeue = true
	h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{{JobID: 1, Host: "main1", State: api.ContainerRunning, Reach: "10.128.1.2"}}}}}})
	h.report("n1", 1, "main1", api.ContainerRunning, 0) // an adopted container's, without it
	if got := h.job(1).Containers[0].Reach; got != "10.128.1.2" {
		t.Fatalf("reach %q after the running reports, want 10.128.1.2", got)
	}
	if jobs := h.st.Snapshot().ReachJobsOfUID(h.job(1).UID); len(jobs) != 1 {
		t.Errorf("ReachJobsOfUID: %d jobs, want 1", len(jobs))
	}
	h.apply(Command{Act: NodesDown{Down: &NodeDown{Nodes: []string{"n1"}}}})
	if j := h.job(1); j.State != api.JobPending || j.Containers[0].Reach != "" {
		t.Fatalf("after the requeue: %s, reach %q", j.State, j.Containers[0].Reach)
	}
	if jobs := h.st.Snapshot().ReachJobsOfUID(h.job(1).UID); len(jobs) != 0 {
		t.Errorf("ReachJobsOfUID after the requeue: %d jobs, want none", len(jobs))
	}
}

// newContainer is c of a job file as admission makes it a row's
// container, pending.
func newContainer(c jobspec.Container, kernelID string) Container {
	return Container{Host: c.Host, Role: c.Role, Idx: c.Idx, Rank: c.Rank, Image: c.Image, Command: c.Command,
		CPUMilli: units.MilliCPU(c.Resources.CPU), Memory: c.Resources.Memory, GPU: c.Resources.GPU,
		KernelID: kernelID, State: lifecycle.ContainerPending}
}
