package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/sched"
)

// admissionPartitions has limits for the table below to break.
const admissionPartitions = `
default_partition = "cpu"

partition "cpu" {
  nodes            = ["n[1-2]"]
  max_walltime     = "2h"
  max_cluster_size = 4
  allowed_modes    = ["single-node"]
  user_limits {
    max_cpu = 3
  }
}
`

// limitedSchedd is a real schedd with admissionPartitions, a max_job_input
// of 4096 bytes and one 4-cpu node, behind HTTP.
func limitedSchedd(t *testing.T) (*sched.Server, string) {
	t.Helper()
	parts := filepath.Join(t.TempDir(), "partitions.hcl")
	if err := os.WriteFile(parts, []byte(admissionPartitions), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), PartitionsFile: parts, MaxJobInput: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); srv.Close() })
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(ctx, api.NodeRegister{Name: "n1", Addr: "127.0.0.1", Runtime: "process",
		Capacity: api.Resources{CPUMilli: 4000, Memory: 16 << 30}}); err != nil {
		t.Fatal(err)
	}
	return srv, hs.URL
}

// TestRefusalNamesFileLine: against a real schedd, a job file that
// breaks a partition's limits is refused by submit and by --dry-run with
// the file's line and column for each setting the file wrote; a limit a
// flag broke has none (it is not in the file).
func TestRefusalNamesFileLine(t *testing.T) {
	srv, addr := limitedSchedd(t)
	src := strings.Replace(goodJob, `  image   = "host"`, "  walltime = \"3h\"\n  image   = \"host\"", 1)
	src = strings.Replace(src, "cpu    = 1", "cpu    = 2", 1)
	job := writeJob(t, src)
	walltime := job + `:10:14: walltime 3h exceeds partition cpu's limit of 2h (max_walltime)`
	cpus := job + `:7:14: the job needs 4 cpus; partition cpu lets one user hold 3 (user_limits.max_cpu)`

	code, _, errs := runBsub("--addr", addr, job)
	if want := "bsub: invalid request: " + walltime + "; " + cpus + "\n"; code != 1 || errs != want {
		t.Errorf("submit: exit %d, stderr %q\nwant %q", code, errs, want)
	}
	code, out, errs := runBsub("--addr", addr, "--dry-run", job)
	if code != 1 || !strings.Contains(out, "refused: "+walltime+"\n") || !strings.Contains(out, "refused: "+cpus+"\n") {
		t.Errorf("dry run: exit %d, stdout %s", code, out)
	}
	if want := "bsub: dry run: schedd would refuse the job: " + walltime + "; " + cpus + "\n"; errs != want {
		t.Errorf("dry run: stderr %q\nwant %q", errs, want)
	}

	// -W set the walltime: the file is not at fault there.
	code, _, errs = runBsub("--addr", addr, "-W", "5h", job)
	if want := "bsub: invalid request: walltime 5h exceeds partition cpu's limit of 2h (max_walltime); " + cpus + "\n"; code != 1 || errs != want {
		t.Errorf("submit -W 5h: exit %d, stderr %q\nwant %q", code, errs, want)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Fatalf("%d jobs stored by refused submissions", n)
	}
}

