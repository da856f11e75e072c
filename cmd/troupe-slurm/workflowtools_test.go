package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

// The batch scripts and sbatch command lines of the workflow tools that
// drive Slurm, as their scheduler code writes them
// (docs/workflow-tools.md): each is taken and means what Slurm reads.
func TestWorkflowToolSbatch(t *testing.T) {
	inDir(t)
	for _, c := range []struct {
		tool, script string
		args         []string
		name, output string
		walltime     time.Duration
		array        string
	}{
		{"dask-jobqueue SLURMCluster", `#!/usr/bin/env bash

#SBATCH -J dask-worker
#SBATCH -e logs/dask-worker-%J.err
#SBATCH -o logs/dask-worker-%J.out
#SBATCH -p cpu
#SBATCH -A physics
#SBATCH -n 1
#SBATCH -N 1
#SBATCH --cpus-per-task=2
#SBATCH --mem=4G
#SBATCH -t 00:30:00

/usr/bin/python3 -m distributed.cli.dask_worker tcp://10.0.0.1:8786 --nthreads 2
`, nil, "dask-worker", "logs/dask-worker-%j.out", 30 * time.Minute, ""},
		{"Parsl SlurmProvider", `#!/bin/bash

#SBATCH --job-name=parsl.slurm.1700000000.123
#SBATCH --output=/tmp/runinfo/submit_scripts/parsl.slurm.1700000000.123.stdout
#SBATCH --error=/tmp/runinfo/submit_scripts/parsl.slurm.1700000000.123.stderr
#SBATCH --nodes=1
#SBATCH --time=10
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --partition=cpu
#SBATCH --account=physics
#SBATCH --qos=normal
#SBATCH --constraint=haswell
#SBATCH --mem=2048g
#SBATCH --cpus-per-task=2

export JOBNAME="parsl.slurm.1700000000.123"

process_worker_pool.py
`, nil, "parsl.slurm.1700000000.123", "/tmp/runinfo/submit_scripts/parsl.slurm.1700000000.123.stdout", 10 * time.Minute, ""},
		{"Nextflow slurm executor", `#!/bin/bash
#SBATCH --array 0-2
#SBATCH -J nf-sweep
#SBATCH -o /dev/null
#SBATCH --no-requeue
#SBATCH --signal B:USR2@30
#SBATCH -c 2
#SBATCH -t 01:00:00
#SBATCH --mem-per-cpu 512M
#SBATCH -p cpu
#SBATCH -A physics
bash .command.run
`, nil, "nf-sweep", "/dev/null", time.Hour, "0-2"},
		{"R batchtools slurm-simple.tmpl", `#!/bin/bash

#SBATCH --job-name=job6f1c
#SBATCH --output=/w/reg/logs/job6f1c.log_%a
#SBATCH --error=/w/reg/logs/job6f1c.log_%a
#SBATCH --time=2
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=256
#SBATCH --partition='cpu'
#SBATCH --array=1-3

Rscript -e 'batchtools::doJobCollection("/w/reg/jobs/job6f1c.rds")'
`, nil, "job6f1c", "/w/reg/logs/job6f1c.log_%a", 2 * time.Minute, "1-3"},
		{"Snakemake 9 Slurm plugin (script on stdin)", "#!/bin/sh\nsnakemake --target-jobs 'all:' --wait-for-files x\n",
			[]string{"--parsable", "--job-name", "6f1c-uuid", "--output", "/w/.snakemake/slurm_logs/rule_all/%j.log", "--export=ALL",
				"--comment", "rule_all", "-A", "physics", "-p", "cpu", "-t", "10", "-C", "haswell", "--qos=normal", "--mem", "1000",
				"--requeue", "--reservation=r1", "--exclude=node9", "--ntasks=1", "--cpus-per-task=2", "-D", "/w"},
			"6f1c-uuid", "/w/.snakemake/slurm_logs/rule_all/%j.log", 10 * time.Minute, ""},
		{"Open OnDemand Slurm adapter", "#!/bin/bash\nhostname\n",
			[]string{"-H", "--no-requeue", "-D", "/w", "--mail-user", "a@example.org", "--mail-type", "ALL", "-J", "ood", "-i", "/dev/null",
				"-o", "/w/out.log", "-e", "/w/err.log", "--reservation", "r1", "-p", "cpu", "--priority", "5", "--begin", "2026-01-01T00:00:00",
				"-A", "physics", "-t", "01:00:00", "-a", "1-4%2", "--qos", "normal", "--gpus-per-node", "1", "-n", "2",
				"-d", "afterok:3", "--export", "ALL,FOO", "--parsable"},
			"ood", "/w/out.log", time.Hour, "1-4"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			args := c.args
			stdin := c.script
			if c.args == nil {
				writeFile(t, "job.sh", c.script)
				args, stdin = []string{"job.sh"}, ""
			}
			got, code, out, errs := sbatchRun(t, stdin, args...)
			if code != 0 || !strings.Contains(out, "42") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
			s := got.Spec
			array := ""
			if s.Array != nil {
				array = s.Array.Range
			}
			if s.Name != c.name || s.Output != c.output || s.Walltime != c.walltime || array != c.array {
				t.Errorf("name %q, output %q, walltime %v, array %q; want %q, %q, %v, %q", s.Name, s.Output, s.Walltime, array, c.name, c.output, c.walltime, c.array)
			}
			if want := map[bool]string{true: "r1"}[slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--reservation") })]; s.Reservation != want {
				t.Errorf("reservation %q, want %q", s.Reservation, want)
			}
		})
	}
}

