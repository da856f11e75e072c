package state

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"
)

// Reservations: nodes set aside for a window of time (badmin reservation
// create), for the jobs that name one (bsub --reservation) and whose user
// or account it admits. A reservation is a row of its own table, written
// by its own acts (CreateReservation, UpdateReservation,
// DeleteReservation, and StopReserved for the jobs in a window's way:
// resvstop.go; SchemaReservations on) and
// kept in snapshots (Dump.Reservations), so it survives a restart
// and a leader's failover. The scheduling core reads it (sched/core's
// reservations stage); the rows hold only what the admin set, every
// replica deciding the same from them.

const tableReservations = "reservations"

var reservationsTable = &memdb.TableSchema{Name: tableReservations, Indexes: map[string]*memdb.IndexSchema{
	"id": {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name"}},
}}

// SchemaReservations is the schema version that has reservations: their
// acts and Dump.Reservations. A peer of an older schema would refuse the
// acts and stop, and schedule over the windows; so the leader writes
// them only once every peer reads this version (NeedsSchema), and they
// have no form in an older schema's entries (toV10).
const SchemaReservations = 11

// reservationAct reports whether a is one of the reservations' acts.
func reservationAct(a Act) bool {
	switch a.(type) {
	case CreateReservation, UpdateReservation, DeleteReservation, StopReserved:
		return true
	}
	return false
}

// CreateReservation makes a reservation (badmin reservation create).
type CreateReservation struct {
	Reservation *Reservation `json:"reservation"`
}

// UpdateReservation puts a whole new row in place of the reservation of
// its name (badmin reservation update).
type UpdateReservation struct {
	Reservation *Reservation `json:"reservation"`
}

// DeleteReservation deletes a reservation (badmin reservation delete).
type DeleteReservation struct {
	Name string `json:"name"`
}

// Repeats of a recurring reservation.
const (
	RepeatDaily  = "daily"
	RepeatWeekly = "weekly"
)

// Reservation is a reservation's row.
type Reservation struct {
	Name string `json:"name"`
	// Start is when the first window opens; Duration how long each lasts.
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration"`
	// Nodes are set aside, in name order: named by the admin, or picked
	// when it was made (--count, Partition).
	Nodes     []string `json:"nodes"`
	Partition string   `json:"partition,omitempty"`
	// Users and Accounts may run jobs in it (either admits); both empty:
	// only root and the admins.
	Users    []string `json:"users,omitempty"`
	Accounts []string `json:"accounts,omitempty"`
	// Maint marks a maintenance window: its nodes show in maintenance
	// while it is open, and the jobs it holds back say so.
	Maint bool `json:"maint,omitempty"`
	// IgnoreJobs let it be made over nodes whose running jobs would run
	// into it.
	IgnoreJobs bool `json:"ignore_jobs,omitempty"`
	// StopJobs stops, as each window opens, the jobs still running on
	// its nodes that are not its own (resvstop.go); it may be made over
	// running jobs, as IgnoreJobs.
	StopJobs bool `json:"stop_jobs,omitempty"`
	// Repeat is RepeatDaily, RepeatWeekly or "" (once).
	Repeat      string    `json:"repeat,omitempty"`
	By          string    `json:"by,omitempty"`
	Created     time.Time `json:"created"`
	ModifyIndex uint64    `json:"modify_index"`
}

// Period is how often r repeats (0: once).
func (r *Reservation) Period() time.Duration {
	switch r.Repeat {
	case RepeatDaily:
		return 24 * time.Hour
	case RepeatWeekly:
		return 7 * 24 * time.Hour
	}
	return 0
}

// Flags are r's flags as badmin and scontrol spell them.
func (r *Reservation) Flags() []string {
	var out []string
	if r.Maint {
		out = append(out, "maint")
	}
	if r.IgnoreJobs {
		out = append(out, "ignore_jobs")
	}
	if r.StopJobs {
		out = append(out, "stop_jobs")
	}
	if r.Repeat != "" {
		out = append(out, r.Repeat)
	}
	return out
}

// Admits reports whether user, charging account, may run jobs in r.
func (r *Reservation) Admits(user, account string) bool {
	return slices.Contains(r.Users, user) || (account != "" && slices.Contains(r.Accounts, account))
}

// Window is the occurrence of r in force at now (the one open, else the
// next); ok is false once a reservation that does not repeat has ended.
func (r *Reservation) Window(now time.Time) (start, end time.Time, ok bool) {
	start, end = r.Start, r.Start.Add(r.Duration)
	if end.After(now) {
		return start, end, r.Duration > 0
	}
	p := r.Period()
	if p <= 0 || r.Duration <= 0 {
		return time.Time{}, time.Time{}, false
	}
	k := now.Sub(end)/p + 1
	start = start.Add(k * p)
	return start, start.Add(r.Duration), true
}

// ErrReservation marks a reservation the state refuses (its fields), as
// distinct from one that conflicts with others (ErrConflict).
var ErrReservation = errors.New("invalid reservation")

// checkReservation refuses a row that cannot be kept.
func checkReservation(txn *memdb.Txn, r *Reservation) error {
	switch {
	case r == nil || r.Name == "":
		return fmt.Errorf("%w: no name", ErrReservation)
	case strings.ContainsAny(r.Name, " \t\n,/"):
		return fmt.Errorf("reservation %q: %w: a name has no blanks, commas or slashes", r.Name, ErrReservation)
	case r.Duration <= 0:
		return fmt.Errorf("reservation %q: %w: duration %s is not positive", r.Name, ErrReservation, r.Duration)
	case r.Start.IsZero():
		return fmt.Errorf("reservation %q: %w: no start time", r.Name, ErrReservation)
	case len(r.Nodes) == 0:
		return fmt.Errorf("reservation %q: %w: no nodes", r.Name, ErrReservation)
	case r.Repeat != "" && r.Repeat != RepeatDaily && r.Repeat != RepeatWeekly:
		return fmt.Errorf("reservation %q: %w: repeat %q is neither daily nor weekly", r.Name, ErrReservation, r.Repeat)
	case r.Period() > 0 && r.Duration >= r.Period():
		return fmt.Errorf("reservation %q: %w: a %s window of %s never closes", r.Name, ErrReservation, r.Repeat, r.Duration)
	}
	for _, n := range r.Nodes {
		raw, err := txn.First(tableNodes, "id", n)
		if err != nil {
			return err
		}
		if raw == nil {
			return fmt.Errorf("reservation %q: node %q: %w", r.Name, n, ErrNotFound)
		}
	}
	return nil
}

// overlapHorizon bounds how far ahead two recurring reservations are
// compared for a shared node at a shared time.
const overlapHorizon = 8 * 7 * 24 * time.Hour

// overlaps reports whether a and b hold a node at the same time, from
// now on, and which node.
func overlaps(a, b *Reservation, now time.Time) (string, bool) {
	var shared string
	for _, n := range a.Nodes {
		if slices.Contains(b.Nodes, n) {
			shared = n
			break
		}
	}
	if shared == "" {
		return "", false
	}
	as, ae, aok := a.Window(now)
	bs, be, bok := b.Window(now)
	for aok && bok && as.Before(now.Add(overlapHorizon)) && bs.Before(now.Add(overlapHorizon)) {
		if as.Before(be) && bs.Before(ae) {
			return shared, true
		}
		if ae.Before(be) {
			as, ae, aok = a.Window(ae)
		} else {
			bs, be, bok = b.Window(be)
		}
	}
	return "", false
}

// crossing is a running job of the state that would still run on one of
// r's nodes when its window opens: its id and node, or 0.
func crossing(txn *memdb.Txn, r *Reservation, now time.Time) (uint64, string, error) {
	start, _, ok := r.Window(now)
	if !ok {
		return 0, "", nil
	}
	for _, n := range r.Nodes {
		it, err := txn.Get(tableJobs, "node", n)
		if err != nil {
			return 0, "", err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			j := raw.(*Job)
			if j.State.Terminal() || j.KillWanted {
				continue
			}
			if j.Walltime <= 0 {
				return j.ID, n, nil // never ends
			}
			from := j.Started
			if from.IsZero() {
				from = now
			}
			if from.Add(j.Walltime).After(start) {
				return j.ID, n, nil
			}
		}
	}
	return 0, "", nil
}

// putReservation makes (create) or replaces (update) a reservation. It
// refuses one that overlaps another on a node, and one whose nodes run
// jobs that would run into its window unless it ignores jobs.
func putReservation(txn *memdb.Txn, index uint64, now time.Time, in *Reservation, create bool) error {
	if err := checkReservation(txn, in); err != nil {
		return err
	}
	raw, err := txn.First(tableReservations, "id", in.Name)
	if err != nil {
		return err
	}
	ended := false
	if raw != nil {
		_, _, open := raw.(*Reservation).Window(now)
		ended = !open
	}
	switch {
	case create && raw != nil && !ended:
		// One whose last window has ended is replaced: its name is free.
		return conflict("reservation %q exists already", in.Name)
	case !create && raw == nil:
		return fmt.Errorf("reservation %q: %w", in.Name, ErrNotFound)
	}
	r := *in
	r.Nodes = slices.Clone(in.Nodes)
	slices.Sort(r.Nodes)
	r.Nodes = slices.Compact(r.Nodes)
	if _, _, ok := r.Window(now); !ok {
		return fmt.Errorf("reservation %q: %w: it ends at %s, in the past", r.Name, ErrReservation, r.Start.Add(r.Duration).Format(time.RFC3339))
	}
	it, err := txn.Get(tableReservations, "id")
	if err != nil {
		return err
	}
	for o := it.Next(); o != nil; o = it.Next() {
		other := o.(*Reservation)
		if other.Name == r.Name {
			continue
		}
		if n, ok := overlaps(&r, other, now); ok {
			return conflict("reservation %q: node %s is in reservation %q at the same time", r.Name, n, other.Name)
		}
	}
	if !r.IgnoreJobs && !r.StopJobs {
		id, n, err := crossing(txn, &r, now)
		if err != nil {
			return err
		}
		if id != 0 {
			return conflict("reservation %q: job %d on node %s would still run when the window opens; wait for it, kill it, or add the flag ignore_jobs or stop_jobs", r.Name, id, n)
		}
	}
	if create || ended {
		r.Created = now
	} else {
		r.Created = raw.(*Reservation).Created
	}
	r.ModifyIndex = index
	return txn.Insert(tableReservations, &r)
}

func deleteReservation(txn *memdb.Txn, name string) error {
	if name == "" {
		return fmt.Errorf("%w: no name", ErrReservation)
	}
	raw, err := txn.First(tableReservations, "id", name)
	if err != nil {
		return err
	}
	if raw == nil {
		return fmt.Errorf("reservation %q: %w", name, ErrNotFound)
	}
	return txn.Delete(tableReservations, raw)
}

// Reservations lists the reservations by name.
func (v *Snapshot) Reservations() []*Reservation {
	it, err := v.txn.Get(tableReservations, "id")
	if err != nil {
		panic(err)
	}
	var out []*Reservation
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Reservation))
	}
	return out
}

// Reservation returns one reservation, or nil.
func (v *Snapshot) Reservation(name string) *Reservation {
	raw, err := v.txn.First(tableReservations, "id", name)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*Reservation)
}

// NextReservationEdge is the first time after now at which a
// reservation's window opens or closes (zero: none), when a scheduling
// pass must look again.
func (v *Snapshot) NextReservationEdge(now time.Time) time.Time {
	var next time.Time
	for _, r := range v.Reservations() {
		s, e, ok := r.Window(now)
		if !ok {
			continue
		}
		t := e
		if s.After(now) {
			t = s
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}
