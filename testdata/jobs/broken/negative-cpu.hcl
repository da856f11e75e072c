job "cpu" {
  image   = "host"
  command = ["hostname"]

  resources {
    cpu = -2
  }
}