// The queries the workflow tools make, with the output each parses.
func TestWorkflowToolQueries(t *testing.T) {
	fakeSchedd(t)
	for _, c := range []struct {
		tool string
		args []string
		out  string
	}{
		{"Parsl: sacct works", []string{"sacct", "-X"}, ""},
		{"Parsl: sacct status", []string{"sacct", "-X", "--noheader", "--format=jobid,state%20", "--job", "30"}, "30                      COMPLETED \n"},
		{"Parsl: squeue status", []string{"squeue", "--noheader", "--format=%i %t", "--job", "12"}, "12 R\n"},
		{"Nextflow: squeue", []string{"squeue", "--noheader", "-o", "%i %t", "-t", "all", "-p", "gpu", "-u", "alice"}, "12 R\n"},
		{"Nextflow: squeue --only-job-state", []string{"squeue", "--noheader", "-o", "%i %t", "-t", "all", "--only-job-state"}, "3 CD\n7 F\n9 CA\n12 R\n15 PD\n16 PD\n30 CD\n"},
		{"Snakemake 9: sacct", []string{"sacct", "-X", "--parsable2", "--clusters", "all", "--noheader", "--format=JobIdRaw,State",
			"--starttime", "2000-01-01T00:00", "--endtime", "now", "--name", "snakejob_a"}, "30|COMPLETED\n"},
		{"Snakemake 9: squeue", []string{"squeue", "--format=%i|%T", "--states=all", "--noheader", "--name", "snakejob_a"}, "30|COMPLETED\n"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			code, out, errs := runCmd(t, c.args...)
			if code != 0 || (c.out != "" && out != c.out) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", c.args, code, out, errs, c.out)
			}
		})
	}
}

