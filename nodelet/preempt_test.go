package nodelet

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
)

// A preempted job whose file asks for a warning signal gets it from its
// nodelet in the same assignment that stops it, before the TERM; a main1
// that ignores TERM is killed with SIGKILL once its partition's grace
// (the assignment's StopGrace) has passed, not before.
func TestAgentPreemptWarnThenGrace(t *testing.T) {
	f := newFakeSchedd()
	const id = 1
	cwd := t.TempDir()
	log := filepath.Join(cwd, "signals")
	f.assign(fakeJob(t, id, cwd, nil,
		sh(`cd `+cwd+` && trap "echo usr1 >> signals" USR1; trap "echo term >> signals" TERM; echo up > ready; while :; do sleep 0.05; done`)))
	startFakeAgent(t, f, RuntimeProcess, t.TempDir())
	f.waitState(t, id, "main1", api.ContainerRunning)
	if !eventually.Within(10*time.Second, func() bool { _, err := os.Stat(filepath.Join(cwd, "ready")); return err == nil }) {
		t.Fatal("main1 never set its traps")
	}

	const grace = 1500 * time.Millisecond
	began := time.Now()
	f.mu.Lock()
	f.assigned[0].StopGrace = grace
	f.mu.Unlock()
	f.update(id, func(j *api.AssignedJob) {
		j.KillWanted, j.Containers[0].State = true, api.ContainerRunning
		j.Signals = []api.SignalRequest{{Seq: 1, Signal: int(syscall.SIGUSR1), Time: began}}
	})
	var got string
	if !eventually.Within(grace, func() bool {
		b, _ := os.ReadFile(log)
		got = string(b)
		return strings.Contains(got, "term")
	}) {
		t.Fatalf("main1 had no TERM within the grace: it logged %q", got)
	}
	if got != "usr1\nterm\n" {
		t.Errorf("main1 logged %q; want the warning (usr1), then term", got)
	}
	u := f.waitState(t, id, "main1", api.ContainerKilled)
	if took := time.Since(began); took < grace {
		t.Errorf("main1 killed %v after the stop; want no SIGKILL before the grace (%v)", took, grace)
	}
	if !strings.Contains(u.Message, "SIGKILL after grace") {
		t.Errorf("main1 killed with message %q; want the SIGKILL escalation", u.Message)
	}
}
