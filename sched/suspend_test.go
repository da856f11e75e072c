package sched

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// TestSuspendedHoldsMemoryOnly: the core sees a suspended job's CPUs and
// GPU as free and its memory as held. On a node of 4 cores, 16 GiB and
// one GPU, job 1 (4 cores, 10 GiB, the GPU) runs and is suspended: job 2
// (4 cores, 4 GiB, the GPU) is placed on what it freed, job 3 (1 core,
// 8 GiB) is not (1's memory is still held). Asked to resume, job 1 does
// not while job 2 holds its CPUs and GPU, and does once 2 has ended.
func TestSuspendedHoldsMemoryOnly(t *testing.T) {
	st := state.New()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	idx := uint64(0)
	apply := func(c state.Command) any {
		t.Helper()
		idx++
		c.Time, c.Version = t0.Add(time.Duration(idx)*time.Second), state.SchemaVersion
		v, err := st.Apply(idx, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Kind(), err)
		}
		return v
	}
	capacity := state.Resources{CPUMilli: 4000, Memory: 16 << 30, GPU: 1}
	apply(state.Command{Act: state.Register{Node: &state.Node{Name: "n1", Addr: "10.0.0.1", Capacity: capacity}}})
	submit := func(milli int64, mem int64, gpu float64) uint64 {
		c := state.Container{Host: "main1", Role: state.RoleMain, Idx: 1, KernelID: "k", CPUMilli: milli, Memory: mem, GPU: gpu, State: api.ContainerPending}
		j := &state.Job{Name: "j", Partition: "default", State: api.JobPending, Containers: []state.Container{c}}
		return apply(state.Command{Act: state.Submit{Jobs: []*state.Job{j}}}).([]uint64)[0]
	}
	report := func(id uint64, s api.ContainerState) {
		apply(state.Command{Act: state.Reports{Reports: []state.Report{{Node: "n1", Updates: []state.ContainerUpdate{{JobID: id, Host: "main1", State: s}}}}}})
	}
	running := func(id uint64, gpus []state.GPUShare) {
		apply(state.Command{Act: state.Place{Plan: &state.Plan{Placements: []state.Placement{{JobID: id, Nodes: []string{"n1"}, GPUs: [][]state.GPUShare{gpus}}}}}})
		report(id, api.ContainerRunning)
	}
	whole := []state.GPUShare{{Device: 0, Share: 1}}
	node := core.Node{Name: "n1", Capacity: toCore(capacity), Free: toCore(capacity), Devices: []core.Device{{ID: 0, Free: 1}}}
	now := func() time.Time { return t0.Add(time.Duration(idx) * time.Second) }

	j1 := submit(4000, 10<<30, 1)
	running(j1, whole)
	apply(state.Command{Act: state.Suspend{Job: j1, Reason: "test"}})
	j2 := submit(4000, 4<<30, 1)
	j3 := submit(1000, 8<<30, 0)

	snap := coreSnapshot(st.Snapshot(), []core.Node{node}, now())
	if f := snap.Nodes[0].Free; f.CPUMilli != 4000 || f.GPU != 1 || f.Memory != 6<<30 {
		t.Fatalf("free beside a suspended job: %+v; want its CPUs and GPU free, its memory held", f)
	}
	plan := core.Schedule(snap, now())
	if len(plan.Placements) != 1 || plan.Placements[0].JobID != j2 {
		t.Fatalf("placements %+v: want job %d alone (job %d does not fit the memory left)", plan.Placements, j2, j3)
	}
	running(j2, whole)
	apply(state.Command{Act: state.Resume{Job: j1}})
	if ids := resumable(st.Snapshot(), []core.Node{node}); len(ids) != 0 {
		t.Fatalf("resumable while job %d holds its CPUs and GPU: %v", j2, ids)
	}
	report(j2, api.ContainerExited)
	if ids := resumable(st.Snapshot(), []core.Node{node}); len(ids) != 1 || ids[0] != j1 {
		t.Fatalf("resumable once job %d ended: %v, want [%d]", j2, ids, j1)
	}
	apply(state.Command{Act: state.Resumed{Jobs: []uint64{j1}}})
	snap = coreSnapshot(st.Snapshot(), []core.Node{node}, now())
	if f := snap.Nodes[0].Free; f.CPUMilli != 0 || f.GPU != 0 || f.Memory != 6<<30 {
		t.Errorf("free once resumed: %+v; want job %d's CPUs and GPU taken again", f, j1)
	}
}