// Open OnDemand's sinfo calls: the cluster's node and CPU counts
// (A/I/O/T), its nodes' GPUs by name, and each node's CPUs, name and
// features between its separators.
func TestWorkflowToolSinfo(t *testing.T) {
	fakeSchedd(t)
	for _, c := range []struct {
		args []string
		out  string
	}{
		// No partition in the format: one line for the whole cluster.
		{[]string{"sinfo", "-aho", "%F/%C"}, "2/0/1/3/25/103/2/130\n"},
		{[]string{"sinfo", "-ho", "\x1e%c\x1f%n\x1f%f"}, "\x1e2+\x1fnode01,node02,node03\x1fgpu,rack=a\n"},
		{[]string{"sinfo", "-h", "-N", "-o", "\x1e%c\x1f%n\x1f%f"}, "\x1e64\x1fnode01\x1fgpu,rack=a\n\x1e64\x1fnode02\x1fgpu,rack=a\n\x1e2\x1fnode03\x1f(null)\n"},
		{[]string{"sinfo", "-ahNO", "nodehost:10,gres:8,gresused:8,statelong"}, "node01    gpu:4   gpu:1   mixed               \nnode02    gpu:4   gpu:2   mixed               \nnode03    (null)  (null)  down*               \n"},
	} {
		code, out, errs := runCmd(t, c.args...)
		if code != 0 || out != c.out {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", c.args, code, out, errs, c.out)
		}
	}
}

// Open OnDemand's Slurm adapter: squeue -O with every field it knows,
// each ending with the unit separator, a header line first; sacct with
// its accounting fields; scontrol hold and release.
func TestWorkflowToolOOD(t *testing.T) {
	s := fakeSchedd(t)
	for _, verb := range []string{"hold", "release"} {
		s.Handle("POST /v1/jobs/{id}/"+verb, func(w http.ResponseWriter, r *http.Request) {
			clitest.JSON(w, http.StatusOK, 8, api.Job{State: api.JobHeld})
		})
	}
	const us = "\x1f"
	fields := []string{"Account", "JobID", "BatchHost", "MinCpus", "NumCPUs", "MinTmpDisk", "NumNodes", "EndTime", "Dependency",
		"Feature", "ArrayJobID", "GroupName", "GroupID", "OverSubscribe", "Sockets", "JobArrayID", "Cores", "Name", "Threads",
		"Comment", "ArrayTaskID", "TimeLimit", "TimeLeft", "MinMemory", "TimeUsed", "ReqNodes", "NodeList", "Command",
		"Contiguous", "QOS", "Partition", "PriorityLong", "Reason", "StartTime", "StateCompact", "State", "UserName", "UserID",
		"Reservation", "SubmitTime", "WCKey", "Licenses", "ExcNodes", "CoreSpec", "Nice", "SchedNodes", "SCT", "WorkDir",
		"tres-alloc", "tres-per-node"}
	code, out, errs := runCmd(t, "squeue", "--all", "--states=all", "--noconvert", "-O", strings.Join(fields, ":"+us+",")+":"+us+",", "-j", "12")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("squeue -O: exit %d, stderr %q\n%s", code, errs, out)
	}
	vals := strings.Split(strings.TrimSuffix(lines[1], us), us)
	if len(vals) != len(fields) || vals[1] != "12" || vals[34] != "R" || vals[35] != "RUNNING" || vals[36] != "alice" || vals[30] != "gpu" {
		t.Errorf("squeue -O values: %q", vals)
	}
	code, out, errs = runCmd(t, "sacct", "-P", "--delimiter", us, "-n", "--units", "G", "--allocations", "-o",
		"User,Group,JobId,JobName,Elapsed,ReqMem,AllocCPUS,ReqCPUS,Timelimit,State,TotalCPU,MaxRSS,Partition,Submit,Start,End,ReqTRES", "-j", "12")
	if vals := strings.Split(strings.TrimSuffix(out, "\n"), us); code != 0 || len(vals) != 17 || vals[2] != "12" || vals[9] != "RUNNING" || vals[8] != "02:00:00" {
		t.Errorf("sacct: exit %d, stderr %q, %q", code, errs, vals)
	}
	for _, verb := range []string{"hold", "release"} {
		if code, _, errs := runCmd(t, "scontrol", verb, "15"); code != 0 {
			t.Errorf("scontrol %s 15: exit %d, %q", verb, code, errs)
		}
	}
	if got := s.Requests(); !slices.Contains(got, "POST /v1/jobs/15/hold") || !slices.Contains(got, "POST /v1/jobs/15/release") {
		t.Errorf("requests %q", got)
	}
}
