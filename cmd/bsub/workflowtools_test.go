package main

import (
	"strings"
	"testing"
	"time"
)

// The submissions the workflow tools that drive LSF make, as their
// scheduler code writes them (docs/workflow-tools.md): each is taken,
// and means what LSF reads in it.
func TestWorkflowToolSubmissions(t *testing.T) {
	inDir(t)
	for _, c := range []struct {
		tool  string
		stdin string
		args  []string
		check func(t *testing.T, name, output, errFile, partition string, cpu float64, walltime time.Duration, array string)
	}{
		{"dask-jobqueue LSFCluster (bsub < script)", `#!/usr/bin/env bash

#BSUB -J dask-worker
#BSUB -e logs/dask-worker-%J.err
#BSUB -o logs/dask-worker-%J.out
#BSUB -q cpu
#BSUB -P "physics"
#BSUB -n 2
#BSUB -R "span[hosts=1]"
#BSUB -M 4000000
#BSUB -W 00:30

/usr/bin/python3 -m distributed.cli.dask_worker tcp://10.0.0.1:8786 --nthreads 2 --memory-limit 3.73GiB --name dummy-name --nanny --death-timeout 60
`, nil, func(t *testing.T, name, output, errFile, partition string, cpu float64, walltime time.Duration, array string) {
			if name != "dask-worker" || output != "logs/dask-worker-%j.out" || errFile != "logs/dask-worker-%j.err" || partition != "cpu" || cpu != 2 || walltime != 30*time.Minute {
				t.Errorf("name %q, output %q, error %q, partition %q, cpu %v, walltime %v", name, output, errFile, partition, cpu, walltime)
			}
		}},
		{"Parsl LSFProvider (bsub script)", `#!/bin/bash

#BSUB -W 10
#BSUB -J parsl.lsf.block-0.1700000000.123
#BSUB -o /tmp/runinfo/submit_scripts/parsl.lsf.block-0.1700000000.123.submit.stdout
#BSUB -e /tmp/runinfo/submit_scripts/parsl.lsf.block-0.1700000000.123.submit.stderr
#BSUB -P physics
#BSUB -q cpu
#BSUB -n 4
#BSUB -R "span[ptile=4]"

export JOBNAME="parsl.lsf.block-0.1700000000.123"

process_worker_pool.py
`, nil, func(t *testing.T, name, output, errFile, partition string, cpu float64, walltime time.Duration, array string) {
			if name != "parsl.lsf.block-0.1700000000.123" || partition != "cpu" || cpu != 4 || walltime != 10*time.Minute ||
				!strings.HasSuffix(output, ".submit.stdout") {
				t.Errorf("name %q, output %q, partition %q, cpu %v, walltime %v", name, output, partition, cpu, walltime)
			}
		}},
		{"Nextflow lsf executor (bsub < .command.run)", `#!/bin/bash
#BSUB -o /work/ab/cdef/.command.log
#BSUB -q cpu
#BSUB -n 2
#BSUB -R "span[hosts=1]"
#BSUB -W 01:00
#BSUB -M 1024MB
#BSUB -R "select[mem>=2048MB] rusage[mem=1024MB]"
#BSUB -J nf-sweep[1-3]
#BSUB -G physics
bash .command.run
`, nil, func(t *testing.T, name, output, errFile, partition string, cpu float64, walltime time.Duration, array string) {
			if name != "nf-sweep" || array != "1-3" || output != "/work/ab/cdef/.command.log" || cpu != 2 || walltime != time.Hour {
				t.Errorf("name %q, array %q, output %q, cpu %v, walltime %v", name, array, output, cpu, walltime)
			}
		}},
		{"Snakemake 9 LSF plugin (command line)", "", []string{"-J", "Snakemake_all:sample=a___(6f1c)", "-o", "/w/.snakemake/lsf_logs/all/a/6f1c.log",
			"-e", "/w/.snakemake/lsf_logs/all/a/6f1c.log", "-env", "all", "-P", "physics", "-q", "cpu", "-W", "10", "-n", "2",
			"-R", "rusage[mem=1000]", "-R", "span[hosts=1]", "-cwd", "/w", "snakemake --snakefile Snakefile --target-jobs all:sample=a"},
			func(t *testing.T, name, output, errFile, partition string, cpu float64, walltime time.Duration, array string) {
				if !strings.HasSuffix(name, "6f1c_") || output != "/w/.snakemake/lsf_logs/all/a/6f1c.log" || partition != "cpu" || cpu != 2 || walltime != 10*time.Minute {
					t.Errorf("name %q, output %q, partition %q, cpu %v, walltime %v", name, output, partition, cpu, walltime)
				}
			}},
		{"Open OnDemand LSF adapter (bsub with the script on stdin)", "#!/bin/bash\nhostname\n", []string{"-P", "physics", "-cwd", "/w", "-J", "ood-job[1-4]",
			"-q", "cpu", "-H", "-rn", "-W", "60", "-n", "2", "-env", "all,FOO", "-o", "/w/out.log", "-e", "/w/err.log"},
			func(t *testing.T, name, output, errFile, partition string, cpu float64, walltime time.Duration, array string) {
				if name != "ood-job" || array != "1-4" || output != "/w/out.log" || errFile != "/w/err.log" || walltime != time.Hour {
					t.Errorf("name %q, array %q, output %q, error %q, walltime %v", name, array, output, errFile, walltime)
				}
			}},
		{"R batchtools LSF template (bsub < job.sh)", `#BSUB -J job6f1c                             # Name of the job
#BSUB -o /w/reg/logs/job6f1c.log                             # Output is sent to logfile, stdout + stderr by default
#BSUB -q cpu                      # Job queue
#BSUB -W 2    # Walltime (LSF requires minutes, batchtools uses seconds)
#BSUB -M 256MB                     # Memory requirements, e.g. "5000KB", "500MB", "5GB" etc.

export DEBUGME=

Rscript -e 'batchtools::doJobCollection("/w/reg/jobs/job6f1c.rds")'
`, nil, func(t *testing.T, name, output, errFile, partition string, cpu float64, walltime time.Duration, array string) {
			if name != "job6f1c" || output != "/w/reg/logs/job6f1c.log" || partition != "cpu" || walltime != 2*time.Minute {
				t.Errorf("name %q, output %q, partition %q, walltime %v", name, output, partition, walltime)
			}
		}},
	} {
		t.Run(c.tool, func(t *testing.T) {
			got, code, out, errs := submitted(t, c.stdin, c.args...)
			if code != 0 || !strings.HasPrefix(out, "Job <") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
			s := got.Spec
			array := ""
			if s.Array != nil {
				array = s.Array.Range
			}
			c.check(t, s.Name, s.Output, s.Error, s.Partition, s.Resources.CPU*float64(max(s.Cluster.Size, 1)), s.Walltime, array)
		})
	}
}
