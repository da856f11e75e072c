package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// batchtoolsScript maps x*2 over 1:3 twice with R's batchtools and its
// own templates: once through Slurm (sbatch of slurm-simple.tmpl, the
// three jobs as one array job whose elements squeue -r lists as ID_1 …
// ID_3), once through LSF (bsub < lsf-simple.tmpl, bjobs -u $USER -w -p
// and -r), and prints each run's results.
const batchtoolsScript = `
library(batchtools)
run = function(name, cf, resources) {
  reg = makeRegistry(file.dir = name, seed = 1)
  reg$cluster.functions = cf
  batchMap(function(x) x * 2, x = 1:3, reg = reg)
  ids = findJobs(reg = reg)
  ids$chunk = 1L
  submitJobs(ids, resources = resources, reg = reg)
  if (!waitForJobs(reg = reg, timeout = 240)) {
    print(getStatus(reg = reg))
    print(getErrorMessages(reg = reg))
    stop(name, ": the jobs did not all end well")
  }
  cat(name, ":", unlist(reduceResultsList(reg = reg)), "\n")
}
run("slurm", makeClusterFunctionsSlurm("slurm-simple", scheduler.latency = 0.5, fs.latency = 0),
  list(walltime = 120, ncpus = 1, memory = 256, chunks.as.arrayjobs = TRUE))
run("lsf", makeClusterFunctionsLSF("lsf-simple", scheduler.latency = 0.5, fs.latency = 0),
  list(walltime = 120, memory = "256MB", queue = "default"))
`

// TestBatchtools runs Debian's R batchtools, unmodified, as nobody,
// against troupe's Slurm and LSF commands with the templates it ships.
func TestBatchtools(t *testing.T) {
	needRunc(t)
	rs, err := exec.LookPath("Rscript")
	if err != nil || exec.Command(rs, "-e", "library(batchtools)").Run() != nil {
		t.Skip("SKIP: R's batchtools is not installed (apt-get install r-cran-batchtools; contrib/dev/install-deps does)")
	}
	c := startCluster(t, 1, "2")
	base := searchable(t)
	dir := dirOf(t, nobodyUser, 0o755, base, "bt")
	links := slurmLinks(t, filepath.Join(dir, ".troupe"))
	if err := os.WriteFile(filepath.Join(dir, "run.R"), []byte(batchtoolsScript), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := c.toolAsNobody(t, 8*time.Minute, dir, links, rs, "run.R")
	if err != nil || !strings.Contains(string(out), "slurm : 2 4 6 \n") || !strings.Contains(string(out), "lsf : 2 4 6 \n") {
		t.Fatalf("Rscript: %v\n%s", err, out)
	}
}
