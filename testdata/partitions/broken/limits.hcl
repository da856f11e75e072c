policy = "lottery"
reservation_depth = -1

partition "cpu" {
  nodes            = ["n1"]
  max_walltime     = "1h"
  default_walltime = "2h"
  max_cluster_size = 0
  gpu_quantum      = 0.3
  allowed_modes    = ["single-node", "ring"]
  max_output       = "-5GiB"
  user_limits {
    max_jobs   = 0
    max_memory = "lots"
    max_cpu    = 0.005
  }
}
