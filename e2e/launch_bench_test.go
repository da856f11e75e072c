package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// BenchmarkSessionLaunch is the launch target (docs/scale.md, "Targets"): a 4-container
// multi-node session over two test hosts, from submit until every
// container runs with its sshd answering (main1's troupe-ssh probe has
// run `true` over ssh in all four). Target: < 1 s. Metrics: ms/ready
// (submit → all sshd answer, seen by the test) and ms/running (schedd's
// own Started − Submitted: every container reported running).
//
//	sudo go test ./e2e -run '^$' -bench SessionLaunch -benchtime 10x
func BenchmarkSessionLaunch(b *testing.B) {
	needRunc(b)
	c := startCluster(b, 2, "4")
	cli, err := client.New(c.addr)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	spec := jobspec.Job{
		Name: "launch", Image: "host",
		Cluster:   jobspec.Cluster{Size: 4, Mode: jobspec.ModeMultiNode},
		Resources: jobspec.Resources{CPU: 2, Memory: 256 << 20}, // 2 per 4-cpu host
		Command:   []string{"/.troupe/bin/troupe-ssh", "probe", "main1", "sub1", "sub2", "sub3"},
		Output:    filepath.Join(dir, "launch-%j.out"),
	}
	ctx := context.Background()
	var ready, running time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := cli.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec), Cwd: dir, User: "root"})
		if err != nil {
			b.Fatal(err)
		}
		out := filepath.Join(dir, fmt.Sprintf("launch-%d.out", res.JobID))
		for {
			if b, _ := os.ReadFile(out); strings.Contains(string(b), "ready") {
				break
			}
			if time.Since(t0) > 30*time.Second {
				b.Fatalf("job %d: sshd not answering after 30s: %+v", res.JobID, c.job(res.JobID))
			}
			time.Sleep(time.Millisecond)
		}
		d := time.Since(t0)
		ready += d
		b.StopTimer()
		j := c.waitState(res.JobID, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
		if j.State != api.JobCompleted {
			b.Fatalf("job %d ended %s (%s)", j.ID, j.State, j.Reason)
		}
		running += j.Started.Sub(j.Submitted)
		b.Logf("launch %d: all sshd answering %v, all running (schedd) %v", i+1, d.Round(time.Millisecond), j.Started.Sub(j.Submitted).Round(time.Millisecond))
		b.StartTimer()
	}
	b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms/ready")
	b.ReportMetric(float64(running.Milliseconds())/float64(b.N), "ms/running")
}
