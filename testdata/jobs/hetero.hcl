# A heterogeneous session, like a Slurm hetjob: main1 coordinates, two
# parameter servers without GPUs, four GPU workers. cluster size is left
# out: it becomes 1 + 2 + 4 = 7.
job "hetero" {
  walltime = "2-00:00:00" # two days
  priority = -100

  cluster {
    mode = "multi-node"
  }

  resources {
    cpu    = 1
    memory = "2G"
  }

  image   = "tf-2.16"
  command = ["python", "coordinator.py"]

  role "ps" {
    replicas = 2
    command  = ["python", "ps.py"]
    resources {
      cpu    = 8
      memory = "32GiB"
    }
  }

  role "worker" {
    replicas = 4
    image    = "tf-2.16-gpu"
    command  = ["python", "worker.py"]
    resources {
      cpu = 4
      gpu = 2
    }
  }
}
