package nodelet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

func TestCPUSetTakeRelease(t *testing.T) {
	s := newCPUSet([]int{3, 0, 1, 2})
	if got := s.take("a", 2); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("a took %v, want [0 1]", got)
	}
	if got := s.take("b", 3); got != nil {
		t.Fatalf("b took %v of 2 free, want none", got)
	}
	if got := s.take("b", 2); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("b took %v, want [2 3]", got)
	}
	s.release("a")
	if clash := s.hold("c", []int{1, 3}); !slices.Equal(clash, []int{3}) || !slices.Equal(s.held("c"), []int{1}) {
		t.Fatalf("hold: clash %v, c holds %v", clash, s.held("c"))
	}
	if got := s.take("d", 1); !slices.Equal(got, []int{0}) {
		t.Fatalf("d took %v, want [0]", got)
	}
	for _, c := range []struct {
		milli int64
		want  int
	}{{1000, 1}, {4000, 4}, {500, 0}, {1500, 0}, {0, 0}, {999, 0}} {
		if got := wholeCores(c.milli); got != c.want {
			t.Errorf("wholeCores(%v) = %d, want %d", c.milli, got, c.want)
		}
	}
}

// cpusSeen waits for the container's first output line and the MPI
// binding variable it saw.
func cpusSeen(t *testing.T, path string) (cpus, binding string) {
	t.Helper()
	var out string
	if !eventually.Within(20*time.Second, func() bool {
		b, _ := os.ReadFile(path)
		out = string(b)
		return strings.Contains(out, "end-of-env")
	}) {
		t.Fatalf("%s: %q, want the container's report", path, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			cpus = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "OMPI_MCA_hwloc_base_binding_policy="); ok {
			binding = v
		}
	}
	return cpus, binding
}

// TestAgentCoresOfTheirOwn (issue 14 item 5): under runc two 1-core
// containers of one node get disjoint cores (Cpus_allowed_list), so that
// Open MPI's default --bind-to core in each never lands on the same one;
// a fraction of a core, or whole cores none are free for, gets all of
// them and Open MPI's binding off. A restarted nodelet rebuilds who holds
// which core from the containers it re-attaches to, and frees a core
// when its container ends.
func TestAgentCoresOfTheirOwn(t *testing.T) {
	needRunc(t)
	all := runtimetest.AllowedCPUs(t)
	if len(all) < 2 {
		t.Skipf("SKIP: needs 2 CPUs this process may run on, has %v", all)
	}
	allList := runtime.CPUList(all)
	s := newTestSchedd(t)
	state := t.TempDir()
	// The node offers more cores than it has, as a dev node may: the
	// whole-core containers beyond its CPUs get none of their own.
	roomy := func(c *Config) { c.CPU = float64(len(all) + 4) }
	_, _, detach := startAgentCause(t, s, RuntimeRunc, state, roomy)
	cwd := t.TempDir()
	report := sh(`grep Cpus_allowed_list /proc/self/status; env | grep _binding_policy; echo end-of-env; exec sleep 300`)
	cores := func(n float64) func(*jobspec.Job) { return func(j *jobspec.Job) { j.Resources.CPU = n } }
	out := func(id uint64) string { return filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)) }

	held := map[string]uint64{} // core → the job holding it
	var jobs []uint64
	for range all {
		id := s.submit(t, cwd, cores(1), report)
		jobs = append(jobs, id)
		cpus, binding := cpusSeen(t, out(id))
		if strings.ContainsAny(cpus, ",-") || binding != "" {
			t.Fatalf("1-core job %d: cpus %q, binding %q; want one core of its own and MPI's default binding", id, cpus, binding)
		}
		if other, dup := held[cpus]; dup {
			t.Fatalf("jobs %d and %d both got core %s", other, id, cpus)
		}
		held[cpus] = id
	}
	frac := s.submit(t, cwd, cores(0.5), report)
	if cpus, binding := cpusSeen(t, out(frac)); cpus != allList || binding != "none" {
		t.Errorf("half-core job: cpus %q, binding %q; want %s and none", cpus, binding, allList)
	}

	// A restarted nodelet knows the cores are taken: a 1-core job gets
	// none of its own; once a holder ends, the next gets its core.
	detach()
	startAgentCause(t, s, RuntimeRunc, state, roomy)
	for _, id := range jobs {
		if j := s.waitJob(t, id, func(api.Job) bool { return true }); j.State != api.JobRunning {
			t.Fatalf("after the restart job %d is %s, want RUNNING", id, j.State)
		}
	}
	late := s.submit(t, cwd, cores(1), report)
	if cpus, binding := cpusSeen(t, out(late)); cpus != allList || binding != "none" {
		t.Errorf("1-core job while every core is held: cpus %q, binding %q; want %s and none", cpus, binding, allList)
	}
	if _, err := s.cli.Kill(t.Context(), jobs[0]); err != nil {
		t.Fatal(err)
	}
	s.waitJob(t, jobs[0], func(j api.Job) bool { return j.State.Terminal() })
	var freed string
	for c, id := range held {
		if id == jobs[0] {
			freed = c
		}
	}
	next := s.submit(t, cwd, cores(1), report)
	if cpus, binding := cpusSeen(t, out(next)); cpus != freed || binding != "" {
		t.Errorf("1-core job after job %d ended: cpus %q, binding %q; want its core %s", jobs[0], cpus, binding, freed)
	}
}

// TestAgentMPIBindsInItsCores: Open MPI's mpirun in a 1-core runc
// container, beside another holding the first core, binds its rank
// (--bind-to core) within the container's own core: hwloc finds the
// container's cpuset (its own cgroup namespace). Without it hwloc saw
// every core, bound to the first, and the launch failed.
func TestAgentMPIBindsInItsCores(t *testing.T) {
	needRunc(t)
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("SKIP: needs Open MPI's mpirun (openmpi-bin)")
	}
	all := runtimetest.AllowedCPUs(t)
	if len(all) < 2 {
		t.Skipf("SKIP: needs 2 CPUs this process may run on, has %v", all)
	}
	s := newTestSchedd(t)
	startAgentCause(t, s, RuntimeRunc, t.TempDir())
	cwd := t.TempDir()
	hold := s.submit(t, cwd, func(j *jobspec.Job) { j.Resources.CPU = 1 }, sh("exec sleep 300"))
	s.waitState(t, hold, "main1", api.ContainerRunning)
	id := s.submit(t, cwd, func(j *jobspec.Job) { j.Resources.CPU = 1 },
		sh("mpirun --allow-run-as-root -np 1 --bind-to core grep Cpus_allowed_list /proc/self/status 2>&1"))
	j := s.waitJob(t, id, func(j api.Job) bool { return j.State.Terminal() })
	got := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)))
	if want := fmt.Sprintf("Cpus_allowed_list:\t%d", all[1]); j.State != api.JobCompleted || got != want {
		t.Errorf("mpirun --bind-to core in the container given core %d: job %s, output %q; want COMPLETED, %q", all[1], j.State, got, want)
	}
}
