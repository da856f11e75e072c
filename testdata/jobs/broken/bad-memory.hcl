job "memory" {
  image   = "host"
  command = ["hostname"]

  resources {
    memory = "16GX"
  }
}
