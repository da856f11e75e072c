package core

import (
	"math"
	"time"
)

// The priority stage (Slurm multifactor): each factor is in [0, 1],
//
//	age       = min(now − submit, MaxAge) / MaxAge
//	fairshare = Job.FairShare (F = 2^(−U/S), from sched/fairshare)
//	jobsize   = job CPUs / cluster CPUs (1 − that with FavorSmall)
//	partition = partition Tier / highest Tier
//	qos       = QOS Priority / highest QOS Priority
//
// and priority = Σ weight × factor − nice.

// DefaultMaxAge is where the age factor saturates (Slurm PriorityMaxAge).
const DefaultMaxAge = 7 * 24 * time.Hour

// Factors are one job's priority factors and the resulting priority.
type Factors struct {
	Age, FairShare, JobSize, Partition, QOS float64
	Nice                                    float64
	Priority                                float64
}

// prio holds what every job's factors share in one pass.
type prio struct {
	w          Weights
	maxAge     time.Duration
	favorSmall bool
	totalCPU   int64
	maxTier    float64
	maxQOS     float64
	parts      map[string]Partition
	qos        map[string]QOS
}

func newPrio(s *Snapshot, totalCPU int64) prio {
	p := prio{w: s.Policy.Weights, maxAge: s.Policy.MaxAge, favorSmall: s.Policy.FavorSmall,
		totalCPU: totalCPU, parts: s.Partitions, qos: s.QOS}
	if p.maxAge <= 0 {
		p.maxAge = DefaultMaxAge
	}
	for _, pt := range s.Partitions {
		p.maxTier = max(p.maxTier, pt.Tier)
	}
	for _, q := range s.QOS {
		p.maxQOS = max(p.maxQOS, q.Priority)
	}
	return p
}

func (p *prio) factors(j *Job, now time.Time) Factors {
	var f Factors
	age := now.Sub(j.Submit)
	f.Age = clamp01(float64(age) / float64(p.maxAge))
	f.FairShare = clamp01(j.FairShare)
	if p.totalCPU > 0 {
		var cpu int64
		for _, c := range j.Containers {
			cpu += c.CPUMilli
		}
		f.JobSize = clamp01(float64(cpu) / float64(p.totalCPU))
		if p.favorSmall {
			f.JobSize = 1 - f.JobSize
		}
	}
	if p.maxTier > 0 {
		f.Partition = clamp01(p.parts[j.Partition].Tier / p.maxTier)
	}
	if p.maxQOS > 0 && j.QOS != "" {
		f.QOS = clamp01(p.qos[j.QOS].Priority / p.maxQOS)
	}
	f.Nice = j.Nice
	f.Priority = p.w.Age*f.Age + p.w.FairShare*f.FairShare + p.w.JobSize*f.JobSize +
		p.w.Partition*f.Partition + p.w.QOS*f.QOS - f.Nice
	return f
}

func (p *prio) weighted() bool {
	return p.w.Age != 0 || p.w.FairShare != 0 || p.w.JobSize != 0 || p.w.Partition != 0 || p.w.QOS != 0
}

// JobFactors computes j's priority factors as Schedule would in s at now
// (for bqueue and badmin).
func JobFactors(s Snapshot, j Job, now time.Time) Factors {
	var total int64
	for _, n := range s.Nodes {
		total += n.Capacity.CPUMilli
	}
	p := newPrio(&s, total)
	return p.factors(&j, now)
}

// Ranker computes jobs' priorities as Schedule does in one snapshot,
// for a caller that keeps the queue ordered itself (schedd's backlog)
// or shows it (bqueue). Make it with NewRanker.
type Ranker struct{ p prio }

// NewRanker is the ranker of s: its policy, partitions, QOSes and the
// CPUs of its nodes (the job-size factor's whole). s.Queue is not read.
func NewRanker(s *Snapshot) Ranker {
	var total int64
	for _, n := range s.Nodes {
		total += n.Capacity.CPUMilli
	}
	return Ranker{newPrio(s, total)}
}

