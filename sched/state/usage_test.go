package state

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/partition"
)

// runJob submits a 1-container job of user/account and starts it.
func (h *harness) runJob(user, account string) uint64 {
	h.t.Helper()
	j := session(1)
	j.User, j.Account = user, account
	id := h.apply(Command{Act: Submit{Jobs: []*Job{j}}}).([]uint64)[0]
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: id, Nodes: []string{"n1"}}}}}})
	h.report("n1", id, "main1", api.ContainerRunning, 0)
	return id
}

// chargeAt charges usage at t0+at.
func (h *harness) chargeAt(at time.Duration) {
	h.t.Helper()
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Time: t0.Add(at), Act: Charge{}}); err != nil {
		h.t.Fatal(err)
	}
}

func usageOf(st *Store, account, user string) float64 {
	for _, u := range st.Snapshot().Usage() {
		if u.Account == account && u.User == user {
			return u.Raw
		}
	}
	return 0
}

func configWith(halfLife time.Duration) *partition.Config {
	c := partition.Default()
	c.HalfLife = halfLife
	c.Billing = partition.Billing{CPU: 1, Memory: 0, GPU: 0}
	return c
}

func TestChargeWithoutDecay(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Configure{Config: configWith(0)}})
	id := h.runJob("ada", "lab") // starts at t0+5s (the harness ticks one second a command)
	started := h.job(id).Started
	h.chargeAt(time.Hour)
	want := t0.Add(time.Hour).Sub(started).Seconds() // 1 cpu × seconds run
	if got := usageOf(h.st, "lab", "ada"); math.Abs(got-want) > 1e-6 {
		t.Fatalf("usage %g, want %g core-seconds", got, want)
	}
	h.chargeAt(2 * time.Hour)
	if got := usageOf(h.st, "lab", "ada"); math.Abs(got-want-3600) > 1e-6 {
		t.Fatalf("after another hour: %g, want %g", got, want+3600)
	}
}

func TestUsageDecays(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Configure{Config: configWith(time.Hour)}})
	id := h.runJob("ada", "lab")
	h.chargeAt(time.Minute)
	h.report("n1", id, "main1", api.ContainerExited, 0) // ends; no further charge
	h.chargeAt(2 * time.Minute)
	before := usageOf(h.st, "lab", "ada")
	if before <= 0 {
		t.Fatalf("no usage charged: %g", before)
	}
	h.chargeAt(2*time.Minute + time.Hour)
	if got := usageOf(h.st, "lab", "ada"); math.Abs(got-before/2) > 1e-9*before {
		t.Fatalf("after one half-life: %g, want %g", got, before/2)
	}
	h.chargeAt(2*time.Minute + 3*time.Hour)
	if got := usageOf(h.st, "lab", "ada"); math.Abs(got-before/8) > 1e-9*before {
		t.Fatalf("after three half-lives: %g, want %g", got, before/8)
	}
}

// TestChargeIndependentOfInterval: charging every minute or once an hour
// gives the same usage (the decay is integrated exactly).
func TestChargeIndependentOfInterval(t *testing.T) {
	run := func(step time.Duration) float64 {
		h := newHarness(t)
		h.apply(Command{Act: Configure{Config: configWith(30 * time.Minute)}})
		h.runJob("ada", "lab")
		for at := step; at <= 2*time.Hour; at += step {
			h.chargeAt(at)
		}
		return usageOf(h.st, "lab", "ada")
	}
	often, seldom := run(time.Minute), run(2*time.Hour)
	if math.Abs(often-seldom) > 1e-6*seldom {
		t.Fatalf("charged every minute %g, once %g", often, seldom)
	}
}

