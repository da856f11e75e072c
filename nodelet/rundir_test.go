package nodelet

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
)

// TestAgentRunDirApart: a container's directory (bundle, overlay, exit
// file), session files and network namespace's pin are in the run
// directory, its home, which the job writes, is in the state
// directory's homes/; all go with it.
func TestAgentRunDirApart(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		s := newTestSchedd(t)
		cfg, _ := startAgent(t, s, rt)
		// The job writes its home (its working directory), then waits
		// for a file the test puts there from the host side.
		id := s.submit(t, t.TempDir(), nil, sh(`echo kept > f; while [ ! -e go ]; do sleep 0.05; done`))
		s.waitState(t, id, "main1", api.ContainerRunning)
		cid := s.containerIDs(t, id)[0]
		home := filepath.Join(cfg.StateDir, "homes", cid)
		if !eventually.Within(10*time.Second, func() bool { _, err := os.Stat(filepath.Join(home, "f")); return err == nil }) {
			t.Fatalf("the job's home/f is not in %s: %s", home, lsR(cfg.StateDir))
		}
		if fi, err := os.Stat(home); err != nil {
			t.Errorf("home %s: %v", home, err)
		} else if fi.Mode().Perm() != 0o700 {
			t.Errorf("home %s: mode %v, want 0700", home, fi.Mode().Perm())
		}
		run := runDirOf(cfg)
		if rt == RuntimeRunc {
			if _, err := os.Stat(filepath.Join(run, "containers", cid, "bundle", "config.json")); err != nil {
				t.Errorf("the bundle is not in the run directory: %v", err)
			}
			if _, err := os.Stat(filepath.Join(run, "runc", cid)); err != nil {
				t.Errorf("the OCI runtime's state is not in the run directory: %v", err)
			}
			if !isPinnedNetNS(filepath.Join(run, "netns", cid)) {
				t.Errorf("the network namespace is not pinned in the run directory: %s", lsR(run))
			}
			if fi, err := os.Stat(filepath.Join(run, "netns")); err != nil {
				t.Error(err)
			} else if fi.Mode().Perm() != 0o700 {
				t.Errorf("the run directory's netns: mode %v, want 0700", fi.Mode().Perm())
			}
		}
		if _, err := os.Stat(filepath.Join(run, "files", cid, "layer", "etc", "hosts")); err != nil {
			t.Errorf("the session files are not in the run directory: %v", err)
		}
		if _, err := os.Stat(filepath.Join(run, "records", cid+".json")); err != nil {
			t.Errorf("the container's record is not in the run directory: %v", err)
		}
		if _, err := os.Stat(filepath.Join(cfg.StateDir, "records", cid+".json")); err == nil {
			t.Errorf("the container's record is in the state directory, want it in the run directory only")
		}
		for _, d := range []string{"containers", "files", "runc", "netns"} {
			if _, err := os.Stat(filepath.Join(cfg.StateDir, d, cid)); err == nil {
				t.Errorf("%s/%s/%s in the state directory, want it in the run directory only", cfg.StateDir, d, cid)
			}
		}
		if err := os.WriteFile(filepath.Join(home, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if u := s.waitState(t, id, "main1", api.ContainerExited); u.ExitCode != 0 {
			t.Errorf("exit %d, want 0", u.ExitCode)
		}
		assertNothingLeft(t, cfg, rt, []string{cid})
	})
}

