partition "cpu" {
  nodes            = ["n[1-4]"]
  max_walltime     = "1h"
  max_cluster_size = 8
  max_output       = "1MiB"
  starvation_threshold = "2h"
}

partition "gpu" {
  default      = true
  labels       = ["gpu"]
  gpu_quantum  = 0.5
  allowed_accounts = ["lab"]
  starvation_threshold = "off"
}

account "lab" {
  shares = 2
  users  = ["ada"]
}

account "other" {
  users = ["bob"]
}