// TestChargeDeterministic: two replicas that apply the same log hold the
// same usage, bit for bit, also through a snapshot and restore.
func TestChargeDeterministic(t *testing.T) {
	var cmds []Command
	cmds = append(cmds, Command{Time: t0, Act: Register{Node: &Node{Name: "n1", Capacity: Resources{CPUMilli: 64000, Memory: 256 << 30}}}})
	cmds = append(cmds, Command{Time: t0, Act: Configure{Config: configWith(7 * 24 * time.Hour)}})
	for i := 0; i < 20; i++ {
		j := session(1 + i%3)
		j.User, j.Account = []string{"ada", "bob", "cy"}[i%3], []string{"lab", "ops"}[i%2]
		at := t0.Add(time.Duration(i) * 7 * time.Minute)
		cmds = append(cmds,
			Command{Time: at, Act: Submit{Jobs: []*Job{j}}},
			Command{Time: at, Act: Place{Plan: &Plan{Placements: []Placement{{JobID: uint64(i + 1), Nodes: make([]string, 1+i%3)}}}}},
			Command{Time: at.Add(3 * time.Minute), Act: Charge{}})
	}
	for i := range cmds {
		if p, ok := cmds[i].Act.(Place); ok {
			for k := range p.Plan.Placements[0].Nodes {
				p.Plan.Placements[0].Nodes[k] = "n1"
			}
		}
	}
	// Every job runs: report all containers running, then some end.
	var more []Command
	for id := uint64(1); id <= 20; id++ {
		var ups []ContainerUpdate
		for k, host := range []string{"main1", "sub1", "sub2"}[:1+(id-1)%3] {
			_ = k
			ups = append(ups, ContainerUpdate{JobID: id, Host: host, State: api.ContainerRunning})
		}
		more = append(more, Command{Time: t0.Add(time.Duration(id) * 8 * time.Minute), Act: Reports{Reports: []Report{Report{Node: "n1", Updates: ups}}}})
		if id%2 == 0 {
			more = append(more, Command{Time: t0.Add(time.Duration(id)*8*time.Minute + time.Hour), Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{{JobID: id, Host: "main1", State: api.ContainerExited}}}}}})
		}
	}
	cmds = append(cmds, more...)
	for k := 1; k <= 10; k++ {
		cmds = append(cmds, Command{Time: t0.Add(4*time.Hour + time.Duration(k)*time.Hour), Act: Charge{}})
	}
	replay := func() *Store {
		st := New()
		for i, c := range cmds {
			// Through JSON, as the raft log carries it.
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var dc Command
			if err := json.Unmarshal(b, &dc); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Apply(uint64(i+1), dc); err != nil {
				t.Fatalf("command %d (%s): %v", i, c.Kind(), err)
			}
		}
		return st
	}
	a, b := replay(), replay()
	ua, ub := a.Snapshot().Usage(), b.Snapshot().Usage()
	if len(ua) < 4 || !reflect.DeepEqual(ua, ub) {
		t.Fatalf("replicas disagree or charged nothing:\n%+v\n%+v", ua, ub)
	}
	restored := New()
	bs, _ := json.Marshal(a.Snapshot().Dump())
	var d Dump
	if err := json.Unmarshal(bs, &d); err != nil {
		t.Fatal(err)
	}
	if err := restored.Restore(d); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.Snapshot().Usage(), ua) || !restored.Snapshot().ChargedAt().Equal(a.Snapshot().ChargedAt()) {
		t.Fatal("usage changed through a snapshot")
	}
	if restored.Snapshot().Config().HalfLife != 7*24*time.Hour {
		t.Fatal("config lost through a snapshot")
	}
}

func TestConfigCommand(t *testing.T) {
	h := newHarness(t)
	if c := h.st.Snapshot().Config(); c.DefaultPartition != partition.DefaultName {
		t.Fatalf("no config: default partition %q", c.DefaultPartition)
	}
	c, diags := partition.Parse("p.hcl", []byte(`partition "gpu" { nodes = ["g[1-2]"] }`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h.apply(Command{Act: Configure{Config: c}})
	got := h.st.Snapshot().Config()
	if got.DefaultPartition != "gpu" || !got.Partition("gpu").Has("g2", nil) {
		t.Fatalf("config in force: %+v", got)
	}
	h.idx++
	bad := &partition.Config{DefaultPartition: "nope"}
	if _, err := h.st.Apply(h.idx, Command{Act: Configure{Config: bad}}); err == nil {
		t.Fatal("an invalid config was applied")
	}
	if h.st.Snapshot().Config().DefaultPartition != "gpu" {
		t.Fatal("a refused config changed the one in force")
	}
}
