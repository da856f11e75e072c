job "train" {
  partition = "gpu"              # admin-defined partition (resource group)
  account   = "vision"           # fair-share account; default: the user's default
  walltime  = "2h"               # limit; backfill uses it; killed at expiry: TIMEOUT
  priority  = 0                  # user nice, lowers only, like Slurm --nice

  cluster {
    size = 4                     # containers: main1 + sub1..sub3
    mode = "multi-node"          # "single-node" | "multi-node"
  }

  resources {                    # per container, not per job
    cpu    = 4
    memory = "16GiB"
    gpu    = 0.5                 # fractional GPU (fGPU)
  }

  image   = "pytorch-2.3"        # catalog alias | "host" | rootfs dir | .sif | OCI layout/archive
  command = ["mpirun", "python", "train.py"]  # runs in main1; the job ends when it exits
  workdir = "/home/work/data"
  env     = { EPOCHS = "10" }

  mount "data" {                 # mounted at the same place in every container
    source   = "/shared/datasets/imagenet"
    target   = "/home/work/data"
    readonly = true
  }

  output = "train-%j.out"        # %j job id, %h container host (main1…), %u user
}
