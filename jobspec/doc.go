// Package jobspec reads troupe job files: it parses the HCL (or HCL JSON)
// a user hands to bsub, decodes it into a Job, validates it, and reports
// every problem with the file:line:col where it was written. It does no
// I/O beyond ParseFile's read, holds no state and talks to no one; schedd
// and the commands build on it.
//
// # The file
//
// A job file holds exactly one job block, optionally preceded by variable
// and locals blocks:
//
//	variable "nodes" { default = 4 }      # var.nodes; bsub -var nodes=8
//	locals { data = "/shared/datasets" }  # local.data
//
//	job "train" {
//	  partition = "gpu"          # admin-defined partition
//	  account   = "vision"       # fair-share account
//	  walltime  = "2h"           # "90m", "1d12h", Slurm's "1:30:00"; a bare number is minutes
//	  priority  = 0              # nice: 0 (default) down to -10000; users only lower it
//	  ssh       = false          # one container: troupe's ssh and keys (2+ always have them)
//	  cluster {
//	    size = var.nodes         # main1 + sub1..sub3
//	    mode = "multi-node"      # or "single-node"
//	  }
//	  resources {                # per container
//	    cpu    = 4
//	    memory = "16GiB"
//	    gpu    = 0.5
//	  }
//	  image   = "pytorch-2.3"    # required
//	  command = ["mpirun", "python", "train.py"]  # runs in main1; required
//	  workdir = "/home/work/data"
//	  env     = { EPOCHS = "10" }
//	  mount "data" {
//	    source   = "${local.data}/imagenet"
//	    target   = "/home/work/data"
//	    readonly = true
//	  }
//	  output = "train-%j.out"    # %j job id, %h host, %u user, %% a literal %
//	  licenses = { matlab = 2 }  # site-wide licenses held while it runs (partitions.hcl)
//	  role "sub" {               # per-role overrides
//	    command = ["python", "serve.py"]
//	  }
//	  service "board" {          # schedd proxies /apps/JOB/board/ to main1's port
//	    port        = 6006       # 1..65535, each once
//	    protocol    = "http"     # the only one (WebSocket included)
//	    keep_prefix = false      # true: the app sees /apps/JOB/board/… (its base URL)
//	  }
//	}
//
// Expressions, var.NAME, local.NAME and the usual functions (upper, lower,
// format, join, concat, merge, min, max, try, …; see functions in eval.go)
// work as in other HCL tools. Functions never read files, the clock or the
// environment. A value set to null counts as left out.
//
// # Defaults and units
//
// Left out: cluster size 1 (main1 alone), mode "single-node", cpu 1,
// memory "1GiB", workdir "/home/work", gpu 0, walltime 0 (the partition's
// default), no partition or account (schedd's defaults). cpu may be
// fractional. memory is a string with a unit or a number of bytes (see
// ParseMemory: K/M/G/T and KiB…TiB are powers of 1024, KB…TB of 1000).
// gpu is a fraction of one GPU (0 < gpu <= 1) or a whole number of GPUs.
// Per container, cpu is at least MinCPU (judged as the millicores
// units.MilliCPU makes of it, the least CPU quota the kernel enforces)
// and at most MaxCPU, memory at most MaxMemory and gpu MaxGPU; a
// session has at most MaxClusterSize containers, all its network holds;
// NUL bytes (in arguments, environment values and paths), relative or
// ".."-climbing image paths are refused. Job.InputSize measures the job's
// text and Job.CheckInput applies schedd's cap on it (DefaultMaxInput).
//
// # Roles
//
// A session is main1, then sub1…sub(size-1), then the containers of other
// roles in file order (worker1, worker2, …); see Job.Containers and
// Job.Replicas. main1 runs the job's command; subs serve SSH and wait
// unless role "sub" gives a command. A role "NAME" block (lowercase
// letters) may override image, command and resources for its containers
// (resources it leaves out come from the job's) and, except for main,
// give replicas. When a role other than main gives replicas, cluster size
// is the total (main1 + replicas of each role): leave size out, or it must
// match.
//
// # Services
//
// A service "NAME" block (lowercase letters, digits and '-', starting
// with a letter; at most MaxServices) declares a TCP port main1 serves
// over HTTP. schedd proxies /apps/JOB/NAME/ to it for the job's owner,
// through the nodelet, which dials only declared ports and only inside
// the container's network namespace.
//
// # Errors
//
// Parse collects every error, not just the first, as hcl.Diagnostics in
// source order. Each has a Subject range pointing at the offending value
// (or the job block's header for something missing), a short Summary and
// a Detail saying what would be valid. FormatDiagnostic writes one line:
//
//	train.hcl:7:12: Invalid cluster mode; cluster mode "multinode" is not valid; use "single-node" or "multi-node".
//
// and WriteDiagnostics writes hcl's usual form, with the source line:
//
//	Error: Invalid cluster mode
//
//	  on train.hcl line 7, in job "train":
//	   7:     mode = "multinode"
//
//	cluster mode "multinode" is not valid; use "single-node" or "multi-node".
//
// Parse returns a nil Job exactly when there are errors; warnings (such as
// memory = 1024, which is bytes) come with a Job. A decoded Job keeps the
// range of each setting in Job.Ranges; Job.Range("cluster.size") lets
// later checks, such as schedd's partition limits, point at the file too.
// Job.Validate re-checks a Job from elsewhere (an API body) with the same
// rules.
//
// Of troupe it imports internal/units and internal/hclattr only; it must
// not import internal/api, sched/... or nodelet/...: bsub, schedd and
// the API import it, never the other way.
package jobspec
