job "gpu" {
  image   = "host"
  command = ["nvidia-smi"]

  resources {
    gpu = 1.5
  }
}