// TestPreemptSuspendCycle drives preemption's suspend mode through the
// core and the state, pass by pass, on a node of 4 cores, 16 GiB and one
// GPU. Job v (partition low, mode suspend: 4 cores, 10 GiB, the GPU)
// runs; job p (partition high: 4 cores, 4 GiB, the GPU) preempts it, and
// job q (high: 1 core, 8 GiB) does not, since a suspended job keeps its
// memory. The plan's own entry suspends v; no resume is found while p
// waits to be placed, p is placed on what v lent, v resumes once p has
// ended.
func TestPreemptSuspendCycle(t *testing.T) {
	st := state.New()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	idx := uint64(0)
	apply := func(c state.Command) any {
		t.Helper()
		idx++
		c.Time, c.Version = t0.Add(time.Duration(idx)*time.Second), state.SchemaVersion
		v, err := st.Apply(idx, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Kind(), err)
		}
		return v
	}
	capacity := state.Resources{CPUMilli: 4000, Memory: 16 << 30, GPU: 1}
	apply(state.Command{Act: state.Register{Node: &state.Node{Name: "n1", Addr: "10.0.0.1", Capacity: capacity}}})
	submit := func(part string, milli int64, mem int64, gpu float64) uint64 {
		c := state.Container{Host: "main1", Role: state.RoleMain, Idx: 1, KernelID: "k", CPUMilli: milli, Memory: mem, GPU: gpu, State: api.ContainerPending}
		j := &state.Job{Name: "j", Partition: part, State: api.JobPending, Containers: []state.Container{c}}
		return apply(state.Command{Act: state.Submit{Jobs: []*state.Job{j}}}).([]uint64)[0]
	}
	report := func(id uint64, s api.ContainerState) {
		apply(state.Command{Act: state.Reports{Reports: []state.Report{{Node: "n1", Updates: []state.ContainerUpdate{{JobID: id, Host: "main1", State: s}}}}}})
	}
	node := core.Node{Name: "n1", Capacity: toCore(capacity), Free: toCore(capacity), Devices: []core.Device{{ID: 0, Free: 1}}}
	now := func() time.Time { return t0.Add(time.Duration(idx) * time.Second) }
	schedule := func() core.Plan {
		snap := coreSnapshot(st.Snapshot(), []core.Node{node}, now())
		snap.Partitions = map[string]core.Partition{"low": {PreemptMode: core.PreemptSuspend}, "high": {Tier: 1}}
		return core.Schedule(snap, now())
	}

	v := submit("low", 4000, 10<<30, 1)
	apply(state.Command{Act: state.Place{Plan: &state.Plan{Placements: []state.Placement{{JobID: v, Nodes: []string{"n1"},
		GPUs: [][]state.GPUShare{{{Device: 0, Share: 1}}}}}}}})
	report(v, api.ContainerRunning)
	q := submit("high", 1000, 8<<30, 0)
	if plan := schedule(); len(plan.Placements) != 0 || len(plan.Preemptions) != 0 {
		t.Fatalf("job %d alone: placements %+v, preemptions %+v; want none (a suspended job keeps its memory)", q, plan.Placements, plan.Preemptions)
	}
	p := submit("high", 4000, 4<<30, 1)

	plan := schedule()
	if len(plan.Placements) != 0 || len(plan.Preemptions) != 1 || plan.Preemptions[0] != (core.Preemption{Victim: v, By: p, Mode: core.PreemptSuspend}) {
		t.Fatalf("first pass: placements %+v, preemptions %+v; want job %d to suspend job %d only (job %d needs memory a suspension keeps)",
			plan.Placements, plan.Preemptions, p, v, q)
	}
	apply(state.Command{Act: state.Place{Plan: fromCore(plan)}})
	j := st.Snapshot().Job(v)
	if j.Suspended == nil || !j.Suspended.ResumeWanted || j.Preempt == nil || j.Preempt.At != j.Suspended.Since || j.KillWanted ||
		j.Suspended.Reason != reason.Preempted || j.State != api.JobRunning {
		t.Fatalf("victim after the plan's entry: %s kill %v suspended %+v preempt %+v; want suspended in that entry, to resume by itself",
			j.State, j.KillWanted, j.Suspended, j.Preempt)
	}
	if ids := resumable(st.Snapshot(), []core.Node{node}); len(ids) != 0 {
		t.Fatalf("resumable while its preemptor %d is still pending: %v", p, ids)
	}

	plan = schedule()
	if len(plan.Placements) != 1 || plan.Placements[0].JobID != p || len(plan.Preemptions) != 0 {
		t.Fatalf("second pass: placements %+v, preemptions %+v; want job %d placed on what job %d lent", plan.Placements, plan.Preemptions, p, v)
	}
	apply(state.Command{Act: state.Place{Plan: fromCore(plan)}})
	report(p, api.ContainerRunning)
	if ids := resumable(st.Snapshot(), []core.Node{node}); len(ids) != 0 {
		t.Fatalf("resumable while job %d holds its CPUs and GPU: %v", p, ids)
	}
	report(p, api.ContainerExited)
	ids := resumable(st.Snapshot(), []core.Node{node})
	if len(ids) != 1 || ids[0] != v {
		t.Fatalf("resumable once job %d ended: %v, want [%d]", p, ids, v)
	}
	apply(state.Command{Act: state.Resumed{Jobs: ids}})
	j = st.Snapshot().Job(v)
	if j.Suspended != nil || j.Preempt.Resumed.IsZero() || j.Stopping() != 0 || j.State != api.JobRunning {
		t.Errorf("victim after its resume: %s suspended %+v preempt %+v stopping %d; want running, its preemption over",
			j.State, j.Suspended, j.Preempt, j.Stopping())
	}
}
