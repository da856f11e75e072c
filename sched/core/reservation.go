package core

import (
	"slices"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// The reservations stage. A reservation (Snapshot.Reservations; badmin
// reservation create) sets nodes aside for a window: from its start to
// its end they are not there for any job outside it. The core honours one
// through a gate every placement passes (placer.avail, refPlace's open,
// backfill.earliest), on top of the free resources:
//
//   - a job outside the reservation may use a reserved node only if it
//     ends by the window's start (now + walltime ≤ start; a job without a
//     walltime never ends, so it never does) or starts after its end; a
//     job that ends before the start still uses the node, as backfill
//     would;
//   - a job inside it (Job.Reservation) runs only on its nodes and only
//     while its window is open, ending by its end (a job without a
//     walltime is taken to end there); before the window it waits with
//     reason.Reservation, blocking nobody, its start estimate the
//     window's start; a name the snapshot does not hold waits with
//     reason.ReservationDeleted;
//   - a job that would fit now but for a reservation waits with the
//     reservation's name in its reason (reason.Maintenance for a
//     maintenance reservation, else reason.ReservedFor);
//   - a recurring reservation (Period) rolls forward: once an occurrence
//     has ended the next one is in force (Reservation.Window).
//
// Running jobs are never touched: a maintenance reservation whose nodes
// still run jobs at its start only keeps new work off them.

// Reservation is a window in which nodes are set aside. Only the jobs
// that name it (Job.Reservation) may run on them then.
type Reservation struct {
	// Name is unique in the snapshot.
	Name string
	// Start is the first occurrence's start; Duration its length.
	Start    time.Time
	Duration time.Duration
	// Period, when not zero, repeats the window every Period from Start
	// (24h for daily, 168h for weekly).
	Period time.Duration
	// Nodes are the nodes set aside, by Node.Name.
	Nodes []string
	// Maint marks a maintenance window: the held-back jobs' reason says so
	// (reason.Maintenance) and the nodes show as in maintenance.
	Maint bool
}

// Window is the occurrence of r in force at now: the one in progress, else
// the next one. ok is false once a reservation that does not repeat has
// ended.
func (r Reservation) Window(now time.Time) (start, end time.Time, ok bool) {
	if r.Duration <= 0 {
		return time.Time{}, time.Time{}, false
	}
	start = r.Start
	if end = start.Add(r.Duration); end.After(now) {
		return start, end, true
	}
	if r.Period <= 0 {
		return time.Time{}, time.Time{}, false
	}
	k := now.Sub(end)/r.Period + 1
	start = start.Add(k * r.Period)
	end = start.Add(r.Duration)
	if !end.After(now) { // rounding at the boundary
		start, end = start.Add(r.Period), end.Add(r.Period)
	}
	return start, end, true
}

// Active reports whether r's window is open at now.
func (r Reservation) Active(now time.Time) bool {
	s, _, ok := r.Window(now)
	return ok && !s.After(now)
}

// window is one reservation on one node, in unix nanoseconds: the
// occurrence in force at the pass's start, and the period.
type window struct {
	start, end, period int64
	resv               int32 // index into gate.resv
}

// first is the occurrence of w whose end is after t (t ≥ the pass's
// now); ok is false when w does not repeat and has ended by t.
func (w *window) first(t int64) (s, e int64, ok bool) {
	s, e = w.start, w.end
	if e > t {
		return s, e, true
	}
	if w.period <= 0 {
		return 0, 0, false
	}
	k := (t-e)/w.period + 1
	return s + k*w.period, e + k*w.period, true
}

// crosses reports whether a run from from to to on a node of w overlaps
// one of w's occurrences.
func (w *window) crosses(from, to int64) bool {
	s, _, ok := w.first(from)
	return ok && s < to
}

// covers reports whether an occurrence of w is open at t.
func (w *window) covers(t int64) bool {
	s, _, ok := w.first(t)
	return ok && s <= t
}

// gate is the pass's reservations by node.
type gate struct {
	resv  []Reservation
	start []int64 // resv[k]'s occurrence in force at now; never: no longer in force
	end   []int64
	byNm  map[string]int32
	nodes [][]window // node index → its windows
}

// never marks a reservation that is no longer in force.
const never = 1<<63 - 1

// newGate indexes s's reservations over c's nodes at now; nil when none
// is in force.
func newGate(c *cluster, rs []Reservation, now time.Time) *gate {
	if len(rs) == 0 {
		return nil
	}
	g := &gate{resv: rs, start: make([]int64, len(rs)), end: make([]int64, len(rs)), byNm: map[string]int32{}}
	any := false
	for k, r := range rs {
		g.byNm[r.Name] = int32(k)
		s, e, ok := r.Window(now)
		if !ok {
			g.start[k], g.end[k] = never, never
			continue
		}
		g.start[k], g.end[k] = s.UnixNano(), e.UnixNano()
		for _, name := range r.Nodes {
			i, ok := c.byName[name]
			if !ok {
				continue
			}
			if g.nodes == nil {
				g.nodes = make([][]window, len(c.nodes))
			}
			g.nodes[i] = append(g.nodes[i], window{start: g.start[k], end: g.end[k], period: int64(r.Period), resv: int32(k)})
			any = true
		}
	}
	if !any && len(g.byNm) == 0 {
		return nil
	}
	return g
}

// own is the index of the reservation j runs in, -1 when none.
func (g *gate) own(j *Job) int32 {
	if g == nil || j.Reservation == "" {
		return -1
	}
	if k, ok := g.byNm[j.Reservation]; ok {
		return k
	}
	return -1
}

// open reports whether node i may hold a job of reservation own (-1:
// none) that runs from from to to.
func (g *gate) open(i int32, own int32, from, to int64) bool {
	if g == nil {
		return true
	}
	var ws []window
	if g.nodes != nil {
		ws = g.nodes[i]
	}
	in := own < 0
	for k := range ws {
		w := &ws[k]
		if w.resv == own {
			in = w.covers(from)
			continue
		}
		if w.crosses(from, to) {
			return false
		}
	}
	return in
}

// inside reports whether node i may hold a job of reservation own at
// from, other reservations aside: any node for a job outside every
// reservation, else a node of own while its window is open.
func (g *gate) inside(i int32, own int32, from int64) bool {
	if own < 0 {
		return true
	}
	if g == nil || g.nodes == nil {
		return false
	}
	for k := range g.nodes[i] {
		if w := &g.nodes[i][k]; w.resv == own {
			return w.covers(from)
		}
	}
	return false
}

// blocker is the reservation that keeps a job running from from to to
// off node i, -1 when none does.
func (g *gate) blocker(i int32, own int32, from, to int64) int32 {
	if g == nil || g.nodes == nil {
		return -1
	}
	for k := range g.nodes[i] {
		w := &g.nodes[i][k]
		if w.resv != own && w.crosses(from, to) {
			return w.resv
		}
	}
	return -1
}

// ends are the ends of the occurrences in force: when a reserved node
// comes back to every job, as backfill events touching it.
func (g *gate) ends() []event {
	if g == nil || g.nodes == nil {
		return nil
	}
	at := map[int64][]use{}
	for i, ws := range g.nodes {
		for _, w := range ws {
			at[w.end] = append(at[w.end], use{node: int32(i)})
		}
	}
	out := make([]event, 0, len(at))
	for t, us := range at {
		out = append(out, event{at: t, uses: us})
	}
	slices.SortFunc(out, func(a, b event) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	return out
}

// heldBack is the reason of a job j (of gang shape shape, -1: none) of
// reservation own that found no room at now: the reservation that keeps
// it off nodes it would fit on now, "" when none does (it waits for
// resources).
func (p *pass) heldBack(j *Job, own int32, end int64, shape int32, quantum float64) string {
	g := p.gate
	if g == nil || g.nodes == nil || (shape >= 0 && p.noRoom[shape]) {
		return ""
	}
	from := p.now.UnixNano()
	fit, ok := refPlace(p.c.nodes, j.Partition, j, quantum, func(i int32) bool { return g.inside(i, own, from) })
	if !ok {
		if shape >= 0 {
			p.noRoom[shape] = true
		}
		return ""
	}
	for _, h := range fit.hosts {
		if k := g.blocker(h, own, from, end); k >= 0 {
			if g.resv[k].Maint {
				return reason.Maintenance
			}
			return reason.ReservedFor(g.resv[k].Name)
		}
	}
	return ""
}

// reservations is the stage's verdict on each eligible job before the
// walk: a job whose reservation is gone, not yet open or too short for
// it waits (ok[i] false), the others go on; a job inside an open window
// without a walltime is taken to end at the window's end (meta.end).
func (p *pass) reservations(ok []bool) {
	for qi := range p.s.Queue {
		j := &p.s.Queue[qi]
		if !ok[qi] || j.Reservation == "" {
			continue
		}
		k := p.gate.own(j)
		if k < 0 {
			ok[qi] = false
			p.plan.setReason(j, reason.ReservationDeleted)
			continue
		}
		start, end := p.gate.start[k], p.gate.end[k]
		now := p.now.UnixNano()
		switch {
		case start == never:
			ok[qi] = false
			p.plan.setReason(j, reason.ReservationDeleted)
			continue
		case start > now:
			ok[qi] = false
			p.plan.setReason(j, reason.Reservation)
			p.plan.Starts = append(p.plan.Starts, StartEstimate{
				JobID: j.ID, Start: time.Unix(0, start).In(p.now.Location()), Nodes: p.s.Reservations[k].Nodes,
			})
			continue
		case j.Walltime > 0 && now+int64(j.Walltime) > end:
			ok[qi] = false
			p.plan.setReason(j, reason.Reservation)
			continue
		}
		if j.Walltime <= 0 {
			p.meta[qi].end = end
		}
	}
}
