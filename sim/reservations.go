package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/hostlist"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/sched/core"
)

// Reservations in a replay: the windows an admin plans (badmin
// reservation create), read from a file so that the cost of a window is
// measured before it is set. One reservation a line:
//
//	NAME START DURATION NODES [FLAGS]
//
// START is an offset from the trace's time zero (its first second) and
// DURATION the window's length, each as a walltime ("6d", "150h",
// "4:00:00", "1-00:00:00"); NODES is "all", a count N (the first N nodes
// of the simulated machine, n00000 on) or a host list of its nodes
// ("n[00000-00015]"); FLAGS, comma-separated, are those of badmin
// reservation: maint, daily, weekly (ignore_jobs is taken and changes
// nothing: a replay never refuses a window). Blank lines and lines from
// "#" on are skipped. Jobs of a trace name no reservation, so a window
// only takes its nodes away.

// ErrReservations marks a reservations file that does not read.
var ErrReservations = errors.New("invalid reservations file")

// ReadReservations reads the reservations of r (named name in errors)
// over a machine of nodes nodes (Options.Nodes; 0 is one).
func ReadReservations(r io.Reader, name string, nodes int) ([]core.Reservation, error) {
	n := max(1, nodes)
	var out []core.Reservation
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s:%d: %s", ErrReservations, name, line, fmt.Sprintf(format, args...))
		}
		if len(f) < 4 || len(f) > 5 {
			return nil, bad("want NAME START DURATION NODES [FLAGS], got %d fields", len(f))
		}
		if seen[f[0]] {
			return nil, bad("reservation %s given twice", f[0])
		}
		seen[f[0]] = true
		start, err := units.ParseDuration(f[1])
		if err != nil || start < 0 {
			return nil, bad("start %q: want an offset from the trace's start such as 6d or 150h", f[1])
		}
		dur, err := units.ParseDuration(f[2])
		if err != nil || dur <= 0 {
			return nil, bad("duration %q: want a positive duration such as 4h or 4:00:00", f[2])
		}
		res := core.Reservation{Name: f[0], Start: at(int64(start / time.Second)), Duration: dur}
		switch k, err := strconv.Atoi(f[3]); {
		case f[3] == "all":
			k = n
			fallthrough
		case err == nil:
			if k < 1 || k > n {
				return nil, bad("nodes %s: the machine has %d node(s)", f[3], n)
			}
			for i := 0; i < k; i++ {
				res.Nodes = append(res.Nodes, nodeName(i))
			}
		default:
			hosts, err := hostlist.Expand(f[3])
			if err != nil {
				return nil, bad("nodes %q: %v", f[3], err)
			}
			for _, h := range hosts {
				var i int
				if _, err := fmt.Sscanf(h, "n%05d", &i); err != nil || i >= n || nodeName(i) != h {
					return nil, bad("node %q: the machine's nodes are n00000 to %s", h, nodeName(n-1))
				}
			}
			res.Nodes = hosts
		}
		if len(f) == 5 {
			for _, fl := range strings.Split(f[4], ",") {
				switch fl {
				case "maint":
					res.Maint = true
				case "ignore_jobs":
				case "daily":
					res.Period = 24 * time.Hour
				case "weekly":
					res.Period = 7 * 24 * time.Hour
				default:
					return nil, bad("flag %q: want maint, ignore_jobs, daily or weekly", fl)
				}
			}
		}
		if res.Period > 0 && dur >= res.Period {
			return nil, bad("a window of %s that repeats every %s never closes", dur, res.Period)
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// nodeName is the simulated machine's node i.
func nodeName(i int) string { return fmt.Sprintf("n%05d", i) }

// nextEdge is the first time after now (seconds) at which a reservation's
// window opens or closes; ok is false when none will.
func (m *machine) nextEdge(now int64) (int64, bool) {
	var next int64
	ok := false
	for _, r := range m.o.Reservations {
		s, e, in := r.Window(at(now))
		if !in {
			continue
		}
		t := e
		if s.After(at(now)) {
			t = s
		}
		sec := int64(t.Sub(epoch) / time.Second)
		if sec <= now {
			sec = now + 1
		}
		if !ok || sec < next {
			next, ok = sec, true
		}
	}
	return next, ok
}

// reservedTime is the processor-seconds the windows take from the
// machine between first and last (seconds).
func (m *machine) reservedTime(first, last int64) float64 {
	procs := map[string]int64{}
	for _, n := range m.nodes {
		procs[n.Name] = n.Capacity.CPUMilli / 1000
	}
	var total float64
	for _, r := range m.o.Reservations {
		var width int64
		for _, n := range r.Nodes {
			width += procs[n]
		}
		for t := first; t < last; {
			s, e, ok := r.Window(at(t))
			if !ok {
				break
			}
			from, to := max(s.Unix(), first), min(e.Unix(), last)
			if to > from {
				total += float64(to-from) * float64(width)
			}
			if e.Unix() <= t {
				break
			}
			t = e.Unix()
		}
	}
	return total
}

// idleUntil counts, from the last time it was called to t, the
// processors free on nodes outside open windows while jobs waited (the
// state as it was over that span: events change it only at their times).
func (m *machine) idleUntil(t int64) {
	from := m.idleAt
	m.idleAt = max(t, from)
	if t <= from || len(m.queue) == 0 {
		return
	}
	var free int64
	for _, n := range m.nodes {
		shut := false
		for _, r := range m.o.Reservations {
			if r.Active(at(from)) && slices.Contains(r.Nodes, n.Name) {
				shut = true
				break
			}
		}
		if !shut {
			free += n.Free.CPUMilli
		}
	}
	m.idle += float64(t-from) * float64(free) / 1000
}
