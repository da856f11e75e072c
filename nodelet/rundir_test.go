package nodelet

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestAgentRunDirApart: a container's directory (bundle, overlay, exit
// file) and session files are in the run directory, its home, which the
// job writes, is in the state directory's homes/; both go with it.
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
		if !runtimetest.WaitFor(10*time.Second, func() bool { _, err := os.Stat(filepath.Join(home, "f")); return err == nil }) {
			t.Fatalf("the job's home/f is not in %s: %s", home, lsR(cfg.StateDir))
		}
		if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("home %s: %v, mode %v, want 0700", home, err, fi.Mode().Perm())
		}
		run := runDirOf(cfg)
		if rt == RuntimeRunc {
			if _, err := os.Stat(filepath.Join(run, "containers", cid, "bundle", "config.json")); err != nil {
				t.Errorf("the bundle is not in the run directory: %v", err)
			}
			if _, err := os.Stat(filepath.Join(run, "runc", cid)); err != nil {
				t.Errorf("the OCI runtime's state is not in the run directory: %v", err)
			}
		}
		if _, err := os.Stat(filepath.Join(run, "files", cid, "hosts")); err != nil {
			t.Errorf("the session files are not in the run directory: %v", err)
		}
		for _, d := range []string{"containers", "files", "runc"} {
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
