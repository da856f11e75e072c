# partitions.hcl: how troupe divides the cluster. See troupe-partitions(5).
#
# schedd reads this file when started with --partitions FILE, and again on
# `badmin reconfig`. A file with an error is refused with file:line:col and
# the running configuration stays. Without a file, schedd runs one
# partition, "default", of every node, with no limits and no accounts.
#
# Durations are "90m", "12h", "7d" or Slurm's "2-00:00:00"; sizes are
# "512GiB", "2TiB" (powers of 1024) or a number of bytes.

# Jobs that name no partition go here. Alternatively, set default = true
# in one partition block; without either, the first partition is the default.
default_partition = "batch"

# Jobs of users who are members of no account run under this account.
# Leave it out to refuse such users' jobs.
default_account = "general"

# fairshare: multifactor priority (below) with backfill (the default); the
#            head job, or the oldest past starvation_threshold, keeps a
#            reservation until it starts; backfill goes shortest first.
# easy:      first come, first served with EASY backfill.
# fcfs:      strict first come, first served, no backfill.
policy = "fairshare"

# Backfill: how many blocked jobs, highest priority first, hold a
# reservation that lower jobs may not delay. 1 is EASY backfill; more moves
# toward conservative backfill; 0 turns backfill off.
reservation_depth = 1

# Usage counts half as much after this long ("0" never forgets).
usage_half_life = "7d"

# Multifactor priority: each factor is between 0 and 1, the priority is
# the weighted sum minus the job's nice (its priority = -N setting).
priority {
  age         = 10000 # time waited, reaching 1 at max_age
  fair_share  = 10000 # 2^(-usage/shares) of the job's account and user
  job_size    = 20000 # the job's cpus relative to the cluster's
  tier        = 10000 # the partition's priority_tier relative to the highest
  max_age     = "7d"
  favor_small = false # the job-size factor favours large jobs (else small)
}

# What usage costs, per second held by a running container: per core, per
# GiB of memory, per GPU (a 0.5 share costs half).
billing {
  cpu    = 1.0
  memory = 0.25
  gpu    = 10.0
}

partition "batch" {
  # Names, ranges (gpu[01-16], n[1-4,8]) and globs ("cpu*", "*" for every
  # node); nodes whose nodelet reports one of labels belong too.
  nodes            = ["node[01-64]", "login*"]
  labels           = ["batch"]
  max_walltime     = "3d"
  default_walltime = "1h" # for jobs that give no walltime
  max_cluster_size = 64   # containers of one session
  max_output       = "10GiB" # per output or error file; the job ends past it
  # A job pending this long goes before every job that has waited less,
  # oldest first, and so to a reservation nothing may delay ("off": none).
  starvation_threshold = "6h"
  priority_tier    = 1
  allowed_modes    = ["single-node", "multi-node"]

  # What one user may hold in this partition at once. A job that would
  # break a limit waits with reason AccountLimit; one that could never
  # keep within it is refused at submission.
  user_limits {
    max_jobs        = 20  # started, not ended
    max_submit_jobs = 500 # pending and started
    max_cpu         = 512
    max_memory      = "2TiB"
  }
}

partition "gpu" {
  nodes            = ["gpu[01-16]"]
  labels           = ["a100", "h100"]
  max_walltime     = "2d"
  default_walltime = "4h"
  max_cluster_size = 16
  priority_tier    = 10
  gpu_quantum      = 0.25 # fractional GPUs come in quarters
  # Only these accounts (and their sub-accounts) may use the partition.
  allowed_accounts = ["research"]

  user_limits {
    max_jobs = 8
    max_gpu  = 16
  }
}

partition "debug" {
  nodes            = ["node[01-02]"]
  max_walltime     = "30m"
  max_cluster_size = 4
  priority_tier    = 100
  allowed_modes    = ["single-node"]
}

# The fair-share tree. An account's shares count against its siblings'
# (40 and 60 below: 40% and 60% of the cluster). users are members with
# one share each; a user block gives other shares or marks the user's
# default account (else it is the first account listing the user).
account "research" {
  shares = 60

  account "vision" {
    shares = 30
    users  = ["alice", "bob"]
  }

  account "nlp" {
    shares = 30
    users  = ["carol"]
    user "alice" {
      shares = 2
    }
  }
}

account "general" {
  shares = 40
  users  = ["dave"]
  user "carol" {
    default = true
  }
}

# Licenses: site-wide counts shared by every partition, such as the seats
# of a licensed solver. A job asks for some (licenses = { matlab = 2 },
# sbatch -L matlab:2, bsub -R "rusage[matlab=2]") and starts only when
# that many are free; jobs that run never hold more than count together.
license "matlab" {
  count = 20
}
