job "mode" {
  image   = "host"
  command = ["hostname"]

  cluster {
    size = 2
    mode = "multinode"
  }
}