// TestDryRunAgreesWithSubmit: over a table of jobs, bsub --dry-run and
// bsub against the same real schedd give the same verdict in the same
// words (both ask sched/admission); what the dry run takes, submit
// stores in the partition it named.
func TestDryRunAgreesWithSubmit(t *testing.T) {
	srv, addr := limitedSchedd(t)
	file := func(from, to string) string { return writeJob(t, strings.Replace(goodJob, from, to, 1)) }
	tests := []struct {
		name string
		args []string
	}{
		{"fits", []string{writeJob(t, goodJob)}},
		{"held", []string{"-H", writeJob(t, goodJob)}},
		{"walltime in the file", []string{file(`  image   = "host"`, "  walltime = \"9h\"\n  image   = \"host\"")}},
		{"walltime by -W", []string{"-W", "9h", writeJob(t, goodJob)}},
		{"cluster size in the file", []string{file("size = 2", "size = 5")}},
		{"cluster size by -n", []string{"-n", "5", writeJob(t, goodJob)}},
		{"mode", []string{file("size = 2", "size = 2\n    mode = \"multi-node\"")}},
		{"user cpu cap", []string{file("cpu    = 1", "cpu    = 2")}},
		{"never fits", []string{file(`memory = "1GiB"`, `memory = "20GiB"`)}},
		{"unknown partition", []string{"-q", "nope", writeJob(t, goodJob)}},
		{"partition in the file", []string{file(`partition = "cpu"`, `partition = "gpu"`)}},
		{"unknown dependency", []string{"-w", "done(99)", writeJob(t, goodJob)}},
		{"script", []string{"-n", "5", "hostname"}},
		// bsub once put its own words (and the file's line) on this one.
		{"input cap", []string{file(`command = ["hostname"]`, "command = [\"hostname\"]\n  env     = { DATA = \""+strings.Repeat("d", 5000)+"\" }")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dcode, dout, derrs := runBsub(append([]string{"--addr", addr, "--dry-run"}, tt.args...)...)
			scode, sout, serrs := runBsub(append([]string{"--addr", addr}, tt.args...)...)
			if (dcode == 0) != (scode == 0) {
				t.Fatalf("dry run exit %d (%q), submit exit %d (%q)", dcode, derrs, scode, serrs)
			}
			if scode != 0 {
				dwhy, ok1 := strings.CutPrefix(derrs, "bsub: dry run: schedd would refuse the job: ")
				swhy, ok2 := strings.CutPrefix(serrs, "bsub: invalid request: ")
				if !ok1 || !ok2 || dwhy != swhy {
					t.Fatalf("dry run says %q\nsubmit says %q", derrs, serrs)
				}
				return
			}
			var id uint64
			const part = "cpu" // the only one
			if _, err := fmt.Sscanf(sout, "Job <%d> is submitted to partition <"+part+">.\n", &id); err != nil {
				t.Fatalf("submit printed %q: %v", sout, err)
			}
			if !strings.Contains(dout, "Verdict: schedd would take it into partition "+part+" ") {
				t.Fatalf("dry run:\n%s\nsubmit: %s", dout, sout)
			}
			if j := srv.Store().Snapshot().Job(id); j == nil || j.Partition != part {
				t.Fatalf("job %d: %+v", id, j)
			}
		})
	}
}

// TestDryRunAgreesOnUnenforceable: a cpu no CFS quota can enforce and a
// session larger than its network holds are refused alike by --dry-run
// and submit, at the file's line and column (or naming the flag that set
// them), before anything reaches schedd: neither passes a dry run to
// fail at submit or at start.
func TestDryRunAgreesOnUnenforceable(t *testing.T) {
	srv, addr := limitedSchedd(t)
	file := func(from, to string) string { return writeJob(t, strings.Replace(goodJob, from, to, 1)) }
	tiny := file("cpu    = 1", "cpu    = 0.0004")
	wide := file("size = 2", "size = 300\n    mode = \"multi-node\"")
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"cpu in the file", []string{tiny}, []string{tiny + ":7:14: Invalid cpu",
			"cpu 0.0004 is not valid; the least a container may have is 0.01 (10 millicores, the smallest CPU quota the kernel enforces)."}},
		{"session in the file", []string{wide}, []string{wide + ":4:12: Invalid cluster size",
			"cluster size 300 is not valid; use 1 (main1 alone) to 253 containers, the most one session's network holds."}},
		{"session by -n", []string{"-n", "300", writeJob(t, goodJob)}, []string{"-n 300: cluster size 300 is not valid; use 1 (main1 alone) to 253 containers"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dcode, _, derrs := runBsub(append([]string{"--addr", addr, "--dry-run"}, tt.args...)...)
			scode, _, serrs := runBsub(append([]string{"--addr", addr}, tt.args...)...)
			if dcode == 0 || scode == 0 || derrs != serrs {
				t.Fatalf("dry run: exit %d, %q\nsubmit: exit %d, %q", dcode, derrs, scode, serrs)
			}
			for _, w := range tt.want {
				if !strings.Contains(serrs, w) {
					t.Errorf("refusal %q does not hold %q", serrs, w)
				}
			}
		})
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Fatalf("%d jobs stored by refused submissions", n)
	}
}
