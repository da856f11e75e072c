package core

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/troupe-hpc/troupe/internal/reason"
)

func lic(id uint64, cpu int64, walltime time.Duration, want map[string]int) Job {
	j := gang(id, ModeSingleNode, 1, cpu)
	j.Walltime, j.Licenses = walltime, want
	return j
}

func reasonsOf(p Plan) map[uint64]string {
	out := map[uint64]string{}
	for _, r := range p.Reasons {
		out[r.JobID] = r.Reason
	}
	return out
}

func placedIDs(p Plan) map[uint64]bool {
	out := map[uint64]bool{}
	for _, pl := range p.Placements {
		out[pl.JobID] = true
	}
	return out
}

// TestLicensesNeverExceeded: over passes with many candidates, random
// counts, requests, running jobs and policies, the running jobs never hold
// more of a license than its count, and a job that asks for a license
// the snapshot lacks never starts.
func TestLicensesNeverExceeded(t *testing.T) {
	names := []string{"matlab", "ansys", "abaqus"}
	rapid.Check(t, func(t *rapid.T) {
		counts := map[string]int{}
		for _, n := range names[:2] { // abaqus is never counted
			counts[n] = rapid.IntRange(0, 6).Draw(t, "count")
		}
		pol := Policy{ReservationDepth: rapid.IntRange(0, 3).Draw(t, "depth"),
			KeepReservations: rapid.Bool().Draw(t, "keep"), ShortestFirst: rapid.Bool().Draw(t, "sjf")}
		nodes := []Node{node("a", 16, 64), node("b", 16, 64), node("c", 8, 32)}
		now := time.Unix(1_000_000, 0)
		var queue []Job
		var running []Running
		nJobs := rapid.IntRange(1, 40).Draw(t, "jobs")
		for i := 1; i <= nJobs; i++ {
			want := map[string]int{}
			for _, n := range names {
				if rapid.IntRange(0, 3).Draw(t, "asks") == 0 {
					want[n] = rapid.IntRange(1, 3).Draw(t, "n")
				}
			}
			j := gang(uint64(i), rapid.SampledFrom([]string{ModeSingleNode, ModeMultiNode}).Draw(t, "mode"),
				rapid.IntRange(1, 4).Draw(t, "size"), int64(rapid.IntRange(1, 4).Draw(t, "cpu")))
			j.Walltime = time.Duration(rapid.IntRange(1, 10).Draw(t, "wall")) * time.Hour
			j.Submit = now.Add(-time.Duration(i) * time.Minute)
			if len(want) > 0 {
				j.Licenses = want
			}
			queue = append(queue, j)
		}
		byID := map[uint64]Job{}
		for _, j := range queue {
			byID[j.ID] = j
		}
		for pass := 0; pass < 6 && len(queue) > 0; pass++ {
			s := Snapshot{Nodes: nodes, Queue: queue, Running: running, Policy: pol, Licenses: counts}
			free := map[string]Res{}
			for _, n := range nodes {
				free[n.Name] = n.Capacity
			}
			for _, r := range running {
				for i, n := range r.Nodes {
					free[n] = free[n].Sub(r.Containers[i])
				}
			}
			for i := range s.Nodes {
				s.Nodes[i].Free = free[s.Nodes[i].Name]
			}
			p := Schedule(s, now)
			held := map[string]int{}
			for _, r := range running {
				for n, k := range r.Licenses {
					held[n] += k
				}
			}
			started := placedIDs(p)
			var rest []Job
			for _, j := range queue {
				if !started[j.ID] {
					rest = append(rest, j)
					continue
				}
				for n, k := range j.Licenses {
					held[n] += k
				}
				pl := p.Placements[0]
				for _, x := range p.Placements {
					if x.JobID == j.ID {
						pl = x
					}
				}
				if len(pl.Nodes) != len(j.Containers) {
					t.Fatalf("job %d: a partial gang %v", j.ID, pl.Nodes)
				}
				running = append(running, Running{JobID: j.ID, Start: now, Walltime: j.Walltime,
					Nodes: pl.Nodes, Containers: j.Containers, Licenses: j.Licenses})
			}
			for n, k := range held {
				if k > counts[n] {
					t.Fatalf("pass %d: running jobs hold %d of %s, its count is %d", pass, k, n, counts[n])
				}
			}
			for id, r := range reasonsOf(p) {
				if r == reason.Licenses && covers(freeAfter(counts, running), byID[id].Licenses) {
					t.Fatalf("pass %d: job %d waits Licenses, but %v are free after the pass", pass, id, byID[id].Licenses)
				}
			}
			queue = rest
			// Time moves on: the oldest running job ends.
			now = now.Add(time.Hour)
			if len(running) > 0 {
				running = running[1:]
			}
		}
	})
}

func freeAfter(counts map[string]int, running []Running) map[string]int {
	out := maps.Clone(counts)
	if out == nil {
		out = map[string]int{}
	}
	for _, r := range running {
		for n, k := range r.Licenses {
			out[n] -= k
		}
	}
	return out
}