// TestAgentReattachesFromBeforeRunDir: a nodelet upgraded while its
// containers run (detached) finds those of the layout before the run
// directory, everything under the state directory, re-attaches to them
// and keeps their OCI runtime's root until they are gone, and their
// network namespaces pinned where they are (their records say so) while
// it sweeps the old nodelet's pool; the nodelet after that puts its
// containers in the run directory. Nothing of either layout is left.
func TestAgentReattachesFromBeforeRunDir(t *testing.T) {
	needRunc(t)
	s := newTestSchedd(t)
	state := t.TempDir()
	// The layout before: RunDir is the state directory itself
	// (containers/, files/, runc/ under it).
	old := func(c *Config) { c.RunDir = state }
	_, _, detach := startAgentCause(t, s, RuntimeRunc, state, old)
	data := t.TempDir() // data/go lets the container end, after the upgrade
	id := s.submit(t, t.TempDir(), func(j *jobspec.Job) {
		j.Mounts = []jobspec.Mount{{Name: "data", Source: data, Target: "/data"}}
	}, sh("while [ ! -e /data/go ]; do sleep 0.1; done; exit 3"))
	s.waitState(t, id, "main1", api.ContainerRunning)
	cid := s.containerIDs(t, id)[0]
	legacyRoot := filepath.Join(state, "runc")
	pid := initPidIn(t, legacyRoot, cid)
	if _, err := os.Stat(filepath.Join(legacyRoot, cid)); err != nil {
		t.Fatalf("the old layout's container is not under %s: %v", legacyRoot, err)
	}
	legacyPin := filepath.Join(state, "netns", cid)
	if !isPinnedNetNS(legacyPin) {
		t.Fatalf("the old layout's network namespace is not pinned at %s: %s", legacyPin, lsR(state))
	}
	var rec record
	if b, err := os.ReadFile(filepath.Join(state, "records", cid+".json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &rec); err != nil || rec.NetNS != legacyPin {
		t.Fatalf("the old layout's record: netns %q (%v), want %s", rec.NetNS, err, legacyPin)
	}
	// The old nodelet's pool, left with its containers.
	if !eventually.Within(10*time.Second, func() bool { return hasEntries(filepath.Join(state, "netns-pool")) }) {
		t.Fatalf("the old layout's netns pool is empty: %s", lsR(state))
	}
	detach()

	// The upgraded nodelet: default run directory, state/run.
	cfg, stop := startAgentIn(t, s, RuntimeRunc, state)
	if j := s.waitJob(t, id, func(api.Job) bool { return true }); j.State != api.JobRunning {
		t.Fatalf("after the upgrade job %d is %s, want RUNNING", id, j.State)
	}
	if got := initPidIn(t, legacyRoot, cid); pid == 0 || got != pid {
		t.Fatalf("after the upgrade: init pid %d, want %d, re-attached", got, pid)
	}
	// Its record moved to the run directory (by the recovery, which the
	// checks above may come before).
	moved, legacyRecords := filepath.Join(runDirOf(cfg), "records", cid+".json"), filepath.Join(state, "records")
	eventually.Within(10*time.Second, func() bool {
		_, err := os.Stat(moved)
		_, lerr := os.Stat(legacyRecords)
		return err == nil && errors.Is(lerr, os.ErrNotExist)
	})
	if b, err := os.ReadFile(moved); err != nil {
		t.Errorf("after the upgrade the record is not in the run directory: %v", err)
	} else if err := json.Unmarshal(b, &rec); err != nil || rec.ID != cid || rec.NetNS != legacyPin {
		t.Errorf("after the upgrade the record: id %q, netns %q (%v), want %s and %s", rec.ID, rec.NetNS, err, cid, legacyPin)
	}
	if _, err := os.Stat(legacyRecords); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the upgrade the state directory's records are left: %s", lsR(legacyRecords))
	}
	// The upgraded nodelet's recovery sweeps the old pool, and keeps the
	// re-attached container's pin.
	oldPool := filepath.Join(state, "netns-pool")
	if !eventually.Within(30*time.Second, func() bool { _, err := os.Stat(oldPool); return errors.Is(err, os.ErrNotExist) }) {
		t.Errorf("after the upgrade the old nodelet's netns pool is left: %s", lsR(oldPool))
	}
	if !isPinnedNetNS(legacyPin) {
		t.Errorf("after the upgrade the re-attached container's namespace is no longer pinned at %s", legacyPin)
	}
	if _, err := os.Stat(filepath.Join(runDirOf(cfg), "netns", cid)); err == nil {
		t.Errorf("the re-attached container is pinned in the run directory too")
	}
	if err := os.WriteFile(filepath.Join(data, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if u := s.waitState(t, id, "main1", api.ContainerExited); u.ExitCode != 3 {
		t.Errorf("re-attached container: exit %d, want 3", u.ExitCode)
	}
	for _, u := range s.states(id, "main1") {
		if u.State == api.ContainerFailed || u.State == api.ContainerKilled {
			t.Errorf("re-attached container reported %s: %s", u.State, u.Message)
		}
	}
	assertNothingLeft(t, cfg, RuntimeRunc, []string{cid})
	if _, err := os.Stat(filepath.Join(state, "netns")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old layout's netns directory is left after its last container: %v", err)
	}
	stop()

	// The next start finds nothing under the old root: its containers
	// are in the run directory.
	startAgentIn(t, s, RuntimeRunc, state)
	next := s.submit(t, t.TempDir(), nil, sh("sleep 30"))
	s.waitState(t, next, "main1", api.ContainerRunning)
	ncid := s.containerIDs(t, next)[0]
	if _, err := os.Stat(filepath.Join(state, "run", "runc", ncid)); err != nil {
		t.Errorf("a container after the old ones ended is not under the run directory's runc root: %v (%s)", err, lsR(state))
	}
	if !isPinnedNetNS(filepath.Join(state, "run", "netns", ncid)) {
		t.Errorf("a container after the old ones ended is not pinned in the run directory: %s", lsR(state))
	}
}

// isPinnedNetNS tells whether p is a network namespace's pin: a file
// with nsfs mounted on it.
func isPinnedNetNS(p string) bool {
	var st unix.Statfs_t
	return unix.Statfs(p, &st) == nil && st.Type == unix.NSFS_MAGIC
}
