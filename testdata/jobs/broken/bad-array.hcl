job "sweep" {
  image   = "host"
  command = ["true"]
  array {
    range       = "1-10,5-20"
    max_running = -2
  }
}
