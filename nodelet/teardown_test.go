package nodelet

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// hookedRuntime runs destroy in place of its containers' Destroy.
type hookedRuntime struct {
	runtime.Runtime
	destroy func(c runtime.Container, ctx context.Context) error
}

func (r hookedRuntime) Start(ctx context.Context, spec runtime.Spec) (runtime.Container, error) {
	c, err := r.Runtime.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return hookedContainer{c, r.destroy}, nil
}

type hookedContainer struct {
	runtime.Container
	destroy func(c runtime.Container, ctx context.Context) error
}

func (c hookedContainer) Destroy(ctx context.Context) error { return c.destroy(c.Container, ctx) }

// startAgentWrapped is startAgentCause with the runtime's Destroy
// replaced by destroy.
func startAgentWrapped(t *testing.T, s *testSchedd, rt, stateDir string, destroy func(c runtime.Container, ctx context.Context) error) (Config, func(), func()) {
	t.Helper()
	p := parts{wrapRuntime: func(r runtime.Runtime) runtime.Runtime { return hookedRuntime{r, destroy} }}
	return runAgent(t, Config{Addr: s.hs.URL}, p, rt, stateDir)
}

// TestAgentReportsExitBeforeTeardown: the exit (with its code) reaches
// schedd while the container's Destroy still blocks; teardown finishes
// after.
func TestAgentReportsExitBeforeTeardown(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		s := newTestSchedd(t)
		release := make(chan struct{})
		entered := make(chan struct{})
		var once sync.Once
		cfg, _, _ := startAgentWrapped(t, s, rt, t.TempDir(), func(c runtime.Container, ctx context.Context) error {
			once.Do(func() { close(entered) })
			<-release
			return c.Destroy(ctx)
		})
		var rel sync.Once
		t.Cleanup(func() { rel.Do(func() { close(release) }) }) // before the agent stops
		id := s.submit(t, t.TempDir(), nil, sh("exit 5"))
		u := s.waitState(t, id, "main1", api.ContainerExited)
		if u.ExitCode != 5 {
			t.Errorf("exit code = %d, want 5", u.ExitCode)
		}
		select {
		case <-entered:
		default:
			t.Error("exit reported before teardown began")
		}
		// The slot is schedd's again: the next job runs while the first
		// one's Destroy still blocks.
		next := s.submit(t, t.TempDir(), nil, sh("exit 0"))
		s.waitState(t, next, "main1", api.ContainerRunning)
		rel.Do(func() { close(release) })
		s.waitState(t, next, "main1", api.ContainerExited)
		// Teardown runs after the report: wait for it (records included).
		assertNothingLeft(t, cfg, rt, append(s.containerIDs(t, id), s.containerIDs(t, next)...))
	})
}

// TestAgentFinishesTeardownAfterCrash: a nodelet that dies in the middle
// of a teardown (after the exit was reported, before anything was torn
// down) leaves a record in state "exited, tearing down"; the next
// nodelet finishes the teardown (runc container, cgroup, bundle, network
// links and namespace, files, record) and reports nothing else for it.
func TestAgentFinishesTeardownAfterCrash(t *testing.T) {
	needRunc(t)
	s := newTestSchedd(t)
	state := t.TempDir()
	died := make(chan struct{})
	_, _, detach := startAgentWrapped(t, s, RuntimeRunc, state, func(runtime.Container, context.Context) error {
		close(died)
		goruntime.Goexit() // the task dies here, as the nodelet would
		return nil
	})
	id := s.submit(t, t.TempDir(), nil, sh("exit 6"))
	if u := s.waitState(t, id, "main1", api.ContainerExited); u.ExitCode != 6 {
		t.Errorf("exit code = %d, want 6", u.ExitCode)
	}
	<-died
	cid := s.containerIDs(t, id)[0]
	b, err := os.ReadFile(filepath.Join(state, "run", "records", cid+".json"))
	if err != nil {
		t.Fatalf("no record of the container tearing down: %v", err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.Exit == nil || r.Exit.State != api.ContainerExited || r.Exit.ExitCode != 6 {
		t.Fatalf("record = %s (%v), want its exit 6 marked", b, err)
	}
	detach()
	out, _ := exec.Command("runc", "--root", filepath.Join(state, "run", "runc"), "list", "-q").Output()
	if !strings.Contains(string(out), cid) {
		t.Fatalf("runc lists %q, want %s left by the dead nodelet", out, cid)
	}

	cfg, _ := startAgentIn(t, s, RuntimeRunc, state)
	assertNothingLeft(t, cfg, RuntimeRunc, []string{cid})
	if !waitRecordsGone(state) {
		t.Errorf("records left: %s", lsR(filepath.Join(state, "run", "records")))
	}
	j := s.waitJob(t, id, func(j api.Job) bool { return j.State.Terminal() })
	if j.ExitCode != 6 {
		t.Errorf("job exit code = %d, want 6", j.ExitCode)
	}
	for _, u := range s.states(id, "main1") {
		if u.State == api.ContainerFailed || u.State == api.ContainerKilled {
			t.Errorf("reported %s after the restart: %s", u.State, u.Message)
		}
	}
}

func waitRecordsGone(state string) bool {
	ents, _ := os.ReadDir(filepath.Join(state, "run", "records"))
	return len(ents) == 0
}
