package sched

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/httpapi"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Reservations (badmin reservation create|update|delete|list): nodes set
// aside for a window, for the jobs that name one. An admin's request
// becomes a row of the replicated state (state.Reservation) through its
// own acts, so every replica holds it and a new leader keeps
// honouring it; the scheduling core reads the rows each pass
// (coreReservations) and the loop looks again when a window opens or
// closes. The views derive what is in force now: a recurring
// reservation's next window, a node's MAINT or RESERVED state.

// calendar is the reservations' role: it makes, changes and lists them.
type calendar struct {
	*replica
}

// resvName is what a reservation may be called: as a partition.
var resvName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,62}$`)

// CreateReservation makes the reservation req asks for; by is the admin
// who asked.
func (s *calendar) CreateReservation(ctx context.Context, req api.ReservationRequest, by string) (api.Reservation, error) {
	if !resvName.MatchString(req.Name) {
		return api.Reservation{}, fmt.Errorf("%w: reservation name %q: a name starts with a letter and holds up to 63 letters, digits, '_', '.' and '-'", ErrInvalid, req.Name)
	}
	v := s.st.Snapshot()
	r := &state.Reservation{Name: req.Name, Start: req.Start, Duration: req.Duration, Partition: req.Partition,
		Users: req.Users, Accounts: req.Accounts, By: by}
	if err := setFlags(r, req.Flags); err != nil {
		return api.Reservation{}, err
	}
	switch {
	case req.Start.IsZero():
		return api.Reservation{}, fmt.Errorf("%w: a reservation needs a start (--start)", ErrInvalid)
	case req.Duration <= 0:
		return api.Reservation{}, fmt.Errorf("%w: a reservation needs a positive duration (--duration)", ErrInvalid)
	case len(req.Nodes) > 0 && req.Count > 0:
		return api.Reservation{}, fmt.Errorf("%w: give --nodes or --count, not both", ErrInvalid)
	case len(req.Nodes) > 0:
		r.Nodes = req.Nodes
		if err := knownNodes(v, req.Nodes); err != nil {
			return api.Reservation{}, err
		}
	case req.Count > 0:
		nodes, err := s.pick(v, req.Count, req.Partition)
		if err != nil {
			return api.Reservation{}, err
		}
		r.Nodes = nodes
	default:
		return api.Reservation{}, fmt.Errorf("%w: a reservation needs nodes (--nodes LIST or --count N)", ErrInvalid)
	}
	return s.put(ctx, state.CreateReservation{Reservation: r}, r.Name)
}

// UpdateReservation changes the fields req.Update names of reservation
// name.
func (s *calendar) UpdateReservation(ctx context.Context, name string, req api.ReservationRequest) (api.Reservation, error) {
	v := s.st.Snapshot()
	old := v.Reservation(name)
	if old == nil {
		return api.Reservation{}, fmt.Errorf("reservation %q: %w", name, state.ErrNotFound)
	}
	r := *old
	if len(req.Update) == 0 {
		return api.Reservation{}, fmt.Errorf("%w: an update names what it changes (--start, --duration, --nodes, --users, --accounts, --flags)", ErrInvalid)
	}
	for _, f := range req.Update {
		switch f {
		case "start":
			r.Start = req.Start
		case "duration":
			r.Duration = req.Duration
		case "nodes":
			if err := knownNodes(v, req.Nodes); err != nil {
				return api.Reservation{}, err
			}
			r.Nodes = req.Nodes
		case "users":
			r.Users = req.Users
		case "accounts":
			r.Accounts = req.Accounts
		case "flags":
			r.Maint, r.IgnoreJobs, r.Repeat = false, false, ""
			if err := setFlags(&r, req.Flags); err != nil {
				return api.Reservation{}, err
			}
		default:
			return api.Reservation{}, fmt.Errorf("%w: reservation field %q cannot be updated; fields: start, duration, nodes, users, accounts, flags", ErrInvalid, f)
		}
	}
	return s.put(ctx, state.UpdateReservation{Reservation: &r}, r.Name)
}

// DeleteReservation deletes reservation name. Its jobs that still wait
// wait with reason ReservationDeleted; those running go on.
func (s *calendar) DeleteReservation(ctx context.Context, name string) error {
	_, err := s.apply(ctx, state.Command{Act: state.DeleteReservation{Name: name}})
	s.wake()
	return olderPeer(err)
}

// olderPeer says what a refusal to write a reservation's act while a
// peer reads an older schema means to an admin: a conflict (HTTP 409),
// nothing written, to ask again once every schedd is upgraded.
func olderPeer(err error) error {
	if errors.Is(err, raftlog.ErrOlderPeer) {
		return fmt.Errorf("%w: reservations are schema %d's and the cluster's schema is older: a peer of the previous release may be in it; ask again once every schedd is upgraded (%w)", state.ErrConflict, state.SchemaReservations, err)
	}
	return err
}

// ListReservations answers the reservations in force, as w says.
func (s *calendar) ListReservations(ctx context.Context, w httpapi.Wait) api.ReservationList {
	v, idx := s.block(ctx, w)
	return api.ReservationList{Reservations: reservationViews(v, s.cfg.Clock()), Index: idx}
}

func (s *calendar) put(ctx context.Context, act state.Act, name string) (api.Reservation, error) {
	if _, err := s.apply(ctx, state.Command{Act: act}); err != nil {
		if errors.Is(err, state.ErrReservation) {
			err = fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return api.Reservation{}, olderPeer(err)
	}
	s.wake()
	v := s.st.Snapshot()
	return reservationView(v, v.Reservation(name), s.cfg.Clock()), nil
}

// setFlags sets r's flags from their names.
func setFlags(r *state.Reservation, flags []string) error {
	for _, f := range flags {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case api.FlagMaint:
			r.Maint = true
		case api.FlagIgnoreJobs:
			r.IgnoreJobs = true
		case api.FlagStopJobs:
			r.StopJobs = true
		case api.FlagDaily, api.FlagWeekly:
			if r.Repeat != "" {
				return fmt.Errorf("%w: a reservation repeats daily or weekly, not both", ErrInvalid)
			}
			r.Repeat = strings.ToLower(strings.TrimSpace(f))
		case "":
		default:
			return fmt.Errorf("%w: unknown reservation flag %q; flags: maint, ignore_jobs, stop_jobs, daily, weekly", ErrInvalid, f)
		}
	}
	return nil
}

func knownNodes(v *state.Snapshot, nodes []string) error {
	var unknown []string
	for _, n := range nodes {
		if v.Node(n) == nil {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: unknown node %s", ErrInvalid, strings.Join(unknown, ", "))
	}
	return nil
}

// pick chooses count nodes of partition part (every node without one)
// for a reservation: up and not drained, idle ones first, then those
// running least, each tie by name; deterministic for one state.
func (s *calendar) pick(v *state.Snapshot, count int, part string) ([]string, error) {
	cfg := v.Config()
	var p interface{ Has(string, []string) bool }
	if part != "" {
		pp := cfg.Partition(part)
		if pp == nil {
			return nil, fmt.Errorf("%w: partition %q does not exist; known partitions: %s", ErrInvalid, part, strings.Join(cfg.PartitionNames(), ", "))
		}
		p = pp
	}
	alloc := v.Allocated()
	type cand struct {
		name string
		used int64
	}
	var cs []cand
	for _, n := range v.Nodes() {
		if n.State != api.NodeUp || n.Drain || (p != nil && !p.Has(n.Name, n.Labels)) {
			continue
		}
		cs = append(cs, cand{n.Name, alloc[n.Name].CPUMilli})
	}
	if len(cs) < count {
		where := "up"
		if part != "" {
			where = "up in partition " + part
		}
		return nil, fmt.Errorf("%w: %d nodes asked for, %d are %s and not drained", ErrInvalid, count, len(cs), where)
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		if a.used != b.used {
			if a.used < b.used {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, count)
	for i := range out {
		out[i] = cs[i].name
	}
	return out, nil
}

// coreReservations are the rows as the core reads them.
func coreReservations(rs []*state.Reservation) []core.Reservation {
	if len(rs) == 0 {
		return nil
	}
	out := make([]core.Reservation, len(rs))
	for i, r := range rs {
		out[i] = core.Reservation{Name: r.Name, Start: r.Start, Duration: r.Duration, Period: r.Period(), Nodes: r.Nodes, Maint: r.Maint}
	}
	return out
}

// reservationViews lists the reservations in force at now (ended
// one-off reservations left out).
func reservationViews(v *state.Snapshot, now time.Time) []api.Reservation {
	out := []api.Reservation{}
	for _, r := range v.Reservations() {
		if _, _, ok := r.Window(now); ok {
			out = append(out, reservationView(v, r, now))
		}
	}
	return out
}

func reservationView(v *state.Snapshot, r *state.Reservation, now time.Time) api.Reservation {
	if r == nil {
		return api.Reservation{}
	}
	out := api.Reservation{Name: r.Name, State: api.ResvInactive, Start: r.Start, End: r.Start.Add(r.Duration), Duration: r.Duration,
		Nodes: r.Nodes, Partition: r.Partition, Users: r.Users, Accounts: r.Accounts, Flags: r.Flags(), By: r.By, Created: r.Created}
	if s, e, ok := r.Window(now); ok {
		out.Start, out.End = s, e
		if !s.After(now) {
			out.State = api.ResvActive
		}
	}
	for _, j := range v.LiveJobs() {
		if j.Reservation == r.Name && j.Array == nil {
			out.Jobs = append(out.Jobs, j.ID)
		}
	}
	return out
}

// reserveNodes marks the nodes of nodes that an open window holds
// (MAINT for a maintenance reservation, RESERVED otherwise, with the
// reservation's name and a reason) and names on the others the next
// reservation that will hold them. A drained or DOWN node keeps its
// state.
func reserveNodes(v *state.Snapshot, nodes []api.Node, now time.Time) {
	rs := v.Reservations()
	if len(rs) == 0 {
		return
	}
	next := map[string]time.Time{}
	for _, r := range rs {
		s, _, ok := r.Window(now)
		if !ok {
			continue
		}
		open := !s.After(now)
		for i := range nodes {
			n := &nodes[i]
			if !slices.Contains(r.Nodes, n.Name) {
				continue
			}
			if open {
				n.Reservation, next[n.Name] = r.Name, now
				if n.State == api.NodeUp {
					n.State, n.Reason = api.NodeReserved, reason.ReservedFor(r.Name)
					if r.Maint {
						n.State, n.Reason = api.NodeMaint, "Reserved for maintenance ("+r.Name+")"
					}
				}
				continue
			}
			if t, ok := next[n.Name]; !ok || s.Before(t) {
				n.Reservation, next[n.Name] = r.Name, s
			}
		}
	}
}
