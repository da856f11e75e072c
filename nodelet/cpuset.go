package nodelet

import (
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Cores of their own for containers (runc: the cpuset cgroup). Open MPI
// binds each rank to a core by default (--bind-to core for np ≤ 2, numa
// above); two containers of one node that both see every core would bind
// their ranks to the same first cores. So a container whose request is
// whole cores gets that many cores no live container of this node holds,
// and MPI binds within them. A fraction of a core (or a request the free
// cores cannot meet, on a node offering more cores than it has) gets no
// cores of its own: its CPU quota spreads over all of them, and
// mpiBindingNone tells Open MPI (4.x, and PRRTE in 5.x) not to bind.

// mpiBindingNone is the environment that turns Open MPI's default
// binding off (mpirun's --bind-to none).
var mpiBindingNone = []string{
	"OMPI_MCA_hwloc_base_binding_policy=none",    // Open MPI 4.x (Debian 12's 4.1)
	"PRTE_MCA_hwloc_default_binding_policy=none", // Open MPI 5.x (PRRTE)
}

// cpuSet hands out the node's CPUs to containers, each CPU to one live
// container at most. Safe for concurrent use.
type cpuSet struct {
	mu    sync.Mutex
	cpus  []int          // the CPUs containers may be given, ascending
	owner map[int]string // CPU → the container id holding it
}

// newCPUSet offers cpus (nil: those this process may run on).
func newCPUSet(cpus []int) *cpuSet {
	if cpus == nil {
		cpus = allowedCPUs()
	}
	s := slices.Clone(cpus)
	slices.Sort(s)
	return &cpuSet{cpus: slices.Compact(s), owner: map[int]string{}}
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var out []int
	for i := 0; i < 8192 && len(out) < set.Count(); i++ {
		if set.IsSet(i) {
			out = append(out, i)
		}
	}
	return out
}

// wholeCores is the number of cores a request of milli millicores asks
// for when it is a whole number of them, else 0.
func wholeCores(milli int64) int {
	if milli < 1000 || milli%1000 != 0 || milli > 1000<<16 {
		return 0
	}
	return int(milli / 1000)
}

// take gives container id n free CPUs, the lowest numbered, or none (nil)
// when fewer are free.
func (s *cpuSet) take(id string, n int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var got []int
	for _, c := range s.cpus {
		if len(got) == n {
			break
		}
		if _, held := s.owner[c]; !held {
			got = append(got, c)
		}
	}
	if n <= 0 || len(got) < n {
		return nil
	}
	for _, c := range got {
		s.owner[c] = id
	}
	return got
}

// hold marks cpus as container id's: a container a previous nodelet
// started, re-attached. It returns the CPUs another container holds
// already (none unless records disagree).
func (s *cpuSet) hold(id string, cpus []int) (clash []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cpus {
		if o, held := s.owner[c]; held && o != id {
			clash = append(clash, c)
			continue
		}
		s.owner[c] = id
	}
	return clash
}

// release frees the CPUs container id holds.
func (s *cpuSet) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, o := range s.owner {
		if o == id {
			delete(s.owner, c)
		}
	}
}

// held lists the CPUs container id holds, ascending.
func (s *cpuSet) held(id string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for c, o := range s.owner {
		if o == id {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// hasEnv reports whether env sets name.
func hasEnv(env []string, name string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}