// Priority is the key Schedule orders j by at now, highest first (ties
// in queue order): its priority when the policy weighs any factor, else
// minus its nice.
func (r *Ranker) Priority(j *Job, now time.Time) float64 {
	if r.p.weighted() {
		return r.p.factors(j, now).Priority
	}
	return -j.Nice
}

// Factors are j's priority factors at now.
func (r *Ranker) Factors(j *Job, now time.Time) Factors { return r.p.factors(j, now) }

// StarvationAge is the starvation threshold of partition part in s (the
// partition's own, else the policy's): a job of it pending this long
// goes before the priority order when the policy reserves
// (ReservationDepth > 0). Zero or negative: none.
func StarvationAge(s *Snapshot, part string) time.Duration { return starvationAge(s, part) }

// Keeps reports whether j keeps the reservation it got in an earlier
// pass under Policy.KeepReservations (its reason is Resources or
// Preempting).
func Keeps(j *Job) bool { return keeps(j) }

// order returns the indexes of the eligible jobs of q (eligible[i]),
// highest priority first; equal priorities keep queue order.
func (p *prio) order(q []Job, eligible []bool, now time.Time) []int32 {
	weighted := p.weighted()
	nice := false
	rs := make([]ranked, 0, len(q))
	for i := range q {
		if !eligible[i] {
			continue
		}
		r := ranked{i: int32(i)}
		if weighted {
			r.p = p.factors(&q[i], now).Priority
		} else {
			r.p = -q[i].Nice
		}
		nice = nice || r.p != 0
		rs = append(rs, r)
	}
	out := make([]int32, len(rs))
	if (weighted || nice) && len(rs) > 1 {
		return radixOrder(rs, out)
	}
	for k, r := range rs {
		out[k] = r.i
	}
	return out
}

type ranked struct {
	p float64
	i int32
}

// radixOrder sorts by priority, highest first, stable (so queue order on
// ties), with an LSD radix sort over the float's bits: a pass over 100,000
// jobs costs a few milliseconds instead of a comparison sort's tens.
func radixOrder(rs []ranked, out []int32) []int32 {
	type kv struct {
		k uint64
		i int32
	}
	a := make([]kv, len(rs))
	for n, r := range rs {
		a[n] = kv{descKey(r.p), r.i}
	}
	b := make([]kv, len(rs))
	var count [256]int
	for shift := uint(0); shift < 64; shift += 8 {
		count = [256]int{}
		for _, e := range a {
			count[byte(e.k>>shift)]++
		}
		if count[byte(a[0].k>>shift)] == len(a) {
			continue // every key has this digit
		}
		sum := 0
		for d := range count {
			sum, count[d] = sum+count[d], sum
		}
		for _, e := range a {
			d := byte(e.k >> shift)
			b[count[d]] = e
			count[d]++
		}
		a, b = b, a
	}
	for n, e := range a {
		out[n] = e.i
	}
	return out
}

// descKey maps a float to a key whose ascending order is the float's
// descending order (NaN last).
func descKey(f float64) uint64 {
	if f != f {
		return math.MaxUint64
	}
	if f == 0 {
		f = 0 // fold -0
	}
	u := math.Float64bits(f)
	if u>>63 == 1 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return ^u
}

func clamp01(x float64) float64 {
	switch {
	case x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

// Ranking is what Schedule computes of the queue's priorities in s at
// now: the factors of every job of s.Queue (by index) and the order in
// which it considers the eligible ones (indexes into s.Queue, highest
// priority first; ineligible jobs are left out). For bqueue and bjob.
func Ranking(s Snapshot, now time.Time) (factors []Factors, order []int32) {
	var total int64
	for _, n := range s.Nodes {
		total += n.Capacity.CPUMilli
	}
	p := newPrio(&s, total)
	factors = make([]Factors, len(s.Queue))
	for i := range s.Queue {
		factors[i] = p.factors(&s.Queue[i], now)
	}
	return factors, p.order(s.Queue, eligible(&s, nil), now)
}