// TestLicensesWaitAndGang: a job whose licenses are short waits with
// Licenses and takes none; one whose nodes do not fit takes no license
// either (all or none), so a later job gets them.
func TestLicensesWaitAndGang(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	held := Running{JobID: 100, Start: now, Walltime: time.Hour, Nodes: []string{"a"},
		Containers: []Res{{CPUMilli: 1000, Memory: gib}}, Licenses: map[string]int{"matlab": 3}}
	wide := gang(1, ModeMultiNode, 40, 1) // 40 cores: more than the nodes have
	wide.Licenses = map[string]int{"matlab": 2}
	s := Snapshot{
		Nodes:    []Node{node("a", 8, 16), node("b", 8, 16)},
		Running:  []Running{held},
		Licenses: map[string]int{"matlab": 5},
		Queue: []Job{
			wide, // nodes never fit: takes no license
			lic(2, 1, time.Hour, map[string]int{"matlab": 2}), // the last two seats
			lic(3, 1, time.Hour, map[string]int{"matlab": 1}), // none left
			lic(4, 1, time.Hour, map[string]int{"fluent": 1}), // not a license of the site
			lic(5, 1, time.Hour, nil),                         // asks for none
		},
	}
	for _, depth := range []int{0, 1} {
		t.Run(fmt.Sprintf("depth%d", depth), func(t *testing.T) {
			s.Policy = Policy{ReservationDepth: depth}
			p := Schedule(s, now)
			got, why := placedIDs(p), reasonsOf(p)
			if depth == 0 {
				// Strict FIFO: the wide job blocks all behind it.
				if len(got) != 0 || why[1] != reason.Resources || why[2] != reason.Priority {
					t.Fatalf("fifo: placed %v, reasons %v", got, why)
				}
				return
			}
			if got[1] || !got[2] || got[3] || got[4] || !got[5] {
				t.Fatalf("placed %v; want 2 (the seats the wide job did not take) and 5", got)
			}
			if why[3] != reason.Licenses || why[4] != reason.Licenses {
				t.Errorf("reasons %v; want Licenses for 3 and 4", why)
			}
		})
	}
}

// TestLicensesCountLowered: a count lowered below what running jobs hold
// leaves them be and starts nothing that asks for it until it is under.
func TestLicensesCountLowered(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var running []Running
	for i := 0; i < 4; i++ {
		running = append(running, Running{JobID: uint64(100 + i), Start: now, Walltime: time.Duration(i+1) * time.Hour,
			Nodes: []string{"a"}, Containers: []Res{{CPUMilli: 1000, Memory: gib}}, Licenses: map[string]int{"matlab": 1}})
	}
	s := Snapshot{Nodes: []Node{node("a", 16, 64)}, Running: running, Licenses: map[string]int{"matlab": 2},
		Queue: []Job{lic(1, 1, time.Hour, map[string]int{"matlab": 1})}, Policy: Policy{ReservationDepth: 1}}
	p := Schedule(s, now)
	if len(p.Placements) != 0 || reasonsOf(p)[1] != reason.Licenses {
		t.Fatalf("4 held of 2: plan %+v", p)
	}
	// It is expected to start when a seat of the 2 is free: when only
	// one holder is left, the third to end, in 3 hours.
	if len(p.Starts) != 1 || !p.Starts[0].Start.Equal(now.Add(3*time.Hour)) {
		t.Errorf("start estimate %+v, want in 3h", p.Starts)
	}
	s.Running = running[3:] // three ended: 1 held of 2
	if p := Schedule(s, now); !placedIDs(p)[1] {
		t.Fatalf("1 held of 2: job not started: %+v", p)
	}
}

// TestLicensesBackfill: a job waiting for licenses holds a reservation
// at the time they come back; a later job that would run past it with a
// seat it needs waits, one that ends before it backfills, and so does
// one that needs a seat the reservation leaves over.
func TestLicensesBackfill(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	held := Running{JobID: 100, Start: now, Walltime: time.Hour, Nodes: []string{"a"},
		Containers: []Res{{CPUMilli: 1000, Memory: gib}}, Licenses: map[string]int{"matlab": 2}}
	s := Snapshot{
		Nodes:    []Node{node("a", 16, 64), node("b", 16, 64)},
		Running:  []Running{held},
		Licenses: map[string]int{"matlab": 4},
		Policy:   Policy{ReservationDepth: 1},
		Queue: []Job{
			lic(1, 1, 2*time.Hour, map[string]int{"matlab": 4}),    // 2 free: waits for all 4, in 1h
			lic(2, 1, 2*time.Hour, map[string]int{"matlab": 1}),    // would run past 1h with a seat 1 needs
			lic(3, 1, 30*time.Minute, map[string]int{"matlab": 2}), // ends before 1h: backfills
			lic(4, 1, 2*time.Hour, map[string]int{"matlab": 1}),    // no seats left now
		},
	}
	p := Schedule(s, now)
	got, why := placedIDs(p), reasonsOf(p)
	if got[1] || got[2] || !got[3] || got[4] {
		t.Fatalf("placed %v; want 3 only", got)
	}
	if why[1] != reason.Licenses || why[2] != reason.Priority || why[4] != reason.Licenses {
		t.Errorf("reasons %v; want 1 Licenses, 2 Priority, 4 Licenses", why)
	}
	if len(p.Starts) != 1 || p.Starts[0].JobID != 1 || !p.Starts[0].Start.Equal(now.Add(time.Hour)) {
		t.Errorf("start estimates %+v; want job 1 in 1h", p.Starts)
	}
	// With a count of 5 the reservation leaves a seat over at its start:
	// job 2 takes it though it runs past.
	s.Licenses = map[string]int{"matlab": 5}
	s.Queue = s.Queue[:2]
	p = Schedule(s, now)
	if got := placedIDs(p); got[1] || !got[2] {
		t.Fatalf("count 5: placed %v; want 2 (the seat left over) and not 1", got)
	}
}
