package nodelet

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestAgentRequeuedRunSurvivesOldRunsTeardown: two nodes on one machine,
// as schedd --dev runs them. A requeue job runs on node1; node1's
// nodelet goes away (detached: its container stays until the node's
// fence kills it), and schedd requeues the job: its second run (the same
// kernel id, Requeues 1) starts on node2. node1's nodelet comes back, no
// longer assigned the job, and tears the first run down; the second run
// lives on. (When a run's container id was the kernel id alone, both
// runs had one cgroup and the teardown killed the second run; e2e
// TestFenceNoOverlap met it as a thawed nodelet ending the requeued job
// FAILED with exit 137.) Each node has its own fake schedd: what matters
// here is what each nodelet is assigned, not how schedd decides it.
func TestAgentRequeuedRunSurvivesOldRunsTeardown(t *testing.T) {
	needRunc(t)
	f1, f2 := newFakeSchedd(), newFakeSchedd()
	node := func(name string) func(*Config) {
		return func(c *Config) { c.Name, c.Network = name, NetworkHost }
	}
	const id = 1
	first := fakeJob(t, id, t.TempDir(), func(j *jobspec.Job) { j.Requeue = true }, sh("exec sleep 600"))
	f1.assign(first)
	state1 := t.TempDir()
	_, _, detach := startFakeAgent(t, f1, RuntimeRunc, state1, node("node1"))
	f1.waitState(t, id, "main1", api.ContainerRunning)
	detach()

	second := first
	second.Requeues, second.Containers = 1, slices.Clone(first.Containers)
	second.Containers[0].Node = "node2"
	f2.assign(second)
	f1.unassign(id)
	cfg2, _, _ := startFakeAgent(t, f2, RuntimeRunc, t.TempDir(), node("node2"))
	ids := []string{ContainerID(&first, "main1"), ContainerID(&second, "main1")}
	if ids[0] == ids[1] {
		t.Fatalf("both runs are container %s", ids[0])
	}
	if !eventually.Within(10*time.Second, func() bool { return initPid(t, cfg2.StateDir, ids[1]) > 0 }) {
		t.Fatalf("second run's container %s not running on node2", ids[1])
	}
	pid := initPid(t, cfg2.StateDir, ids[1])

	// node1's nodelet comes back: its first run is not assigned any
	// more, and it tears it down (the record goes last).
	cfg1, _, _ := startFakeAgent(t, f1, RuntimeRunc, state1, node("node1"))
	if !eventually.Within(20*time.Second, func() bool {
		ents, err := os.ReadDir(filepath.Join(state1, "run", "records"))
		return err == nil && len(ents) == 0
	}) {
		t.Fatalf("node1 did not tear its first run down: %s", lsR(state1))
	}
	if got := initPid(t, cfg2.StateDir, ids[1]); got != pid {
		t.Fatalf("the second run's container on node2 died (init pid %d, was %d) when node1 tore the first run down", got, pid)
	}
	assertNothingLeft(t, cfg1, RuntimeRunc, ids[:1])
	for _, u := range f2.states(id, "main1") {
		if u.State != api.ContainerPreparing && u.State != api.ContainerRunning {
			t.Errorf("second run reported %s: %s", u.State, u.Message)
		}
	}
}

// TestContainerIDPerRun: run 0 keeps the kernel id alone (the name
// containers started before runs were named had), a requeued run adds
// its number, and a re-attached container keeps the id it was started
// with, whatever the rule says now.
func TestContainerIDPerRun(t *testing.T) {
	j := api.AssignedJob{ID: 7, Containers: []api.Container{{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1"}), KernelID: "k"}}}
	if got := ContainerID(&j, "main1"); got != "troupe-k" {
		t.Errorf("run 0: %q, want troupe-k", got)
	}
	j.Requeues = 2
	if got := ContainerID(&j, "main1"); got != "troupe-k-run2" {
		t.Errorf("run 2: %q, want troupe-k-run2", got)
	}
	if got := ContainerID(&j, "sub1"); got != "troupe-j7-sub1-run2" {
		t.Errorf("run 2 without a kernel id: %q, want troupe-j7-sub1-run2", got)
	}
	k := key{7, "main1", 2}
	if got := (&task{key: k, job: j}).id(); got != "troupe-k-run2" {
		t.Errorf("new task: %q, want troupe-k-run2", got)
	}
	if got := (&task{key: k, job: j, cid: "troupe-k"}).id(); got != "troupe-k" {
		t.Errorf("re-attached task: %q, want its recorded troupe-k", got)
	}
}
