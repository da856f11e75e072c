# Every error in this file is reported, not just the first.
job "many" {
  walltime = "0"
  priority = 5

  cluster {
    size = 0
    mode = "multinode"
  }

  resources {
    cpu    = 0
    memory = "lots"
    gpu    = 2.5
  }

  command = []
  workdir = "work"
  env     = { "1BAD" = "x", BACKENDAI_CLUSTER_SIZE = "9" }

  mount "data" {
    source = "relative/src"
    target = "/proc/data"
  }

  output = "out-%q%"

  role "Main" {
    replicas = 2
  }

  role "main" {
    replicas = 3
  }
}
