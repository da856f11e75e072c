package state

import (
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// A requeue keeps the run it ends: its start, its end (the node-down
// entry's time), its nodes and usage; the next run starts afresh.
func TestRequeueKeepsTheRun(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Register{Node: &Node{Name: "n2", Addr: "10.0.0.2", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	j := session(2)
	j.Spec.Requeue = true
	h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1", "n2"}}}}}})
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{{JobID: 1, Host: "main1", State: api.ContainerRunning}}}}}})
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n2", Updates: []ContainerUpdate{{JobID: 1, Host: "sub1", State: api.ContainerRunning}}}}}})
	started := h.job(1).Started
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n2", Updates: []ContainerUpdate{{JobID: 1, Host: "sub1", State: api.ContainerExited, CPUTime: 7 * time.Second, MemPeak: 1 << 20}}}}}})
	h.apply(Command{Act: NodesDown{Down: &NodeDown{Nodes: []string{"n1"}}}})
	downAt := t0.Add(time.Duration(h.idx) * time.Second)

	j = h.job(1)
	if j.State != api.JobPending || j.Requeues != 1 || len(j.Runs) != 1 {
		t.Fatalf("after the node failure: %s, run %d, %d runs kept; want PENDING, run 1, 1 kept", j.State, j.Requeues, len(j.Runs))
	}
	if j.CPUTime != 0 || j.MemPeak != 0 || !j.Started.IsZero() {
		t.Errorf("run 1 starts with run 0's usage or start: cpu %v, mem %d, started %v", j.CPUTime, j.MemPeak, j.Started)
	}
	r := j.Runs[0]
	if !r.Started.Equal(started) || started.IsZero() || !r.Ended.Equal(downAt) || r.CPUTime != 7*time.Second || r.MemPeak != 1<<20 ||
		!strings.Contains(r.Reason, "node n1 failed") {
		t.Errorf("run 0 kept as %+v; want started %v, ended %v, 7s cpu, 1 MiB, why node n1 failed", r, started, downAt)
	}
	if len(r.Containers) != 2 || r.Containers[0].Node != "n1" || r.Containers[0].State != api.ContainerFailed ||
		!strings.Contains(r.Containers[0].Message, "lost") || r.Containers[1].Node != "n2" || r.Containers[1].State != api.ContainerExited ||
		r.Containers[1].Ended.IsZero() {
		t.Errorf("run 0's containers %+v; want main1 lost on n1, sub1 exited on n2", r.Containers)
	}

	// A second requeue keeps run 1 after run 0, apart.
	h.apply(Command{Act: NodeUp{Node: "n1"}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n2", "n1"}}}}}})
	h.apply(Command{Act: NodesDown{Down: &NodeDown{Nodes: []string{"n2"}}}})
	j = h.job(1)
	if len(j.Runs) != 2 || j.Runs[1].Containers[0].Node != "n2" || !j.Runs[1].Started.IsZero() || j.Runs[0].Containers[0].Node != "n1" {
		t.Fatalf("after a second requeue: runs %+v; want run 0 on n1, run 1 (never started) on n2", j.Runs)
	}
}

// A run ends when its node says its containers ended, not when the
// report arrives; a node clock gone wrong cannot end it before it began
// or after the report.
func TestReportedEndTime(t *testing.T) {
	for _, c := range []struct {
		name string
		at   func(started, now time.Time) time.Time
		want func(started, now time.Time) time.Time
	}{
		{"node's time", func(s, _ time.Time) time.Time { return s.Add(3 * time.Second) }, func(s, _ time.Time) time.Time { return s.Add(3 * time.Second) }},
		{"none: arrival", func(_, _ time.Time) time.Time { return time.Time{} }, func(_, n time.Time) time.Time { return n }},
		{"before the start", func(s, _ time.Time) time.Time { return s.Add(-time.Hour) }, func(s, _ time.Time) time.Time { return s }},
		{"after the report", func(_, n time.Time) time.Time { return n.Add(time.Hour) }, func(_, n time.Time) time.Time { return n }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(Command{Act: Submit{Jobs: []*Job{session(2)}}})
			h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1", "n1"}}}}}})
			h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
				{JobID: 1, Host: "main1", State: api.ContainerRunning}, {JobID: 1, Host: "sub1", State: api.ContainerRunning}}}}}})
			started := h.job(1).Started
			for range 10 { // time passes: the node cannot report
				h.apply(Command{Act: NodeUp{Node: "n1"}})
			}
			now := t0.Add(time.Duration(h.idx+1) * time.Second)
			at := c.at(started, now)
			// sub1 ended a second before main1, and is reported after it.
			early := time.Time{}
			if !at.IsZero() {
				early = at.Add(-time.Second)
			}
			h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
				{JobID: 1, Host: "main1", State: api.ContainerExited, At: at}, {JobID: 1, Host: "sub1", State: api.ContainerKilled, At: early}}}}}})
			j := h.job(1)
			if want := c.want(started, now); j.State != api.JobCompleted || !j.Ended.Equal(want) {
				t.Errorf("job %s ended %v (%v after its start); want COMPLETED at %v", j.State, j.Ended, j.Ended.Sub(started), want)
			}
			if j.Containers[0].Ended.IsZero() || j.Containers[0].Ended.After(now) || j.Containers[0].Ended.Before(started) {
				t.Errorf("main1 ended %v, outside its run %v…%v", j.Containers[0].Ended, started, now)
			}
		})
	}
}

// A job whose start and end reach schedd together, late (its node could
// not report meanwhile), runs from when its node started it to when it
// ended, not for no time at all.
func TestReportedStartAndEndTogether(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
	placed := t0.Add(time.Duration(h.idx) * time.Second)
	for range 10 {
		h.apply(Command{Act: NodeUp{Node: "n1"}})
	}
	res := h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
		{JobID: 1, Host: "main1", State: api.ContainerRunning, At: placed.Add(time.Second)},
		{JobID: 1, Host: "main1", State: api.ContainerExited, At: placed.Add(4 * time.Second)}}}}}})
	j := h.job(1)
	if j.State != api.JobCompleted || !j.Started.Equal(placed.Add(time.Second)) || j.Ended.Sub(j.Started) != 3*time.Second {
		t.Errorf("job %s started %v, ran %v; want COMPLETED, started a second after its placement, ran 3s", j.State, j.Started, j.Ended.Sub(j.Started))
	}
	if st, _ := res.([][]Started); len(st) != 1 || len(st[0]) != 1 || st[0][0].JobID != 1 {
		t.Errorf("the report answered started %+v, want job 1", st)
	}
}
