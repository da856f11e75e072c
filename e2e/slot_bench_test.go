package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// BenchmarkSlotTurnover measures how long a one-container job holds its
// slot: on one node of one cpu, slotJobs jobs of one cpu submitted at
// once run one after another. Each job's command prints the time
// (date +%s%N) and exits, as good as `true`. Metrics (median and p90
// over the jobs):
//
//	exit-report: the printed time → the job's Ended in schedd (the
//	  process exits, the nodelet reports, schedd commits);
//	slot: the job's Started → the next job's Started (a whole turn of
//	  the slot: report, placement, start of the next; a job whose running
//	  and exited reports came together has no Started and is left out);
//	jobs/s: slotJobs over their submission → the last one's Ended.
//
//	sudo go test ./e2e -run '^$' -bench SlotTurnover -benchtime 1x
func BenchmarkSlotTurnover(b *testing.B) {
	const slotJobs = 50
	needRunc(b)
	c := startCluster(b, 1, "1")
	cli, err := client.New(c.addr)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var exitReport, slot []time.Duration
	var ran int
	var busy time.Duration
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		spec := jobspec.Job{
			Name: "turn", Image: "host",
			Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
			Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20},
			Command:   []string{"date", "+%s%N"},
			Output:    filepath.Join(dir, "turn-%j.out"),
		}
		var ids []uint64
		for range slotJobs {
			res, err := cli.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec), Cwd: dir, User: "root"})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, res.JobID)
		}
		var jobs []api.Job
		for _, id := range ids {
			j := c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.State.Terminal() })
			if j.State != api.JobCompleted {
				b.Fatalf("job %d ended %s (%s)", j.ID, j.State, j.Reason)
			}
			jobs = append(jobs, j)
		}
		slices.SortFunc(jobs, func(x, y api.Job) int { return x.Ended.Compare(y.Ended) })
		ran, busy = ran+len(jobs), busy+jobs[len(jobs)-1].Ended.Sub(jobs[0].Submitted)
		slices.SortFunc(jobs, func(x, y api.Job) int { return x.Started.Compare(y.Started) })
		for k, j := range jobs {
			out, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("turn-%d.out", j.ID)))
			if err != nil {
				b.Fatal(err)
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
			if err != nil {
				b.Fatalf("job %d printed %q", j.ID, out)
			}
			exitReport = append(exitReport, j.Ended.Sub(time.Unix(0, ns)))
			if k+1 < len(jobs) && !j.Started.IsZero() {
				slot = append(slot, jobs[k+1].Started.Sub(j.Started))
			}
		}
	}
	report := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		med, p90 := ds[len(ds)/2], ds[len(ds)*9/10]
		b.ReportMetric(float64(med.Microseconds())/1000, name+"-ms-median")
		b.ReportMetric(float64(p90.Microseconds())/1000, name+"-ms-p90")
	}
	report("exit-report", exitReport)
	report("slot", slot)
	b.ReportMetric(float64(ran)/busy.Seconds(), "jobs/s")
}
