// Package fairshare is the fair-share math of Slurm's classic multifactor
// plugin (not fair tree), pure: an account tree with shares, usage decayed
// with a half-life, and the factor F = 2^(−U/S) per association, with the
// rows `sshare` prints.
//
// For a node n of the tree (an account or a user under it):
//
//	S(n) = shares(n) / Σ shares(siblings of n, n included) × S(parent)   normalized shares, S(root) = 1
//	u(n) = raw usage of n, its own plus its subtree's
//	Un(n) = u(n) / u(root)                                           normalized usage
//	Ue(n) = Un(n) + (Ue(parent) − Un(n)) × shares(n) / Σ shares(siblings)   effective usage
//	F(n)  = 2^(−Ue(n)/S(n))   (0 when S(n) = 0)
//
// A child of the root has Ue = Un. Usage is in TRES-seconds (Billing),
// decayed by 2^(−age/half-life) (Usage).
//
// Pure: the standard library only, no troupe package.
package fairshare

import (
	"math"
	"sort"
	"time"
)

// DefaultHalfLife is Slurm's PriorityDecayHalfLife default.
const DefaultHalfLife = 7 * 24 * time.Hour

// Root is the name of the tree's root.
const Root = "root"

// Node is an account or a user in the tree.
type Node struct {
	// Name is unique in the tree; users are usually "account/user".
	Name string
	// Parent is the parent account's Name; "" or Root for the top level.
	Parent string
	// Shares is the node's raw shares among its siblings (≥ 0).
	Shares float64
	// User marks a leaf that stands for a user (sshare's User column).
	User string
}

// Tree is an account tree with raw usage per node. The zero Tree is empty.
type Tree struct {
	nodes    map[string]*tnode
	children map[string][]string
}

type tnode struct {
	Node
	own float64 // raw usage charged to this node itself
}

// New builds a tree; nodes whose parent is unknown hang off the root.
func New(nodes []Node) *Tree {
	t := &Tree{nodes: map[string]*tnode{}, children: map[string][]string{}}
	for _, n := range nodes {
		t.nodes[n.Name] = &tnode{Node: n}
	}
	for _, n := range nodes {
		p := n.Parent
		if p == "" || (p != Root && t.nodes[p] == nil) {
			p = Root
		}
		t.nodes[n.Name].Parent = p
		t.children[p] = append(t.children[p], n.Name)
	}
	for p := range t.children {
		sort.Strings(t.children[p])
	}
	return t
}

// Charge adds raw usage (decayed units, see Usage) to a node.
func (t *Tree) Charge(name string, u float64) {
	if n := t.nodes[name]; n != nil {
		n.own += u
	}
}

// SetUsage sets a node's own raw usage.
func (t *Tree) SetUsage(name string, u float64) {
	if n := t.nodes[name]; n != nil {
		n.own = u
	}
}

// Row is one line of `sshare`.
type Row struct {
	Account    string  // the node's name (for users, the parent account)
	User       string  // empty for accounts
	RawShares  float64 // Shares
	NormShares float64 // S
	RawUsage   float64 // u
	NormUsage  float64 // Un
	EffUsage   float64 // Ue
	FairShare  float64 // F
	Depth      int     // 0 for the root's children
}

// Compute returns every node's row, depth first in name order (as sshare
// lists them), and a map from name to F.
func (t *Tree) Compute() ([]Row, map[string]float64) {
	raw := map[string]float64{}
	var sum func(string) float64
	sum = func(n string) float64 {
		u := 0.0
		if tn := t.nodes[n]; tn != nil {
			u = tn.own
		}
		for _, c := range t.children[n] {
			u += sum(c)
		}
		raw[n] = u
		return u
	}
	total := sum(Root)
	var rows []Row
	f := map[string]float64{}
	var walk func(parent string, sNorm, ueParent float64, depth int)
	walk = func(parent string, sNorm, ueParent float64, depth int) {
		sib := 0.0
		for _, c := range t.children[parent] {
			sib += t.nodes[c].Shares
		}
		for _, c := range t.children[parent] {
			n := t.nodes[c]
			r := Row{Account: n.Name, User: n.User, RawShares: n.Shares, RawUsage: raw[c], Depth: depth}
			if n.User != "" {
				r.Account = n.Parent
			}
			frac := 0.0
			if sib > 0 {
				frac = n.Shares / sib
			}
			r.NormShares = frac * sNorm
			if total > 0 {
				r.NormUsage = raw[c] / total
			}
			r.EffUsage = r.NormUsage
			if depth > 0 {
				r.EffUsage = r.NormUsage + (ueParent-r.NormUsage)*frac
			}
			r.FairShare = Factor(r.EffUsage, r.NormShares)
			f[c] = r.FairShare
			rows = append(rows, r)
			walk(c, r.NormShares, r.EffUsage, depth+1)
		}
	}
	walk(Root, 1, 0, 0)
	return rows, f
}

// Factor is F = 2^(−U/S), 0 when S is 0.
func Factor(u, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return math.Exp2(-u / s)
}

// Decay is the factor usage keeps after d with half-life h:
// 2^(−d/h). A zero or negative h keeps everything.
func Decay(d, h time.Duration) float64 {
	if h <= 0 {
		return 1
	}
	return math.Exp2(-float64(d) / float64(h))
}

// Usage is a decaying usage counter kept in lazily decayed form.
type Usage struct {
	Value float64   // as of At
	At    time.Time // when Value was last brought up to date
}

// Add brings u to now and adds amount.
func (u Usage) Add(now time.Time, amount float64, h time.Duration) Usage {
	u = u.To(now, h)
	u.Value += amount
	return u
}

// To is u decayed to now (never backwards).
func (u Usage) To(now time.Time, h time.Duration) Usage {
	if u.At.IsZero() || !now.After(u.At) {
		if u.At.IsZero() {
			u.At = now
		}
		return u
	}
	return Usage{Value: u.Value * Decay(now.Sub(u.At), h), At: now}
}

// Billing weights TRES into one billable amount (Slurm TRESBillingWeights):
// per CPU, per GiB of memory, per GPU.
type Billing struct {
	CPU, MemGiB, GPU float64
}

// DefaultBilling bills CPUs only.
var DefaultBilling = Billing{CPU: 1}

// Rate is the billable rate of an allocation (per second).
func (b Billing) Rate(cpus, memGiB, gpus float64) float64 {
	return b.CPU*cpus + b.MemGiB*memGiB + b.GPU*gpus
}
