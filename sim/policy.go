package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/sched/core"
)

// Policies are the names bsim takes.
var Policies = []string{"fcfs", "easy", "default"}

// ErrPolicy marks an unknown policy name.
var ErrPolicy = fmt.Errorf("unknown policy; known: fcfs, easy, default")

// Policy returns the core policy for a name and whether it needs fair
// share: fcfs is strict FIFO, easy is FIFO order with EASY backfill
// (depth 1), default is core.DefaultPolicy with fair share.
func Policy(name string) (core.Policy, bool, error) {
	switch name {
	case "fcfs":
		return core.Policy{}, false, nil
	case "easy":
		return core.Policy{ReservationDepth: 1}, false, nil
	case "default", "":
		return core.DefaultPolicy(), true, nil
	}
	return core.Policy{}, false, fmt.Errorf("%q: %w", name, ErrPolicy)
}

// MapQOS gives each job the QOS its queue number maps to in spec, a
// comma-separated list of QUEUE=QOS with * for every other queue (e.g.
// "1=high,*=low"), and returns the QOSes for Options.QOS and the first
// named, the most urgent. QOSes rank in the order spec first names them,
// the first highest, and each may preempt every one ranked below it. A
// job whose queue the spec does not map, without *, has none.
func MapQOS(spec string, jobs []Job) (map[string]core.QOS, string, error) {
	byQueue := map[int64]string{}
	other := ""
	var order []string
	for _, item := range strings.Split(spec, ",") {
		q, name, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			return nil, "", fmt.Errorf("%q: want QUEUE=QOS or *=QOS", item)
		}
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
		if q == "*" {
			other = name
			continue
		}
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("%q: the queue is a number (SWF field 15) or *", item)
		}
		byQueue[n] = name
	}
	qs := make(map[string]core.QOS, len(order))
	for i, name := range order {
		qs[name] = core.QOS{Priority: float64(len(order) - i), Preempt: slices.Clone(order[i+1:])}
	}
	for i := range jobs {
		if name, ok := byQueue[jobs[i].Queue]; ok {
			jobs[i].QOS = name
		} else {
			jobs[i].QOS = other
		}
	}
	return qs, order[0], nil
}
