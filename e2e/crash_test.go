package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// startSchedd starts `schedd --dev` on dir with one process-runtime node
// and returns it with its address.
func startSchedd(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin+"/schedd", "--dev", "--data-dir", dir, "--nodes", "1",
		"--node-cpu", "1", "--node-memory", "1GiB", "--runtime", "process", "--stop-grace", "1s")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := scanAddr(out)
	select {
	case a := <-addr:
		return cmd, a
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("schedd did not start in 60s")
	}
	return nil, ""
}

// TestCrashLosesNothing kills schedd with SIGKILL in the middle of a
// stream of submissions: after a restart every acknowledged job is there,
// none twice, and scheduling goes on.
func TestCrashLosesNothing(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	cmd, addr := startSchedd(t, dir)
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name string) jobspec.Job {
		return jobspec.Job{Name: name, Image: "host", Command: []string{"true"},
			Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
			Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20}}
	}

	const workers, killAfter = 16, 2000
	var (
		mu    sync.Mutex
		acked = map[string]uint64{}
		wg    sync.WaitGroup
		once  sync.Once
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("c%d-%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(name)), User: "root", Cwd: cwd})
				cancel()
				if err != nil {
					return // schedd is gone
				}
				mu.Lock()
				acked[name] = res.JobID
				n := len(acked)
				mu.Unlock()
				if n >= killAfter {
					once.Do(func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
				}
			}
		}()
	}
	wg.Wait()
	_ = cmd.Wait()
	t.Logf("%d submissions acknowledged before SIGKILL", len(acked))
	if len(acked) < killAfter {
		t.Fatalf("only %d acknowledged", len(acked))
	}

	cmd, addr = startSchedd(t, dir)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	c, err = client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.Jobs(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]uint64{}
	for _, j := range list.Jobs {
		byName[j.Name] = append(byName[j.Name], j.ID)
	}
	for name, id := range acked {
		ids := byName[name]
		if len(ids) != 1 || ids[0] != id {
			t.Errorf("acknowledged job %s (id %d) after restart: ids %v", name, id, ids)
		}
	}
	for name, ids := range byName {
		if len(ids) > 1 {
			t.Errorf("job %s stored %d times: %v", name, len(ids), ids)
		}
	}

	// Scheduling goes on: cancel the backlog, then a new job runs to the end.
	for _, j := range list.Jobs {
		if !j.State.Terminal() {
			_, _ = c.Kill(context.Background(), j.ID)
		}
	}
	res, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(spec("after")), User: "root", Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 60*time.Second, "the job submitted after the restart COMPLETED", func() error {
		j, _, err := c.Job(context.Background(), res.JobID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.JobCompleted {
			return fmt.Errorf("%s (%s)", j.State, j.Reason)
		}
		return nil
	})
}
